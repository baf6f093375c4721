// Copyright 2026 The kvstore Authors.

#include "server/storage/batch_prefetch.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/kv_store.h"
#include "server/storage/memory_pool.h"

namespace kvstore {
namespace server {
namespace {

struct Store {
  std::unique_ptr<MemoryPool> pool;
  std::unique_ptr<KvStore> store;
};

Store MakeStore() {
  MemoryPoolOptions po;
  po.data_bytes = 4 << 20;
  po.index_bytes = 1 << 20;
  Store s;
  s.pool = std::move(MemoryPool::Create(po).value());
  KvStoreOptions so;
  so.segment_bytes = 1 << 20;
  so.cleaner_interval = absl::ZeroDuration();
  s.store = std::move(KvStore::Create(s.pool.get(), so).value());
  return s;
}

// Which items' keys were asked for, in order, over a whole batch of n.
std::vector<size_t> KeysAsked(const KvStore* store, size_t n,
                              const std::vector<std::string>& keys) {
  std::vector<size_t> asked;
  auto key_at = [&](size_t i) {
    asked.push_back(i);
    return absl::string_view(keys[i]);
  };
  BatchPrefetch<decltype(key_at)> prefetch(store, n, key_at);
  for (size_t i = 0; i < n; ++i) prefetch.Before(i);
  return asked;
}

// Each key is read (and hashed) once, in order, whatever the batch's
// length; a batch of one has nothing to overlap and is left alone.
TEST(BatchPrefetch, AsksForEachKeyOnceInOrder) {
  Store s = MakeStore();
  const std::vector<std::string> keys = {"a", "b", "", "d", "e", "f", "g"};
  for (size_t n = 0; n <= keys.size(); ++n) {
    std::vector<size_t> want;
    for (size_t i = 0; n > 1 && i < n; ++i) want.push_back(i);
    EXPECT_EQ(KeysAsked(s.store.get(), n, keys), want) << "n=" << n;
  }
  EXPECT_TRUE(KeysAsked(nullptr, keys.size(), keys).empty());
}

// Hints only: a batch prefetched, with keys present, absent and empty,
// reads back exactly what was stored.
TEST(BatchPrefetch, ChangesNothingTheStoreAnswers) {
  Store s = MakeStore();
  auto w = s.store->NewWriter();
  ASSERT_TRUE(s.store->Put(w.get(), "b", "2").ok());
  ASSERT_TRUE(s.store->Put(w.get(), "d", "4").ok());
  const std::vector<std::string> keys = {"a", "b", "", "d", "e"};
  KeysAsked(s.store.get(), keys.size(), keys);
  EXPECT_EQ(s.store->Get("b")->value(), "2");
  EXPECT_EQ(s.store->Get("d")->value(), "4");
  EXPECT_FALSE(s.store->Get("a").ok());
}

// Item i's hash is there from Before(i) to Before(i + 1), whether the
// batch gave keys (hashed once each) or hashes (taken as they are); none
// for an item without a hint, or without a store.
TEST(BatchPrefetch, KeepsEachItemsHashUntilTheNext) {
  Store s = MakeStore();
  const std::vector<std::string> keys = {"a", "b", "", "d", "e"};
  std::vector<layout::KeyHash> hashes;
  for (const std::string& k : keys) hashes.push_back(s.store->PrefetchBuckets(k));
  auto key_at = [&](size_t i) { return absl::string_view(keys[i]); };
  auto hash_at = [&](size_t i) { return keys[i].empty() ? nullptr : &hashes[i]; };
  BatchPrefetch<decltype(key_at)> by_key(s.store.get(), keys.size(), key_at);
  BatchPrefetch<decltype(hash_at)> by_hash(s.store.get(), keys.size(), hash_at);
  for (size_t i = 0; i < keys.size(); ++i) {
    by_key.Before(i);
    by_hash.Before(i);
    if (keys[i].empty()) {
      EXPECT_EQ(by_key.HashOf(i), nullptr) << i;
      EXPECT_EQ(by_hash.HashOf(i), nullptr) << i;
      continue;
    }
    ASSERT_NE(by_key.HashOf(i), nullptr) << i;
    ASSERT_NE(by_hash.HashOf(i), nullptr) << i;
    EXPECT_EQ(*by_key.HashOf(i), hashes[i]) << i;
    EXPECT_EQ(*by_hash.HashOf(i), hashes[i]) << i;
  }
  BatchPrefetch<decltype(key_at)> no_store(nullptr, keys.size(), key_at);
  no_store.Before(0);
  EXPECT_EQ(no_store.HashOf(0), nullptr);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
