// Copyright 2026 The kvstore Authors.
//
// KvStore under a memory limit: evicting policies never refuse a write and
// keep what is read; noeviction refuses with Redis's OOM text; volatile-ttl
// takes the keys expiring soonest and never a key without an expiry.

#include <algorithm>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics/testing.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/fake_clock.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::metrics::testing::Value;
using ::kvstore::testing::IsOk;
using ::kvstore::testing::StatusIs;
using ::testing::HasSubstr;

struct Fixture {
  Fixture(EvictionPolicy policy, uint64_t max_memory = 0) {
    MemoryPoolOptions po;
    po.data_bytes = 8 << 20;
    po.index_bytes = 4 << 20;
    pool = std::move(*MemoryPool::Create(po));
    KvStoreOptions so;
    so.segment_bytes = 64 << 10;
    so.grace_period = absl::Milliseconds(2);
    so.cleaner_interval = absl::ZeroDuration();
    so.expiry_interval = absl::ZeroDuration();
    so.clock = &clock;
    so.eviction_policy = policy;
    so.max_memory_bytes = max_memory;
    store = std::move(*KvStore::Create(pool.get(), so));
    writer = store->NewWriter();
  }
  ~Fixture() { writer.reset(); }
  // A writer that may wait (on the fake clock, which moves when slept on)
  // for emptied segments to leave their grace period, as gRPC Puts may.
  absl::Status Put(const std::string& k, const std::string& v, uint64_t at = 0) {
    return store->Put(writer.get(), k, v, absl::Seconds(1), at);
  }
  FakeClock clock;
  std::unique_ptr<MemoryPool> pool;
  std::unique_ptr<KvStore> store;
  std::unique_ptr<KvStore::Writer> writer;
};

// `reported`: hot keys are read as one-sided RDMA GETs are, never through
// the server's Get(): only the clients' reports (NoteRead) say so.
void KeepsWhatIsReadAndNeverRefuses(EvictionPolicy policy, bool reported = false) {
  Fixture f(policy);
  const std::string value(1000, 'v');
  std::vector<std::string> hot;
  for (int i = 0; i < 300; ++i) hot.push_back(absl::StrCat("hot", i));
  for (const auto& k : hot) ASSERT_THAT(f.Put(k, value), IsOk());
  // Five times the pool in cold keys, each written once; the hot set is
  // read between every batch.
  for (int i = 0; i < 40000; ++i) {
    ASSERT_THAT(f.Put(absl::StrCat("cold", i), value), IsOk()) << i;
    if (i % 500 == 0) {
      for (const auto& k : hot) {
        if (reported) {
          std::optional<layout::Slot> slot = f.store->Locate(k);
          ASSERT_TRUE(slot.has_value()) << k << " at " << i;
          f.store->NoteRead(slot->offset);
        } else {
          ASSERT_THAT(f.store->Get(k).status(), IsOk()) << k << " at " << i;
        }
      }
    }
  }
  EXPECT_GT(Value(f.store->registry(), "kvstore_evicted_keys_total"), 30000);
  for (const auto& k : hot) EXPECT_THAT(f.store->Get(k).status(), IsOk()) << k;
}

TEST(KvStoreEviction, LruKeepsWhatIsReadAndNeverRefusesAWrite) {
  KeepsWhatIsReadAndNeverRefuses(EvictionPolicy::kAllKeysLru);
}

TEST(KvStoreEviction, LfuKeepsWhatIsReadAndNeverRefusesAWrite) {
  KeepsWhatIsReadAndNeverRefuses(EvictionPolicy::kAllKeysLfu);
}

TEST(KvStoreEviction, ReadsReportedByOneSidedReadersKeepKeysToo) {
  KeepsWhatIsReadAndNeverRefuses(EvictionPolicy::kAllKeysLru, /*reported=*/true);
}

