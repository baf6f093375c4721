// Copyright 2026 The kvstore Authors.

#include "common/protocol/layout.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/protocol/limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace layout {
namespace {

using ::testing::HasSubstr;

TEST(SlotWord, RoundTripsExtremes) {
  const Slot cases[] = {
      {1, 0, kEntryAlign},
      {2047, kMaxPoolBytes - kEntryAlign, kMaxEntryBytes},
      {0x5a5, 123 * kEntryAlign, 77 * kEntryAlign},
  };
  for (const Slot& s : cases) {
    uint64_t w = EncodeSlot(s);
    EXPECT_NE(w, 0u);
    EXPECT_EQ(DecodeSlot(w), s);
  }
}

TEST(HashKey, FingerprintNeverZeroAndBucketsInRange) {
  for (uint64_t n : {1ull, 2ull, 3ull, 1000ull, 1ull << 20}) {
    for (int i = 0; i < 2000; ++i) {
      KeyHash h = HashKey("key" + std::to_string(i), 42, n);
      EXPECT_NE(h.fingerprint, 0);
      EXPECT_LT(h.bucket[0], n);
      EXPECT_LT(h.bucket[1], n);
      if (n > 1) EXPECT_NE(h.bucket[0], h.bucket[1]);
    }
  }
}

TEST(HashKey, FingerprintFitsItsField) {
  for (int i = 0; i < 5000; ++i) {
    EXPECT_LT(HashKey("key" + std::to_string(i), 7, 1024).fingerprint, 1u << kFingerprintBits);
  }
}

// The memory-per-key figure rests on this: 32-byte header + 16-byte key +
// 32-byte value = 80 bytes, padded to 96 (it was 128 with 64-byte units).
TEST(Entry, SmallEntryPadsToThirtyTwoBytes) {
  EXPECT_EQ(EntryBytes(16, 32), 96u);
  EXPECT_EQ(EntryBytes(1, 0), 64u);
  EXPECT_EQ(EntryBytes(0, 0), 32u);
  EXPECT_EQ(EntryBytes(16, 1024), 1088u);
}

TEST(HashKey, SeedChangesPlacement) {
  int same = 0;
  for (int i = 0; i < 100; ++i) {
    std::string k = "k" + std::to_string(i);
    same += HashKey(k, 1, 1 << 20).bucket[0] == HashKey(k, 2, 1 << 20).bucket[0];
  }
  EXPECT_LT(same, 5);
}

TEST(Entry, EncodeThenVerify) {
  std::string key = "user:42";
  std::string value(1000, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 7);
  std::vector<char> buf(EntryBytes(key.size(), value.size()));
  EXPECT_EQ(buf.size() % kEntryAlign, 0u);
  EncodeEntry(buf.data(), key, value, 9);
  auto v = VerifyEntry(absl::string_view(buf.data(), buf.size()), key);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value, value);
  EXPECT_EQ(layout::EntryVersion(*v->header), 9u);
}

TEST(Entry, ExpiryAndVersionShareTheHeaderWithoutMixing) {
  const std::string key = "k", value = "v";
  std::vector<char> buf(EntryBytes(key.size(), value.size()));
  // 2026-12-02 in unix ms needs 41 bits: both halves of the split are used.
  const uint64_t at = 1796169600123;
  EncodeEntry(buf.data(), key, value, kMaxVersion, at);
  auto v = VerifyEntry(absl::string_view(buf.data(), buf.size()), key);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(EntryVersion(*v->header), kMaxVersion);
  EXPECT_EQ(EntryExpiresAtMs(*v->header), at);
  // The expiry is checksummed: changing it is detected.
  EntryHeader h;
  std::memcpy(&h, buf.data(), sizeof(h));
  SetVersionAndExpiry(&h, kMaxVersion, at + 1);
  std::memcpy(buf.data(), &h, sizeof(h));
  EXPECT_FALSE(VerifyEntry(absl::string_view(buf.data(), buf.size()), key).ok());
  // Later than the header can hold: clamped, still "far future".
  SetVersionAndExpiry(&h, 5, ~uint64_t{0});
  EXPECT_EQ(EntryExpiresAtMs(h), kMaxExpiresAtMs);
  EXPECT_EQ(EntryVersion(h), 5u);
  // No expiry, and a version over 48 bits is cut without touching it.
  SetVersionAndExpiry(&h, (uint64_t{1} << 48) | 7, 0);
  EXPECT_EQ(EntryExpiresAtMs(h), 0u);
  EXPECT_EQ(EntryVersion(h), 7u);
}

