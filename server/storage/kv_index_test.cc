// Copyright 2026 The kvstore Authors.

#include "server/storage/kv_index.h"

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

using layout::Slot;

// An index over heap memory with a tiny data arena that entries are written
// into by the test (the index compares keys there).
class IndexFixture : public ::testing::Test {
 protected:
  void Init(uint64_t buckets) {
    geometry_.bucket_count = buckets;
    geometry_.seed = 7;
    buckets_.assign(geometry_.bytes(), 0);
    data_.assign(1 << 20, 0);
    next_ = 0;
    index_ = std::make_unique<KvIndex>(buckets_.data(), geometry_, data_.data(), data_.size());
  }
  Slot Write(const std::string& key, const std::string& value) {
    const uint64_t size = layout::EntryBytes(key.size(), value.size());
    layout::EncodeEntry(data_.data() + next_, key, value, 1);
    Slot s{0, next_, size};
    next_ += size;
    return s;
  }
  // Keys whose two candidate buckets are exactly {b0, b1} (in either order).
  std::vector<std::string> KeysForBuckets(uint64_t b0, uint64_t b1, size_t n) {
    std::vector<std::string> out;
    for (int i = 0; out.size() < n; ++i) {
      std::string k = "k" + std::to_string(i);
      auto h = layout::HashKey(k, geometry_.seed, geometry_.bucket_count);
      if ((h.bucket[0] == b0 && h.bucket[1] == b1) || (h.bucket[0] == b1 && h.bucket[1] == b0)) {
        out.push_back(k);
      }
    }
    return out;
  }

  layout::IndexGeometry geometry_;
  std::vector<char> buckets_, data_;
  uint64_t next_ = 0;
  std::unique_ptr<KvIndex> index_;
};

TEST_F(IndexFixture, InsertLookupReplaceRemove) {
  Init(64);
  Slot a = Write("alpha", "1");
  ASSERT_TRUE(index_->Upsert("alpha", a).ok());
  ASSERT_TRUE(index_->Lookup("alpha").has_value());
  EXPECT_EQ(index_->Lookup("alpha")->offset, a.offset);
  EXPECT_FALSE(index_->Lookup("beta").has_value());
  Slot a2 = Write("alpha", "2");
  auto old = index_->Upsert("alpha", a2);
  ASSERT_TRUE(old.ok());
  ASSERT_EQ(old->size(), 1u);
  EXPECT_EQ((*old)[0].offset, a.offset);
  EXPECT_EQ(index_->size(), 1u);
  auto removed = index_->Remove("alpha");
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].offset, a2.offset);
  EXPECT_FALSE(index_->Lookup("alpha").has_value());
  EXPECT_EQ(index_->size(), 0u);
  EXPECT_TRUE(index_->Remove("alpha").empty());
}

TEST_F(IndexFixture, BothBucketsFullIsResourceExhaustedAndRecoverable) {
  Init(4);
  // With 4 buckets, pick keys that all map to buckets {0,1}: 16 slots.
  std::vector<std::string> keys = KeysForBuckets(0, 1, 17);
  for (size_t i = 0; i < 16; ++i) {
    ASSERT_TRUE(index_->Upsert(keys[i], Write(keys[i], "v")).ok()) << i;
  }
  auto full = index_->Upsert(keys[16], Write(keys[16], "v"));
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.status().message()), ::testing::HasSubstr("index full"));
  // Every stored key is still there, and overwriting one still works.
  for (size_t i = 0; i < 16; ++i) EXPECT_TRUE(index_->Lookup(keys[i]).has_value()) << i;
  EXPECT_TRUE(index_->Upsert(keys[3], Write(keys[3], "new")).ok());
  // Deleting makes room.
  ASSERT_FALSE(index_->Remove(keys[0]).empty());
  EXPECT_TRUE(index_->Upsert(keys[16], Write(keys[16], "v")).ok());
  EXPECT_TRUE(index_->Lookup(keys[16]).has_value());
}

TEST_F(IndexFixture, FingerprintCollisionComparesKeys) {
  Init(1);  // one bucket: every key shares it
  std::map<uint16_t, std::string> by_fp;
  std::string a, b;
  for (int i = 0; a.empty(); ++i) {
    std::string k = "c" + std::to_string(i);
    uint16_t fp = layout::HashKey(k, 7, 1).fingerprint;
    auto [it, inserted] = by_fp.emplace(fp, k);
    if (!inserted) {
      a = it->second;
      b = k;
    }
  }
  ASSERT_TRUE(index_->Upsert(a, Write(a, "A")).ok());
  EXPECT_FALSE(index_->Lookup(b).has_value());
  ASSERT_TRUE(index_->Upsert(b, Write(b, "B")).ok());
  EXPECT_NE(index_->Lookup(a)->offset, index_->Lookup(b)->offset);
  EXPECT_EQ(index_->size(), 2u);
}

TEST_F(IndexFixture, FirstRefusalComesAtHighLoad) {
  Init(4096);
  data_.assign(64 << 20, 0);
  index_ = std::make_unique<KvIndex>(buckets_.data(), geometry_, data_.data(), data_.size());
  size_t n = 0;
  for (;; ++n) {
    std::string k = "load" + std::to_string(n);
    if (!index_->Upsert(k, Write(k, "")).ok()) break;
  }
  const double load = static_cast<double>(n) / index_->capacity();
  std::printf("first refusal at %zu of %lu slots (load %.2f)\n", n, index_->capacity(), load);
  // Two choices of 8-slot buckets without displacement: well above the
  // ~30% that filling the first bucket first reached.
  EXPECT_GT(load, 0.6);
}

TEST_F(IndexFixture, RewrittenHeadersAreNotTrusted) {
  Init(16);
  Slot s = Write("victim", "v");
  ASSERT_TRUE(index_->Upsert("victim", s).ok());
  // A lease holder rewrites the header with an absurd key length.
  auto* h = reinterpret_cast<layout::EntryHeader*>(data_.data() + s.offset);
  h->key_len = 0x7fffffff;
  EXPECT_FALSE(index_->Lookup("victim").has_value());
  std::vector<std::string> keys;
  EXPECT_EQ(index_->Scan(0, 100, "", &keys), 0u);
  EXPECT_TRUE(keys.empty());
}

TEST_F(IndexFixture, ReplaceIfOnlyWhenUnchanged) {
  Init(16);
  Slot s1 = Write("k", "1"), s2 = Write("k", "2"), s3 = Write("k", "3");
  ASSERT_TRUE(index_->Upsert("k", s1).ok());
  EXPECT_TRUE(index_->ReplaceIf("k", s1, s2));
  EXPECT_FALSE(index_->ReplaceIf("k", s1, s3));  // stale expectation
  EXPECT_EQ(index_->Lookup("k")->offset, s2.offset);
}

TEST_F(IndexFixture, ScanListsEveryKeyOnce) {
  Init(32);
  std::set<std::string> want;
  for (int i = 0; i < 100; ++i) {
    std::string k = (i % 2 ? "user:" : "item:") + std::to_string(i);
    ASSERT_TRUE(index_->Upsert(k, Write(k, "x")).ok());
    if (i % 2) want.insert(k);
  }
  std::vector<std::string> got;
  uint64_t cursor = 0;
  int pages = 0;
  do {
    cursor = index_->Scan(cursor, 7, "user:", &got);
    ++pages;
  } while (cursor != 0);
  EXPECT_GT(pages, 2);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
  EXPECT_EQ(got.size(), want.size());
}

}  // namespace
}  // namespace server
}  // namespace kvstore