// Every key read right after its write: nothing is ever cold, and at
// times no segment is free to copy read keys into. Eviction then falls back
// to FIFO instead of refusing the write.
TEST(KvStoreEviction, APoolOfKeysAllReadStillTakesEveryWrite) {
  Fixture f(EvictionPolicy::kAllKeysLfu);
  const std::string value(1000, 'v');
  for (int i = 0; i < 40000; ++i) {
    const std::string k = absl::StrCat("k", i);
    ASSERT_THAT(f.Put(k, value), IsOk()) << i;
    for (int r = 0; r < 3; ++r) ASSERT_THAT(f.store->Get(k).status(), IsOk());
  }
  EXPECT_GT(Value(f.store->registry(), "kvstore_evicted_keys_total"), 30000);
}

// Three keys in four read, so every segment holds read entries, in a pool
// with no segment free: once the read entries cannot be copied, a pass
// that went on would delete the unread quarter of every segment while
// freeing none of them (each keeps what it could not copy). A write must cost at
// most a few segments' worth of keys, never half the pool at once.
TEST(KvStoreEviction, APassWithNoRoomToCopyEvictsOnlyWhatItNeeds) {
  Fixture f(EvictionPolicy::kAllKeysLru);
  const std::string value(1000, 'v');
  constexpr int64_t kPerSegment = (64 << 10) / 1056;  // entry: 32 + key + 1000, aligned
  int64_t evicted = 0;
  int64_t largest_step = 0;
  for (int i = 0; i < 30000; ++i) {
    const std::string k = absl::StrCat("k", i);
    ASSERT_THAT(f.Put(k, value), IsOk()) << i;
    if (i % 4 != 0) ASSERT_THAT(f.store->Get(k).status(), IsOk());
    const int64_t now = Value(f.store->registry(), "kvstore_evicted_keys_total");
    largest_step = std::max(largest_step, now - evicted);
    evicted = now;
  }
  EXPECT_GT(evicted, 20000);
  std::cout << "largest eviction step: " << largest_step << " keys\n";
  // The pool holds 128 segments (about 7,900 keys), a quarter unread.
  EXPECT_LE(largest_step, 8 * kPerSegment);
}

// Keys read once are promoted out of the probation queue; a scan of keys
// written once and never read, five pools long, then passes through
// probation only. Under one FIFO with a second chance (the store before
// the probation queue) the warm keys, their one read spent on the first
// copy, were evicted by the scan's second lap.
TEST(KvStoreEviction, AScanOfOneTimeKeysDoesNotFlushKeysReadOnce) {
  for (EvictionPolicy policy : {EvictionPolicy::kAllKeysLru, EvictionPolicy::kAllKeysLfu}) {
    Fixture f(policy);
    const std::string value(1000, 'v');
    std::vector<std::string> warm;
    for (int i = 0; i < 3000; ++i) warm.push_back(absl::StrCat("warm", i));  // ~40% of the pool
    for (const auto& k : warm) ASSERT_THAT(f.Put(k, value), IsOk());
    for (const auto& k : warm) ASSERT_THAT(f.store->Get(k).status(), IsOk());
    for (int i = 0; i < 40000; ++i) {
      ASSERT_THAT(f.Put(absl::StrCat("scan", i), value), IsOk()) << i;
    }
    EXPECT_GT(Value(f.store->registry(), "kvstore_evicted_keys_total"), 30000);
    int kept = 0;
    for (const auto& k : warm) kept += f.store->Get(k).ok();
    EXPECT_EQ(kept, static_cast<int>(warm.size())) << PolicyName(policy);
  }
}

// Random overwrites of twice the pool keep it nearly all live. The cleaner
// used to copy such segments (up to 95 % live) ahead of eviction, several
// entries per SET, into the free segments writes needed; under an evicting
// policy it leaves segments less than half dead to eviction.
TEST(KvStoreEviction, OverwritesAtTheLimitAreEvictedNotCopied) {
  Fixture f(EvictionPolicy::kAllKeysLru);
  const std::string value(1000, 'v');
  std::mt19937 rng(7);
  std::cout << "seed 7\n";
  constexpr int kKeys = 16000;  // twice the 8 MiB pool
  constexpr int kSets = 60000;
  for (int i = 0; i < kSets; ++i) {
    ASSERT_THAT(f.Put(absl::StrCat("k", rng() % kKeys), value), IsOk()) << i;
    if (i % 50 == 0) f.store->RunCleanerOnce();
  }
  const int64_t moved = Value(f.store->registry(), "kvstore_cleaner_moved_entries_total");
  std::cout << "entries moved by the cleaner: " << moved << " for " << kSets << " SETs\n";
  EXPECT_GT(Value(f.store->registry(), "kvstore_evicted_keys_total"), 10000);
  EXPECT_LT(moved, kSets / 4);
}

