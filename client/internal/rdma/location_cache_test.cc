// Copyright 2026 The kvstore Authors.

#include "client/internal/rdma/location_cache.h"

#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/protocol/layout.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

using Location = LocationCache::Location;

TEST(LocationCache, DisabledNeverHits) {
  LocationCache c(0);
  EXPECT_FALSE(c.enabled());
  EXPECT_EQ(c.capacity(), 0u);
  const uint64_t h = LocationCache::Hash("k");
  c.Insert(h, {64, 128, 7});
  Location out;
  EXPECT_FALSE(c.Lookup(h, &out));
  c.Erase(h);
  c.Clear();
}

TEST(LocationCache, RoundsCapacityUpToAPowerOfTwo) {
  EXPECT_EQ(LocationCache(1).capacity(), 1u);
  EXPECT_EQ(LocationCache(3).capacity(), 4u);
  EXPECT_EQ(LocationCache(65536).capacity(), 65536u);
  EXPECT_EQ(LocationCache(65537).capacity(), 131072u);
}

TEST(LocationCache, InsertLookupErase) {
  LocationCache c(1024);
  const uint64_t h = LocationCache::Hash("key-1");
  Location out;
  EXPECT_FALSE(c.Lookup(h, &out));
  c.Insert(h, {64 * 1000, 64 * 3, 0xabcdef});
  ASSERT_TRUE(c.Lookup(h, &out));
  EXPECT_EQ(out.offset, 64u * 1000);
  EXPECT_EQ(out.size, 64u * 3);
  EXPECT_EQ(out.checksum, 0xabcdefu);
  // A newer location replaces the old one.
  c.Insert(h, {64 * 7, 64, 1});
  ASSERT_TRUE(c.Lookup(h, &out));
  EXPECT_EQ(out.offset, 64u * 7);
  c.Erase(h);
  EXPECT_FALSE(c.Lookup(h, &out));
}

// The largest offset and size a slot word can name survive the packing.
TEST(LocationCache, KeepsTheFullSlotRange) {
  LocationCache c(16);
  const uint64_t h = LocationCache::Hash("big");
  const Location big{layout::kMaxPoolBytes - 64, layout::kMaxEntryBytes, ~uint64_t{0}};
  c.Insert(h, big);
  Location out;
  ASSERT_TRUE(c.Lookup(h, &out));
  EXPECT_EQ(out.offset, big.offset);
  EXPECT_EQ(out.size, big.size);
  EXPECT_EQ(out.checksum, big.checksum);
}

TEST(LocationCache, RefusesWhatNoSlotWordCouldHold) {
  LocationCache c(16);
  const uint64_t h = LocationCache::Hash("odd");
  Location out;
  c.Insert(h, {65, 64, 1});  // unaligned offset
  EXPECT_FALSE(c.Lookup(h, &out));
  c.Insert(h, {64, 0, 1});  // empty
  EXPECT_FALSE(c.Lookup(h, &out));
  c.Insert(h, {64, layout::kMaxEntryBytes + 64, 1});  // too large
  EXPECT_FALSE(c.Lookup(h, &out));
}

TEST(LocationCache, ClearForgetsEverything) {
  LocationCache c(64);
  std::vector<uint64_t> hashes;
  for (int i = 0; i < 32; ++i) {
    hashes.push_back(LocationCache::Hash("k" + std::to_string(i)));
    c.Insert(hashes.back(), {64 * uint64_t(i + 1), 64, uint64_t(i)});
  }
  c.Clear();
  Location out;
  for (uint64_t h : hashes) EXPECT_FALSE(c.Lookup(h, &out));
  // Usable again after the clear.
  c.Insert(hashes[0], {64, 64, 5});
  EXPECT_TRUE(c.Lookup(hashes[0], &out));
}

// Two keys in one cell: the later insert wins; the other key misses rather
// than getting the wrong location, and erasing it leaves the winner.
TEST(LocationCache, CollidingKeysNeverGetEachOthersLocation) {
  LocationCache c(1);  // every key shares the one cell
  const uint64_t a = LocationCache::Hash("a");
  const uint64_t b = LocationCache::Hash("b");
  ASSERT_NE(a >> 16, b >> 16);
  c.Insert(a, {64, 64, 1});
  c.Insert(b, {128, 64, 2});
  Location out;
  EXPECT_FALSE(c.Lookup(a, &out));
  c.Erase(a);
  ASSERT_TRUE(c.Lookup(b, &out));
  EXPECT_EQ(out.offset, 128u);
}

// Readers racing writers on few cells never see a location that was not
// inserted for the key whose hash they asked with (each key's locations
// carry the key's number in offset and checksum).
TEST(LocationCache, ConcurrentReadersSeeWholeLocations) {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  LocationCache c(8);
  constexpr int kKeys = 64;
  std::vector<uint64_t> hashes;
  for (int i = 0; i < kKeys; ++i) hashes.push_back(LocationCache::Hash("key" + std::to_string(i)));
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(seed + t);
      while (!stop.load()) {
        const int k = rng() % kKeys;
        const uint64_t round = rng() % 1000 + 1;
        if (rng() % 4 == 0) {
          c.Erase(hashes[k]);
        } else {
          c.Insert(hashes[k], {64 * (uint64_t(k) * 1000 + round), 64 * round, uint64_t(k)});
        }
      }
    });
  }
  threads.emplace_back([&] {
    std::mt19937 rng(seed + 99);
    for (int i = 0; i < 200000; ++i) {
      const int k = rng() % kKeys;
      Location out;
      if (!c.Lookup(hashes[k], &out)) continue;
      const uint64_t round = out.size / 64;
      if (out.checksum != uint64_t(k) || out.offset != 64 * (uint64_t(k) * 1000 + round)) ++bad;
    }
    stop.store(true);
  });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace client
}  // namespace kvstore