TEST(Entry, ExpiredAtItsExpiryTimeExactly) {
  EXPECT_FALSE(Expired(0, 1000));  // no expiry
  EXPECT_FALSE(Expired(1000, 999));
  EXPECT_TRUE(Expired(1000, 1000));
  EXPECT_TRUE(Expired(1000, 1001));
}

TEST(Entry, BeginThenSealEqualsEncode) {
  std::string key = "k", value = "streamed value";
  std::vector<char> a(EntryBytes(1, value.size())), b(a.size());
  EncodeEntry(a.data(), key, value, 3, 123456789);
  BeginEntry(b.data(), key, value.size(), 3, 123456789);
  std::copy(value.begin(), value.end(), b.begin() + kEntryHeaderBytes + key.size());
  SealEntry(b.data());
  EXPECT_EQ(0, memcmp(a.data(), b.data(), kEntryHeaderBytes + key.size() + value.size()));
}

TEST(Entry, EveryFlippedBitIsDetected) {
  std::string key = "abc", value = "0123456789";
  const size_t used = kEntryHeaderBytes + key.size() + value.size();
  std::vector<char> good(EntryBytes(key.size(), value.size()));
  EncodeEntry(good.data(), key, value, 1);
  for (size_t byte = 0; byte < used; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<char> bad = good;
      bad[byte] ^= static_cast<char>(1 << bit);
      auto v = VerifyEntry(absl::string_view(bad.data(), bad.size()), key);
      EXPECT_FALSE(v.ok()) << "byte " << byte << " bit " << bit;
    }
  }
}

TEST(Entry, UntrustedLengthsAreBoundsChecked) {
  std::vector<char> buf(128);
  EncodeEntry(buf.data(), "k", "v", 1);
  auto* h = reinterpret_cast<EntryHeader*>(buf.data());
  h->value_len = 0xffffffffu;  // claims 4 GiB
  auto v = ParseEntry(absl::string_view(buf.data(), buf.size()));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("exceed"));
  EXPECT_FALSE(ParseEntry(absl::string_view(buf.data(), 10)).ok());
}

