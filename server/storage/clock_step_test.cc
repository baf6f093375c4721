// Copyright 2026 The kvstore Authors.
//
// Finding 10: the storage layer's timers (grace period, lease expiry) must
// run on the monotonic clock. A fake Clock steps the wall clock the way NTP
// or an operator would, with KvStore and LeaseTable otherwise real.

#include <memory>

#include "absl/time/time.h"
#include "common/metrics/testing.h"
#include "common/protocol/layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/clock.h"
#include "server/storage/fake_clock.h"
#include "server/storage/kv_store.h"
#include "server/storage/lease_table.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::metrics::testing::Value;

constexpr uint64_t kSegment = 1 << 20;

struct TestStore {
  std::unique_ptr<MemoryPool> pool;
  std::unique_ptr<KvStore> store;
};

TestStore MakeStore(const Clock* clock, absl::Duration grace) {
  MemoryPoolOptions po;
  po.data_bytes = 8 * kSegment;
  po.index_bytes = 1 << 16;
  TestStore t;
  auto pool = MemoryPool::Create(po);
  EXPECT_TRUE(pool.ok()) << pool.status();
  t.pool = std::move(*pool);
  KvStoreOptions so;
  so.segment_bytes = kSegment;
  so.grace_period = grace;
  so.cleaner_interval = absl::ZeroDuration();
  so.clock = clock;
  auto store = KvStore::Create(t.pool.get(), so);
  EXPECT_TRUE(store.ok()) << store.status();
  t.store = std::move(*store);
  return t;
}

uint64_t AwaitingGrace(const TestStore& t) {
  return Value(t.store->registry(), "kvstore_pool_segments_awaiting_grace");
}

// SteadyNanos() is Steady() in whole nanoseconds: the real clock reads it
// directly (the RESP SET's latency), a test clock converts.
TEST(Clock, SteadyNanosIsSteadyInNanoseconds) {
  const Clock& real = Clock::Real();
  const int64_t before = real.SteadyNanos();
  const int64_t steady = absl::ToInt64Nanoseconds(real.Steady());
  const int64_t after = real.SteadyNanos();
  EXPECT_LE(before, steady);
  EXPECT_LE(steady, after);
  FakeClock fake;
  fake.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(fake.SteadyNanos(), absl::ToInt64Nanoseconds(fake.Steady()));
}

// A wall clock stepped forward used to end every pending grace period at
// once: a segment a slow one-sided READ was still reading went back to the
// allocator. Only time passing on the steady clock ends it now.
TEST(ClockStep, WallClockStepDoesNotEndTheGracePeriod) {
  FakeClock clock;
  TestStore t = MakeStore(&clock, absl::Milliseconds(500));
  {
    auto w = t.store->NewWriter();
    ASSERT_TRUE(t.store->Put(w.get(), "k", "v").ok());
    ASSERT_TRUE(t.store->Delete("k").ok());
  }  // the writer seals its segment, which holds nothing live: queued
  ASSERT_EQ(AwaitingGrace(t), 1u);
  clock.StepWall(absl::Hours(1));
  t.store->RunCleanerOnce();
  EXPECT_EQ(AwaitingGrace(t), 1u);
  clock.Advance(absl::Milliseconds(499));
  t.store->RunCleanerOnce();
  EXPECT_EQ(AwaitingGrace(t), 1u);
  clock.Advance(absl::Milliseconds(1));
  t.store->RunCleanerOnce();
  EXPECT_EQ(AwaitingGrace(t), 0u);
}

// A wall clock stepped back must not stretch it either.
TEST(ClockStep, WallClockStepBackDoesNotStretchTheGracePeriod) {
  FakeClock clock;
  TestStore t = MakeStore(&clock, absl::Milliseconds(500));
  {
    auto w = t.store->NewWriter();
    ASSERT_TRUE(t.store->Put(w.get(), "k", "v").ok());
    ASSERT_TRUE(t.store->Delete("k").ok());
  }
  clock.StepWall(-absl::Hours(1));
  clock.Advance(absl::Milliseconds(500));
  t.store->RunCleanerOnce();
  EXPECT_EQ(AwaitingGrace(t), 0u);
}

LeaseOptions Options(const Clock* clock) {
  LeaseOptions o;
  o.expire_interval = absl::ZeroDuration();
  o.ttl = absl::Seconds(10);
  o.clock = clock;
  return o;
}

// A wall clock stepped forward used to expire every lease on the next
// renewal or commit; stepped back, it kept leases alive past their TTL.
TEST(ClockStep, LeaseExpiryFollowsTheSteadyClock) {
  FakeClock clock;
  TestStore t = MakeStore(&clock, absl::Milliseconds(2));
  LeaseTable leases(t.store.get(), Options(&clock));
  auto lease = leases.Grant(4096, "holder");
  ASSERT_TRUE(lease.ok()) << lease.status();
  clock.StepWall(absl::Hours(1));
  auto renewed = leases.Renew(lease->lease_id);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  // What is reported to the client is wall-clock time: ttl from the
  // (stepped) wall clock now.
  EXPECT_EQ(renewed->expires_at, clock.Wall() + absl::Seconds(10));
  const uint64_t off = lease->chunk.offset;
  layout::EncodeEntry(t.pool->data() + off, "k", "v", t.store->Version());
  EXPECT_TRUE(leases.Commit(lease->lease_id, off, layout::EntryBytes(1, 1)).ok());

  clock.StepWall(-absl::Hours(2));
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(leases.Renew(lease->lease_id).status().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