TEST(KvStoreEviction, NoEvictionRefusesPastTheLimitWithRedisText) {
  Fixture f(EvictionPolicy::kNoEviction, /*max_memory=*/2 << 20);
  const std::string value(1000, 'v');
  absl::Status s;
  int stored = 0;
  for (; stored < 10000; ++stored) {
    s = f.Put(absl::StrCat("k", stored), value);
    if (!s.ok()) break;
  }
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted,
                          HasSubstr("OOM command not allowed when used memory > 'maxmemory'")));
  EXPECT_GT(stored, 1500);  // about 2 MiB of 1 KiB entries
  EXPECT_LT(stored, 2300);  // ... and not the whole 8 MiB pool
  EXPECT_EQ(Value(f.store->registry(), "kvstore_evicted_keys_total"), 0);
  // Raising the limit (CONFIG SET maxmemory) lets writes in again.
  f.store->SetMaxMemory(0);
  EXPECT_THAT(f.Put("after", value), IsOk());
}

TEST(KvStoreEviction, VolatileTtlTakesTheSoonestExpiringAndNeverAPersistentKey) {
  Fixture f(EvictionPolicy::kVolatileTtl, /*max_memory=*/4 << 20);
  const std::string value(1000, 'v');
  // 1 MiB of keys without an expiry, then keys with expiries far in the
  // future, each later than the one before.
  for (int i = 0; i < 1000; ++i) ASSERT_THAT(f.Put(absl::StrCat("keep", i), value), IsOk());
  const uint64_t base = static_cast<uint64_t>(f.store->NowMs()) + 3600 * 1000;
  for (int i = 0; i < 6000; ++i) {
    ASSERT_THAT(f.Put(absl::StrCat("ttl", i), value, base + i), IsOk()) << i;
    if (i % 256 == 0) {
      f.store->EvictOnce();
      f.store->RunCleanerOnce();
    }
  }
  f.store->EvictOnce();
  EXPECT_GT(Value(f.store->registry(), "kvstore_evicted_keys_total"), 0);
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(f.store->Exists(absl::StrCat("keep", i))) << i;
  // The latest expiries are still there; the earliest went first.
  EXPECT_TRUE(f.store->Exists("ttl5999"));
  EXPECT_FALSE(f.store->Exists("ttl0"));
}

TEST(KvStoreEviction, MaxMemoryIsASizeOrAPercentageOfThePool) {
  EXPECT_EQ(*ParseMaxMemory("0", 1000), 0u);
  EXPECT_EQ(*ParseMaxMemory("2G", 1000), 2ull << 30);
  EXPECT_EQ(*ParseMaxMemory("100mb", 1000), 100ull << 20);
  EXPECT_EQ(*ParseMaxMemory("1073741824", 1000), 1ull << 30);
  EXPECT_EQ(*ParseMaxMemory("75%", 1000), 750u);
  for (const char* bad : {"0%", "101%", "x%", "ten", "-1", ""}) {
    EXPECT_THAT(ParseMaxMemory(bad, 1000).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("percentage")))
        << bad;
  }
  EXPECT_EQ(ParsePolicy("allkeys_lru"), EvictionPolicy::kAllKeysLru);
  EXPECT_EQ(ParsePolicy("VOLATILE-TTL"), EvictionPolicy::kVolatileTtl);
  EXPECT_EQ(ParsePolicy("allkeys-random"), std::nullopt);
  EXPECT_EQ(PolicyName(EvictionPolicy::kAllKeysLfu), "allkeys-lfu");
}

}  // namespace
}  // namespace server
}  // namespace kvstore