TEST(Entry, AHeaderAtAnyAlignmentIsReadByCopy) {
  // An entry inside a network frame starts wherever the frame put it. Read
  // at every offset of an 8-byte word (UBSan checks that no read is
  // misaligned), it gives what the aligned parse gives.
  const size_t size = EntryBytes(3, 5);
  std::vector<char> aligned(size);
  EncodeEntry(aligned.data(), "key", "value", 42, /*expires_at_ms=*/7);
  for (size_t shift = 0; shift < 8; ++shift) {
    std::vector<char> buf(size + 8);
    std::memcpy(buf.data() + shift, aligned.data(), size);
    auto f = ReadEntryHeader(absl::string_view(buf.data() + shift, size));
    ASSERT_TRUE(f.ok()) << shift << ": " << f.status();
    EXPECT_EQ(f->key, "key");
    EXPECT_EQ(f->value, "value");
    EXPECT_EQ(EntryVersion(f->header), 42u);
    EXPECT_EQ(EntryExpiresAtMs(f->header), 7u);
    EXPECT_EQ(f->key.data(), buf.data() + shift + kEntryHeaderBytes);  // a view, not a copy
  }
  EXPECT_EQ(ReadEntryHeader(absl::string_view(aligned.data(), 10)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(Entry, WrongKeyIsNotFound) {
  std::vector<char> buf(128);
  EncodeEntry(buf.data(), "alpha", "v", 1);
  auto v = VerifyEntry(absl::string_view(buf.data(), buf.size()), "beta");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
}

TEST(Bucket, FindInBucketSkipsEmptyAndOtherFingerprints) {
  alignas(kBucketBytes) uint64_t bucket[kSlotsPerBucket] = {};
  bucket[1] = EncodeSlot({7, 64, 128});
  bucket[3] = EncodeSlot({9, 256, 64});
  bucket[5] = EncodeSlot({7, 1024, 192});
  std::vector<Slot> seen;
  // A match that refuses everything visits every slot with the fingerprint.
  EXPECT_EQ(FindInBucket(bucket, 7,
                         [&](const Slot& s) {
                           seen.push_back(s);
                           return false;
                         }),
            -1);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (Slot{7, 64, 128}));
  EXPECT_EQ(seen[1], (Slot{7, 1024, 192}));
  // The first accepted slot ends the search and names its index.
  EXPECT_EQ(FindInBucket(bucket, 7, [](const Slot& s) { return s.offset == 1024; }), 5);
  EXPECT_EQ(FindInBucket(bucket, 9, [](const Slot&) { return true; }), 3);
  EXPECT_EQ(FindInBucket(bucket, 8, [](const Slot&) { return true; }), -1);
}

// SlotMatches() against a word-by-word reading, on buckets of random
// fingerprints drawn from a few values (so that several words match), with
// empty words among them and every other field random.
TEST(Bucket, SlotMatchesEqualsAWordByWordScan) {
  const uint32_t seed = std::random_device{}();
  std::printf("slot matches seed %u\n", seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20000; ++round) {
    alignas(64) uint64_t bucket[kSlotsPerBucket + 1];
    const size_t shift = round % 2;  // 8-byte aligned only, half the time
    uint64_t* words = bucket + shift;
    for (size_t i = 0; i < kSlotsPerBucket; ++i) {
      const uint16_t fp = static_cast<uint16_t>(rng() % 4 == 0 ? 0 : 2040 + rng() % 8);
      words[i] =
          fp == 0
              ? 0
              : EncodeSlot({fp, (rng() % 1000) * kEntryAlign, (1 + rng() % 1000) * kEntryAlign});
    }
    for (uint16_t fp : {uint16_t{0}, uint16_t{1}, uint16_t{2040}, uint16_t{2043}, uint16_t{2047}}) {
      uint32_t want = 0;
      for (size_t i = 0; i < kSlotsPerBucket; ++i) {
        if (DecodeSlot(words[i]).fingerprint == fp) want |= 1u << i;
      }
      ASSERT_EQ(SlotMatches(words, fp), want) << "round " << round << " fingerprint " << fp;
    }
  }
}

TEST(Limits, NamesTheLimit) {
  Limits l;
  l.max_key_bytes = 8;
  l.max_value_bytes = 16;
  EXPECT_TRUE(l.CheckKey("12345678").ok());
  EXPECT_THAT(std::string(l.CheckKey("123456789").message()), HasSubstr("max_key_bytes=8"));
  EXPECT_THAT(std::string(l.CheckValueLength(17).message()), HasSubstr("max_value_bytes=16"));
  EXPECT_EQ(l.CheckKey("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(l.Validate().ok());
  l.max_value_bytes = uint64_t{1} << 40;
  EXPECT_FALSE(l.Validate().ok());
}

// The chunked RDMA READ checksums a value piece by piece: any split of the
// value, empty pieces included, must give EntryChecksum()'s result, and a
// changed byte in any piece must change it.
TEST(EntryHasher, AnySplitEqualsTheWholeChecksum) {
  const uint32_t seed = std::random_device{}();
  std::printf("EntryHasher seed %u\n", seed);
  std::mt19937 rng(seed);
  for (size_t size : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{300000}}) {
    std::string value(size, '\0');
    for (char& c : value) c = static_cast<char>(rng());
    const std::string key = "key-" + std::to_string(size);
    const EntryHeader h = MakeHeader(key, value, 7);
    EntryHasher hasher(h, key);
    size_t pos = 0;
    while (pos < size) {
      const size_t n = std::min<size_t>(size - pos, rng() % 70000);
      hasher.Update(absl::string_view(value).substr(pos, n));
      pos += n;
    }
    EXPECT_EQ(hasher.Digest(), h.checksum) << "size " << size;
    if (size == 0) continue;
    std::string changed = value;
    changed[rng() % size] ^= 0x10;
    EntryHasher other(h, key);
    other.Update(changed.substr(0, size / 2));
    other.Update(absl::string_view(changed).substr(size / 2));
    EXPECT_NE(other.Digest(), h.checksum) << "size " << size;
  }
}

// EntryChecksum() hashes small entries in one shot over a gathered copy and
// larger ones in a stream; EntryHasher always streams. Every size on both
// sides of the switch, with keys of several lengths, must give the same
// checksum, or clients and servers would disagree about which entries are
// torn.
TEST(Entry, OneShotAndStreamedChecksumsAgreeAtEverySize) {
  const uint32_t seed = std::random_device{}();
  std::printf("checksum sizes seed %u\n", seed);
  std::mt19937 rng(seed);
  for (size_t key_len : {size_t{1}, size_t{16}, size_t{100}}) {
    std::string key(key_len, '\0');
    for (char& c : key) c = static_cast<char>(rng());
    for (size_t size = 0; size <= 300; ++size) {
      std::string value(size, '\0');
      for (char& c : value) c = static_cast<char>(rng());
      const EntryHeader h = MakeHeader(key, value, 1 + size, size % 3 == 0 ? 0 : 1000 + size);
      EntryHasher streamed(h, key);
      streamed.Update(value);
      ASSERT_EQ(EntryChecksum(h, key, value), streamed.Digest())
          << "key " << key_len << " value " << size;
    }
  }
}

// SealEntry(), EncodeEntry() and ParseEntryInPlace() hash an entry where it
// lies, one pass over its header bytes moved next to the key; MakeHeader()
// hashes the parts (gathered or streamed). Both must give the same checksum
// at every size around the one-shot/streaming switch and beyond, at any
// alignment, and leave the entry's bytes as they found them.
TEST(Entry, InPlaceChecksumEqualsThePartsChecksum) {
  const uint32_t seed = std::random_device{}();
  std::printf("in-place checksum seed %u\n", seed);
  std::mt19937 rng(seed);
  for (size_t key_len : {size_t{1}, size_t{16}, size_t{200}}) {
    std::string key(key_len, '\0');
    for (char& c : key) c = static_cast<char>(rng());
    for (size_t size : {size_t{0}, size_t{190}, size_t{199}, size_t{200}, size_t{201}, size_t{230},
                        size_t{4096}, size_t{4097}, size_t{70001}}) {
      std::string value(size, '\0');
      for (char& c : value) c = static_cast<char>(rng());
      const EntryHeader h = MakeHeader(key, value, 5 + size, size % 2 == 0 ? 0 : 99 + size);
      for (size_t shift : {size_t{0}, size_t{3}}) {  // EncodeEntry takes any alignment
        std::vector<char> buf(EntryBytes(key_len, size) + shift);
        EncodeEntry(buf.data() + shift, key, value, 5 + size, size % 2 == 0 ? 0 : 99 + size);
        ASSERT_EQ(0, memcmp(buf.data() + shift, &h, sizeof(h)))
            << "key " << key_len << " value " << size << " shift " << shift;
      }
      std::vector<char> entry(EntryBytes(key_len, size));  // new[]: 16-byte aligned
      EncodeEntry(entry.data(), key, value, 5 + size, size % 2 == 0 ? 0 : 99 + size);
      const std::vector<char> sealed = entry;
      ASSERT_TRUE(ParseEntryInPlace(entry.data(), entry.size()).ok()) << "value " << size;
      ASSERT_EQ(sealed, entry) << "value " << size;
      // One changed byte anywhere in the hashed bytes is refused, and the
      // entry is left as it was given (the changed byte included).
      const size_t hashed = kEntryHeaderBytes + key_len + size;
      size_t at = rng() % hashed;
      if (at >= kChecksummedHeaderBytes && at < kEntryHeaderBytes) at = kEntryHeaderBytes;
      if (at < 12) at = 12 + at % 4;  // keep magic and lengths valid: test the checksum
      entry[at] ^= 0x01;
      const std::vector<char> changed = entry;
      auto refused = ParseEntryInPlace(entry.data(), entry.size());
      EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss) << "byte " << at;
      EXPECT_EQ(changed, entry) << "byte " << at;
      // CopyEntryInPlace() from a source at an odd address (a network
      // frame): the same bytes, padding included, and the same verdicts.
      std::vector<char> frame(sealed.size() + 3);
      std::memcpy(frame.data() + 3, sealed.data(), sealed.size());
      const absl::string_view src(frame.data() + 3, sealed.size());
      std::vector<char> copy(sealed.size(), '\x77');
      auto copied = CopyEntryInPlace(copy.data(), src);
      ASSERT_TRUE(copied.ok()) << "value " << size << ": " << copied.status();
      EXPECT_EQ(sealed, copy) << "value " << size;
      EXPECT_EQ(copied->value, absl::string_view(value)) << "value " << size;
      EXPECT_EQ(copied->key.data(), copy.data() + kEntryHeaderBytes);
      frame[3 + at] ^= 0x01;
      EXPECT_EQ(CopyEntryInPlace(copy.data(), src).status().code(), absl::StatusCode::kDataLoss)
          << "value " << size << " byte " << at;
      frame[3 + at] ^= 0x01;
      frame[3 + 8] ^= 0x40;  // value_len: now longer than the entry
      EXPECT_EQ(CopyEntryInPlace(copy.data(), src).status().code(), absl::StatusCode::kDataLoss)
          << "value " << size;
    }
  }
}

}  // namespace
}  // namespace layout
}  // namespace kvstore
