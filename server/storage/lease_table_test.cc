// Copyright 2026 The kvstore Authors.
//
// LeaseTable against a real KvStore over an unregistered MemoryPool: the
// client's RDMA WRITE is played by encoding an entry straight into the
// arena, and the RDMA layer's write key by FakeKey. Time is a FakeClock
// shared by the store and the table: TTLs and grace periods end when a test
// advances it. Expiry is driven by the tests (ExpireNow) except in
// BackgroundThreadExpiresLeases.

#include "server/storage/lease_table.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/metrics/testing.h"
#include "common/protocol/layout.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/deferred_hook.h"
#include "server/storage/fake_clock.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::metrics::testing::Value;
using ::kvstore::testing::Eventually;
using ::kvstore::testing::IsOk;
using ::kvstore::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kSegment = 1 << 20;

// The store, the pool it lives in and its clock, destroyed store first.
struct TestStore {
  std::unique_ptr<FakeClock> clock = std::make_unique<FakeClock>();
  std::unique_ptr<MemoryPool> pool;
  std::unique_ptr<KvStore> store;
};

// A pool of `segments` 1 MiB segments, no background cleaner; `hook` (not
// owned) is the store's write hook.
TestStore MakeStore(uint32_t segments = 8, absl::Duration grace = absl::Milliseconds(2),
                    WriteHook* hook = nullptr) {
  MemoryPoolOptions po;
  po.data_bytes = uint64_t{segments} * kSegment;
  po.index_bytes = 1 << 20;
  TestStore t;
  auto pool = MemoryPool::Create(po);
  EXPECT_TRUE(pool.ok()) << pool.status();
  t.pool = std::move(*pool);
  KvStoreOptions so;
  so.segment_bytes = kSegment;
  so.grace_period = grace;
  so.cleaner_interval = absl::ZeroDuration();
  so.clock = t.clock.get();
  so.write_hook = hook;
  auto store = KvStore::Create(t.pool.get(), so);
  EXPECT_TRUE(store.ok()) << store.status();
  t.store = std::move(*store);
  return t;
}

// Options without the background thread, so tests drive expiry
// themselves, on the store's fake clock.
LeaseOptions ManualOptions(const TestStore& t) {
  LeaseOptions o;
  o.expire_interval = absl::ZeroDuration();
  o.clock = t.clock.get();
  return o;
}

// Writes an entry at `offset` of the data arena the way a client's RDMA
// WRITE would, and returns its size.
uint64_t WriteEntry(TestStore& t, uint64_t offset, absl::string_view key, absl::string_view value) {
  layout::EncodeEntry(t.pool->data() + offset, key, value, t.store->Version());
  return layout::EntryBytes(key.size(), value.size());
}

// The value of `key`, or "<CODE>" when Get() fails: one string to compare,
// with the error visible in the test's failure message.
std::string ValueOf(KvStore& s, absl::string_view key) {
  auto v = s.Get(key);
  if (!v.ok()) return absl::StrCat("<", absl::StatusCodeToString(v.status().code()), ">");
  return std::string(v->value());
}

// A write key as a transport would make one: records when it is revoked.
class FakeKey final : public LeaseWriteKey {
 public:
  // `on_revoke` runs in Revoke(); may be empty.
  FakeKey(uint32_t rkey, uint64_t connection_id, std::function<void()> on_revoke)
      : LeaseWriteKey(rkey, connection_id), on_revoke_(std::move(on_revoke)) {}
  void Revoke() override {
    // LeaseTable calls Revoke() exactly once per key.
    EXPECT_FALSE(revoked_);
    revoked_ = true;
    if (on_revoke_) on_revoke_();
  }

 private:
  std::function<void()> on_revoke_;
  bool revoked_ = false;
};

// A KeyMaker binding keys on `connection_id`, rkey = 1000 + lease id, that
// calls `on_revoke(lease_id)` when a key is revoked.
LeaseTable::KeyMaker KeysOn(uint64_t connection_id,
                            std::function<void(uint64_t)> on_revoke = nullptr) {
  return [connection_id,
          on_revoke](const LeaseInfo& lease) -> absl::StatusOr<std::unique_ptr<LeaseWriteKey>> {
    const uint64_t id = lease.lease_id;
    return std::make_unique<FakeKey>(static_cast<uint32_t>(1000 + id), connection_id,
                                     [on_revoke, id] {
                                       if (on_revoke) on_revoke(id);
                                     });
  };
}

// Lets the grace period of every emptied segment pass and runs the
// cleaner, which frees them (nothing in these tests pins a segment).
void WaitForReclaim(TestStore& t) {
  t.clock->Advance(t.store->options().grace_period);
  t.store->RunCleanerOnce();
}

// The happy path of an RDMA PUT, without RDMA: grant, write, commit, read.
TEST(LeaseTable, GrantWriteCommitGet) {
  TestStore t = MakeStore();
  LeaseTable leases(t.store.get(), ManualOptions(t));
  auto lease = leases.Grant(4096, "test");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_NE(lease->lease_id, 0u);
  EXPECT_EQ(lease->owner, "test");
  EXPECT_EQ(lease->chunk.length, kSegment);  // rounded up to a segment
  EXPECT_EQ(lease->write_rkey, 0u);
  EXPECT_EQ(lease->expires_at, t.clock->Wall() + leases.options().ttl);

  // Two entries bump-allocated in the chunk, as a client would. The value
  // has NULs in it: entries are length-prefixed, not C strings.
  const std::string value("v\0al\0ue", 7);
  uint64_t off = lease->chunk.offset;
  uint64_t size = WriteEntry(t, off, "key1", value);
  ASSERT_TRUE(leases.Commit(lease->lease_id, off, size).ok());
  EXPECT_EQ(ValueOf(*t.store, "key1"), value);
  off += size;
  size = WriteEntry(t, off, "key2", "second");
  ASSERT_TRUE(leases.Commit(lease->lease_id, off, size).ok());
  EXPECT_EQ(ValueOf(*t.store, "key2"), "second");

  auto c = [&](const char* series) { return Value(leases.registry(), series); };
  EXPECT_EQ(c("kvstore_leases_granted_total"), 1u);
  EXPECT_EQ(c("kvstore_lease_commits_total"), 2u);
  EXPECT_EQ(c("kvstore_leases_active"), 1u);

  // Committed entries outlive their lease.
  ASSERT_TRUE(leases.Release(lease->lease_id).ok());
  EXPECT_EQ(ValueOf(*t.store, "key1"), value);
  EXPECT_EQ(Value(leases.registry(), "kvstore_leases_released_total"), 1u);
  EXPECT_EQ(Value(leases.registry(), "kvstore_leases_active"), 0u);
}

// A lease is a fence: no commit under it may publish bytes outside its own
// chunk, whatever offset and size the (untrusted) client sends.
TEST(LeaseTable, CommitOutsideTheChunkIsInvalidAndPublishesNothing) {
  TestStore t = MakeStore();
  LeaseTable leases(t.store.get(), ManualOptions(t));
  auto a = leases.Grant(4096, "a");
  auto b = leases.Grant(4096, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_NE(a->chunk.offset, b->chunk.offset);

  // An entry inside b's chunk, committed under a's lease.
  const uint64_t size = WriteEntry(t, b->chunk.offset, "stolen", "value");
  absl::Status s = leases.Commit(a->lease_id, b->chunk.offset, size);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("not inside lease"));

  // Straddling the end of a's chunk: the start is inside, the end is not.
  const uint64_t tail = a->chunk.offset + a->chunk.length - layout::kEntryAlign;
  EXPECT_EQ(leases.Commit(a->lease_id, tail, 2 * layout::kEntryAlign).code(),
            absl::StatusCode::kInvalidArgument);
  // Before its start, empty, and sizes that would overflow.
  if (a->chunk.offset > 0) {
    EXPECT_EQ(leases.Commit(a->lease_id, a->chunk.offset - layout::kEntryAlign, size).code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(leases.Commit(a->lease_id, a->chunk.offset, 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(leases.Commit(a->lease_id, a->chunk.offset, ~uint64_t{0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(leases.Commit(a->lease_id, ~uint64_t{0} - 63, 64).code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_FALSE(t.store->Exists("stolen"));
  EXPECT_EQ(Value(t.store->registry(), "kvstore_commits_total"), 0u);
  EXPECT_EQ(Value(leases.registry(), "kvstore_lease_commits_total"), 0u);

  // The owner of the chunk can commit it: the entry itself was fine.
  EXPECT_TRUE(leases.Commit(b->lease_id, b->chunk.offset, size).ok());
  EXPECT_EQ(ValueOf(*t.store, "stolen"), "value");
}

// An expired lease refuses commits whether or not the sweeper has run yet:
// expiry is decided by the clock, not by the sweeper's schedule.
TEST(LeaseTable, CommitAfterExpiryIsAbortedAndPublishesNothing) {
  TestStore t = MakeStore();
  LeaseOptions o = ManualOptions(t);
  o.ttl = absl::Milliseconds(1);
  LeaseTable leases(t.store.get(), o);
  auto lease = leases.Grant(4096, "slow");
  ASSERT_TRUE(lease.ok());
  const uint64_t size = WriteEntry(t, lease->chunk.offset, "late", "value");
  t.clock->Advance(absl::Milliseconds(1));  // the TTL: expiry is inclusive

  // Past its expiry, not yet swept.
  absl::Status s = leases.Commit(lease->lease_id, lease->chunk.offset, size);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("lease ", lease->lease_id, " expired")));
  EXPECT_FALSE(t.store->Exists("late"));

  // Swept: the lease is gone from the table, the answer is the same.
  EXPECT_EQ(leases.ExpireNow(t.clock->Steady()), 1u);
  s = leases.Commit(lease->lease_id, lease->chunk.offset, size);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("lease ", lease->lease_id, " expired")));
  EXPECT_FALSE(t.store->Exists("late"));
  EXPECT_EQ(Value(t.store->registry(), "kvstore_commits_total"), 0u);
  auto c = [&](const char* series) { return Value(leases.registry(), series); };
  EXPECT_EQ(c("kvstore_leases_expired_total"), 1u);
  EXPECT_EQ(c("kvstore_lease_aborted_commits_total"), 2u);
  EXPECT_EQ(c("kvstore_lease_commits_total"), 0u);
  EXPECT_EQ(c("kvstore_leases_active"), 0u);
}

// The crash case leases exist for: written, never committed, never
// released. Expiry must revoke the key and give every segment back.
TEST(LeaseTable, ClientKilledBetweenWriteAndCommitLeavesNoTrace) {
  TestStore t = MakeStore();
  std::vector<uint64_t> revoked;
  LeaseTable leases(t.store.get(), ManualOptions(t));
  const uint64_t free_before = Value(t.store->registry(), "kvstore_pool_segments_free");

  // A run of three segments, with a write key as an RDMA client gets.
  auto lease = leases.Grant(3 * kSegment, "doomed",
                            KeysOn(7, [&revoked](uint64_t id) { revoked.push_back(id); }));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(Value(t.store->registry(), "kvstore_pool_segments_free"), free_before - 3);
  WriteEntry(t, lease->chunk.offset, "ghost", std::string(10000, 'g'));
  // ... the client dies here: no commit, no release.

  // Expiry is inclusive: not a millisecond early, exactly at the deadline.
  EXPECT_EQ(leases.ExpireNow(lease->deadline - absl::Milliseconds(1)), 0u);
  EXPECT_EQ(leases.ExpireNow(lease->deadline), 1u);
  EXPECT_THAT(revoked, ::testing::ElementsAre(lease->lease_id));
  EXPECT_FALSE(t.store->Exists("ghost"));
  EXPECT_EQ(t.store->Get("ghost").status().code(), absl::StatusCode::kNotFound);

  // The chunk waits out the grace period (remote readers), then is free.
  EXPECT_GE(Value(t.store->registry(), "kvstore_pool_segments_awaiting_grace"), 1u);
  WaitForReclaim(t);
  EXPECT_EQ(Value(t.store->registry(), "kvstore_pool_segments_free"), free_before);
  EXPECT_EQ(Value(t.store->registry(), "kvstore_pool_segments_awaiting_grace"), 0u);
  EXPECT_EQ(leases.Renew(lease->lease_id).status().code(), absl::StatusCode::kAborted);
}

// Releasing a lease does not free what was committed under it: the segment
// stays until its last live entry is deleted.
TEST(LeaseTable, ReleasedChunkWithCommittedEntriesStaysUntilTheyDie) {
  TestStore t = MakeStore();
  LeaseTable leases(t.store.get(), ManualOptions(t));
  const uint64_t free_before = Value(t.store->registry(), "kvstore_pool_segments_free");
  auto lease = leases.Grant(100, "c");
  ASSERT_TRUE(lease.ok());
  const uint64_t size = WriteEntry(t, lease->chunk.offset, "kept", "v");
  ASSERT_TRUE(leases.Commit(lease->lease_id, lease->chunk.offset, size).ok());
  ASSERT_TRUE(leases.Release(lease->lease_id).ok());
  // A cleaner pass must not take the segment while "kept" lives in it.
  WaitForReclaim(t);
  EXPECT_EQ(ValueOf(*t.store, "kept"), "v");
  EXPECT_EQ(Value(t.store->registry(), "kvstore_pool_segments_free"), free_before - 1);
  ASSERT_TRUE(t.store->Delete("kept").ok());
  WaitForReclaim(t);
  EXPECT_EQ(Value(t.store->registry(), "kvstore_pool_segments_free"), free_before);
}

// Renew moves the expiry forward from now; the old expiry no longer counts.
TEST(LeaseTable, RenewKeepsALeaseAlive) {
  TestStore t = MakeStore();
  LeaseTable leases(t.store.get(), ManualOptions(t));
  auto lease = leases.Grant(4096, "r");
  ASSERT_TRUE(lease.ok());
  t.clock->Advance(absl::Milliseconds(20));
  auto renewed = leases.Renew(lease->lease_id);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->lease_id, lease->lease_id);
  EXPECT_EQ(renewed->chunk.offset, lease->chunk.offset);
  EXPECT_EQ(renewed->expires_at, lease->expires_at + absl::Milliseconds(20));
  EXPECT_EQ(renewed->deadline, lease->deadline + absl::Milliseconds(20));

  // The original expiry has passed; the renewed one has not.
  EXPECT_EQ(leases.ExpireNow(lease->deadline), 0u);
  const uint64_t size = WriteEntry(t, lease->chunk.offset, "alive", "yes");
  EXPECT_TRUE(leases.Commit(lease->lease_id, lease->chunk.offset, size).ok());
  EXPECT_EQ(Value(leases.registry(), "kvstore_leases_renewed_total"), 1u);
  EXPECT_EQ(leases.ExpireNow(renewed->deadline), 1u);

  // Once swept, and for an id never granted, Renew says "start over".
  absl::Status s = leases.Renew(lease->lease_id).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("expired"));
  EXPECT_EQ(leases.Renew(12345).status().code(), absl::StatusCode::kAborted);
}

// A Renew that arrives too late does the sweeper's work: the lease is
// revoked on the spot and counted as expired, not left for the next sweep.
TEST(LeaseTable, RenewOfAnExpiredLeaseRevokesIt) {
  TestStore t = MakeStore();
  LeaseOptions o = ManualOptions(t);
  o.ttl = absl::Milliseconds(1);
  LeaseTable leases(t.store.get(), o);
  auto lease = leases.Grant(4096, "r");
  ASSERT_TRUE(lease.ok());
  t.clock->Advance(absl::Milliseconds(1));
  EXPECT_EQ(leases.Renew(lease->lease_id).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(leases.Lookup(lease->lease_id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Value(leases.registry(), "kvstore_leases_expired_total"), 1u);
  EXPECT_EQ(Value(leases.registry(), "kvstore_leases_active"), 0u);
}

// max_leases bounds the table; a release makes room again.
TEST(LeaseTable, TooManyLeasesIsResourceExhausted) {
  TestStore t = MakeStore();
  LeaseOptions o = ManualOptions(t);
  o.max_leases = 2;
  LeaseTable leases(t.store.get(), o);
  auto a = leases.Grant(1, "a");
  auto b = leases.Grant(1, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  absl::Status s = leases.Grant(1, "c").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_leases=2"));
  ASSERT_TRUE(leases.Release(a->lease_id).ok());
  EXPECT_TRUE(leases.Grant(1, "c").ok());
}

// A lease needs a free run of whole segments; the cleaner's reserve is not
// handed out.
TEST(LeaseTable, FullPoolIsResourceExhausted) {
  TestStore t = MakeStore(/*segments=*/4);
  LeaseTable leases(t.store.get(), ManualOptions(t));
  EXPECT_EQ(leases.Grant(5 * kSegment, "big").status().code(),
            absl::StatusCode::kResourceExhausted);
  // All but the segment the store keeps in reserve for its cleaner.
  auto all = leases.Grant(3 * kSegment, "all");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(leases.Grant(1, "more").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Value(leases.registry(), "kvstore_leases_active"), 1u);
}

// A grant allowed to wait gets a chunk once a segment leaves its grace
// period; one allowed none is refused at once.
TEST(LeaseTable, GrantWaitsForSegmentsLeavingTheirGracePeriod) {
  const absl::Duration grace = absl::Milliseconds(300);
  TestStore t = MakeStore(/*segments=*/4, grace);
  LeaseTable leases(t.store.get(), ManualOptions(t));
  // Overwrites, one segment each, until every writable segment is retired
  // and in its grace period.
  auto w = t.store->NewWriter();
  const std::string value(700 << 10, 'v');
  while (t.store->Put(w.get(), "hot", value).ok()) {
  }
  EXPECT_THAT(leases.Grant(kSegment, "now"), StatusIs(absl::StatusCode::kResourceExhausted));
  // Every overwrite happened at `start` (the fake clock stood still), so
  // the grant sleeps on the clock exactly until the first retired segment
  // leaves its grace period.
  const absl::Duration start = t.clock->Steady();
  EXPECT_THAT(leases.Grant(kSegment, "waits", nullptr, 2 * grace), IsOk());
  EXPECT_EQ(t.clock->Steady() - start, grace);
  EXPECT_GT(Value(t.store->registry(), "kvstore_pool_space_waits_total"), 0u);
}

// Size limits are checked before anything is allocated.
// Finding 10: the server refuses a TTL the client would not honour (it
// rounds anything under 100 ms up) or the handshake could not carry.
TEST(LeaseOptions, TtlIsValidated) {
  LeaseOptions o;
  EXPECT_TRUE(o.Validate().ok());
  for (absl::Duration bad : {absl::ZeroDuration(), absl::Milliseconds(99), -absl::Seconds(1),
                             absl::Hours(25), absl::InfiniteDuration()}) {
    o.ttl = bad;
    EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  o.ttl = absl::Milliseconds(100);
  EXPECT_TRUE(o.Validate().ok());
}

TEST(LeaseTable, OversizeAndEmptyLeasesAreInvalid) {
  TestStore t = MakeStore();
  LeaseTable leases(t.store.get(), ManualOptions(t));
  const uint64_t max = leases.options().max_lease_bytes;
  EXPECT_EQ(max, (64ull << 20) + 4096);
  // The default must hold the largest entry the default limits allow.
  EXPECT_GE(max, layout::EntryBytes(kDefaultMaxKeyBytes, kDefaultMaxValueBytes));
  absl::Status s = leases.Grant(max + 1, "x").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("max_lease_bytes=", max)));
  EXPECT_EQ(leases.Grant(0, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Value(leases.registry(), "kvstore_leases_active"), 0u);
}

// Release is not idempotent: the second one is NOT_FOUND, and the lease is
// unusable for commits after the first.
TEST(LeaseTable, ReleaseOfUnknownLeaseIsNotFound) {
  TestStore t = MakeStore();
  LeaseTable leases(t.store.get(), ManualOptions(t));
  EXPECT_EQ(leases.Release(0).code(), absl::StatusCode::kNotFound);
  auto lease = leases.Grant(1, "x");
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(leases.Release(lease->lease_id).ok());
  EXPECT_EQ(leases.Release(lease->lease_id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(leases.Commit(lease->lease_id, lease->chunk.offset, 64).code(),
            absl::StatusCode::kAborted);
}

// 0 means "no lease" on the wire, so it is never handed out.
TEST(LeaseTable, IdsAreUniqueAndNeverZero) {
  TestStore t = MakeStore();
  LeaseTable leases(t.store.get(), ManualOptions(t));
  absl::flat_hash_set<uint64_t> ids;
  for (int i = 0; i < 50; ++i) {
    auto lease = leases.Grant(1, "x");
    ASSERT_TRUE(lease.ok());
    EXPECT_NE(lease->lease_id, 0u);
    EXPECT_TRUE(ids.insert(lease->lease_id).second);
    // Release right away so the 8-segment pool never fills.
    ASSERT_TRUE(leases.Release(lease->lease_id).ok());
    WaitForReclaim(t);
  }
}

// Shutdown path: leases still alive when the table goes are revoked (their
// keys too) and their chunks returned.
TEST(LeaseTable, DestructorRevokesEveryLease) {
  TestStore t = MakeStore();
  const uint64_t free_before = Value(t.store->registry(), "kvstore_pool_segments_free");
  std::atomic<int> revoked{0};
  {
    LeaseTable leases(t.store.get(), ManualOptions(t));
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(
          leases.Grant(1, "x", KeysOn(1, [&revoked](uint64_t) { revoked.fetch_add(1); })).ok());
    }
  }
  EXPECT_EQ(revoked.load(), 3);
  WaitForReclaim(t);
  EXPECT_EQ(Value(t.store->registry(), "kvstore_pool_segments_free"), free_before);
}

// The expiry thread does what the other tests do by hand.
TEST(LeaseTable, BackgroundThreadExpiresLeases) {
  TestStore t = MakeStore();
  LeaseOptions o;
  o.ttl = absl::Milliseconds(100);
  o.expire_interval = absl::Milliseconds(1);
  o.clock = t.clock.get();
  LeaseTable leases(t.store.get(), o);
  ASSERT_THAT(leases.Grant(1, "x"), IsOk());
  // The thread sweeps every millisecond of real time; the lease ends on the
  // fake clock, and the next sweep after that expires it.
  t.clock->Advance(absl::Milliseconds(100));
  ASSERT_TRUE(Eventually([&] { return Value(leases.registry(), "kvstore_leases_active") == 0; }));
  EXPECT_EQ(Value(leases.registry(), "kvstore_leases_expired_total"), 1u);
}

// Commits racing with the end of their lease either complete before the
// chunk is released or are aborted; none lands in a released chunk. Half
// the leases have a write key and commit through CommitFrom(), as the RDMA
// poller does; the others through Commit().
TEST(LeaseTable, CommitsRacingRevocationNeverPublishIntoReleasedChunks) {
  TestStore t = MakeStore(/*segments=*/16);
  LeaseTable leases(t.store.get(), ManualOptions(t));
  // Lease i is held by connection i + 1 when it has a key.
  auto keyed = [](size_t i) { return i % 4 >= 2; };
  for (int round = 0; round < 20; ++round) {
    std::vector<LeaseInfo> granted;
    for (int i = 0; i < 4; ++i) {
      auto lease = keyed(i) ? leases.Grant(64 * 1024, "racer", KeysOn(i + 1))
                            : leases.Grant(64 * 1024, "racer");
      ASSERT_TRUE(lease.ok()) << lease.status();
      granted.push_back(*lease);
    }
    // The committers spin on `go` so that they all start together, right as
    // the main thread starts ending leases.
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    std::vector<std::vector<std::string>> committed(granted.size());
    for (size_t i = 0; i < granted.size(); ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) {
        }
        uint64_t off = granted[i].chunk.offset;
        for (int n = 0; n < 200; ++n) {
          const std::string key = absl::StrCat("r", round, "-", i, "-", n);
          const uint64_t size = WriteEntry(t, off, key, "v");
          absl::Status s = keyed(i) ? leases.CommitFrom(i + 1, granted[i].lease_id, off, size)
                                    : leases.Commit(granted[i].lease_id, off, size);
          if (s.ok()) {
            committed[i].push_back(key);
          } else {
            // The only acceptable failure: the lease ended under us.
            ASSERT_EQ(s.code(), absl::StatusCode::kAborted) << s;
            break;
          }
          off += size;
        }
      });
    }
    go.store(true);
    // Half are released (one keyed, one not), the rest expire: both ways a
    // lease ends while commits are in flight.
    for (size_t i = 0; i < granted.size(); ++i) {
      if (i % 2 == 0) {
        // A keyed lease may only be released by its holder.
        EXPECT_TRUE(leases.Release(granted[i].lease_id, keyed(i) ? i + 1 : kNoConnection).ok());
      }
    }
    leases.ExpireNow(absl::InfiniteDuration());
    for (auto& th : threads) th.join();
    // Every commit that said OK is readable: none was lost to the release.
    for (const auto& keys : committed) {
      for (const auto& key : keys) EXPECT_EQ(ValueOf(*t.store, key), "v") << key;
    }
    // Clean up so that the next round has the whole pool again.
    for (const auto& keys : committed) {
      for (const auto& key : keys) ASSERT_TRUE(t.store->Delete(key).ok());
    }
    WaitForReclaim(t);
  }
  // Every segment came back: no chunk leaked, none was released twice.
  auto c = [&](const char* series) { return Value(leases.registry(), series); };
  EXPECT_EQ(c("kvstore_leases_active"), 0u);
  EXPECT_EQ(c("kvstore_leases_granted_total"), 80u);
  EXPECT_EQ(c("kvstore_leases_released_total") + c("kvstore_leases_expired_total"), 80u);
  EXPECT_EQ(Value(t.store->registry(), "kvstore_pool_segments_free"), 16u);
}

// The write key is part of the lease: reported with it, and revoked before
// the chunk goes back to the store.
TEST(LeaseTable, WriteKeyIsRevokedBeforeTheChunkIsReleased) {
  TestStore t = MakeStore();
  int revokes = 0;
  uint64_t awaiting_at_revoke = ~uint64_t{0};
  LeaseTable leases(t.store.get(), ManualOptions(t));
  auto lease = leases.Grant(4096, "keyed", KeysOn(7, [&](uint64_t) {
                              ++revokes;
                              awaiting_at_revoke = Value(t.store->registry(),
                                                         "kvstore_pool_segments_awaiting_grace");
                            }));
  ASSERT_TRUE(lease.ok()) << lease.status();
  // The grant reports the key's rkey, and so does every later look-up.
  EXPECT_EQ(lease->write_rkey, 1000 + lease->lease_id);
  auto looked_up = leases.Lookup(lease->lease_id);
  ASSERT_TRUE(looked_up.ok());
  EXPECT_EQ(looked_up->write_rkey, lease->write_rkey);
  EXPECT_THAT(leases.KeyHolders(), ::testing::UnorderedElementsAre(7u));

  // Released by its holder: the key is revoked once, and first.
  ASSERT_TRUE(leases.Release(lease->lease_id, 7).ok());
  EXPECT_EQ(revokes, 1);
  // Nothing was committed, so the released chunk waits out its grace period
  // at once; when the key was revoked it had not been released yet.
  EXPECT_EQ(awaiting_at_revoke, 0u);
  EXPECT_GE(Value(t.store->registry(), "kvstore_pool_segments_awaiting_grace"), 1u);
  EXPECT_TRUE(leases.KeyHolders().empty());
}

// A lease with a write key belongs to the connection the key is bound to:
// commits, renewals and releases from anyone else are PERMISSION_DENIED,
// with the messages docs/protocol.md lists, and change nothing.
TEST(LeaseTable, OnlyTheKeyHolderMayCommitRenewOrRelease) {
  TestStore t = MakeStore();
  LeaseTable leases(t.store.get(), ManualOptions(t));
  auto lease = leases.Grant(4096, "held", KeysOn(7));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const uint64_t id = lease->lease_id;
  const uint64_t size = WriteEntry(t, lease->chunk.offset, "mine", "v");

  absl::Status s = leases.CommitFrom(8, id, lease->chunk.offset, size);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("belongs to another connection"));
  EXPECT_FALSE(t.store->Exists("mine"));
  s = leases.Renew(id, 8).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("belongs to another RDMA connection"));
  // A caller without a connection is not the holder either.
  EXPECT_EQ(leases.Renew(id).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(leases.Release(id, 8).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(leases.Release(id).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Value(leases.registry(), "kvstore_lease_aborted_commits_total"), 0u);

  // The holder can do all three; a renewal reports the same key.
  ASSERT_TRUE(leases.CommitFrom(7, id, lease->chunk.offset, size).ok());
  EXPECT_EQ(ValueOf(*t.store, "mine"), "v");
  auto renewed = leases.Renew(id, 7);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->write_rkey, lease->write_rkey);
  ASSERT_TRUE(leases.Release(id, 7).ok());
  s = leases.CommitFrom(7, id, lease->chunk.offset, size);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("is not active"));

  // A lease without a key has no holder: anyone may renew it, but it cannot
  // be committed from a connection.
  auto plain = leases.Grant(4096, "plain");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->write_rkey, 0u);
  EXPECT_TRUE(leases.Renew(plain->lease_id, 8).ok());
  s = leases.CommitFrom(7, plain->lease_id, plain->chunk.offset, 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("is not active"));
  EXPECT_EQ(Value(leases.registry(), "kvstore_lease_aborted_commits_total"), 0u);
  EXPECT_EQ(Value(leases.registry(), "kvstore_lease_commits_total"), 1u);
}

// CommitFrom() applies the same expiry rule as Commit(), after the holder
// check.
TEST(LeaseTable, CommitFromTheHolderAfterExpiryIsAborted) {
  TestStore t = MakeStore();
  LeaseOptions o = ManualOptions(t);
  o.ttl = absl::Milliseconds(1);
  LeaseTable leases(t.store.get(), o);
  auto lease = leases.Grant(4096, "slow", KeysOn(7));
  ASSERT_TRUE(lease.ok());
  const uint64_t size = WriteEntry(t, lease->chunk.offset, "late", "value");
  t.clock->Advance(absl::Milliseconds(1));
  // The holder check comes before the expiry check.
  EXPECT_EQ(leases.CommitFrom(8, lease->lease_id, lease->chunk.offset, size).code(),
            absl::StatusCode::kPermissionDenied);
  absl::Status s = leases.CommitFrom(7, lease->lease_id, lease->chunk.offset, size);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("lease ", lease->lease_id, " expired")));
  EXPECT_FALSE(t.store->Exists("late"));
  EXPECT_EQ(Value(leases.registry(), "kvstore_lease_aborted_commits_total"), 1u);
}

// An RDMA commit started without a waiting thread (cluster mode): the same
// refusals as CommitFrom(), and a lease that ends meanwhile is not revoked
// (its key, then its chunk) before the commit's round has ended and
// published into the chunk.
TEST(LeaseTable, StartedCommitHoldsOffTheRevocationUntilItsRoundEnds) {
  DeferredHook hook;
  TestStore t = MakeStore(8, absl::Milliseconds(2), &hook);
  LeaseTable leases(t.store.get(), ManualOptions(t));
  std::atomic<bool> revoked{false};
  std::atomic<bool> revoked_before_done{false};
  std::atomic<bool> done_ran{false};
  auto lease = leases.Grant(4096, "started", KeysOn(7, [&](uint64_t) {
                              revoked_before_done = !done_ran.load();
                              revoked = true;
                            }));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const uint64_t id = lease->lease_id;
  const uint64_t size = WriteEntry(t, lease->chunk.offset, "k", "v");
  absl::Status result = absl::UnknownError("done never ran");
  auto done = [&](absl::Status s) {
    result = s;
    done_ran = true;
  };
  // CommitFrom()'s refusals, before anything starts.
  EXPECT_THAT(leases.StartCommitFrom(8, id, lease->chunk.offset, size, done).status(),
              StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(
      leases.StartCommitFrom(7, id, lease->chunk.offset + lease->chunk.length, size, done).status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(hook.held(), 0u);

  absl::StatusOr<bool> started = leases.StartCommitFrom(7, id, lease->chunk.offset, size, done);
  ASSERT_THAT(started.status(), IsOk());
  ASSERT_TRUE(*started);
  EXPECT_FALSE(t.store->Exists("k"));
  // The holder goes away while the round is under way.
  std::thread release([&] { EXPECT_THAT(leases.Release(id, 7), IsOk()); });
  ASSERT_TRUE(Eventually([&] { return !leases.Lookup(id).ok(); }));
  EXPECT_FALSE(revoked);
  hook.Finish();
  release.join();
  EXPECT_THAT(result, IsOk());
  EXPECT_TRUE(revoked);
  EXPECT_FALSE(revoked_before_done);
  EXPECT_EQ(ValueOf(*t.store, "k"), "v");
  EXPECT_EQ(Value(leases.registry(), "kvstore_lease_commits_total"), 1u);
  // Gone: refused like CommitFrom().
  EXPECT_THAT(leases.StartCommitFrom(7, id, lease->chunk.offset, size, done).status(),
              StatusIs(absl::StatusCode::kAborted));

  // A start the store declines does nothing: the caller commits the
  // waiting way.
  hook.set_decline(true);
  auto other = leases.Grant(4096, "declined", KeysOn(7));
  ASSERT_TRUE(other.ok());
  const uint64_t other_size = WriteEntry(t, other->chunk.offset, "d", "w");
  started = leases.StartCommitFrom(7, other->lease_id, other->chunk.offset, other_size, done);
  ASSERT_THAT(started.status(), IsOk());
  EXPECT_FALSE(*started);
  EXPECT_THAT(leases.CommitFrom(7, other->lease_id, other->chunk.offset, other_size), IsOk());
  EXPECT_EQ(ValueOf(*t.store, "d"), "w");
  // Nothing started is left to wait for: the release returns at once.
  EXPECT_THAT(leases.Release(other->lease_id, 7), IsOk());
}

// Found by the compose cluster over RDMA (a bench stopped for good): a
// commit of a lease that waited for its key, held by a started commit, held
// the lease's commit lock meanwhile; the end of another started commit of
// the lease took that lock to count itself out, on the thread that had to
// end the key's holder next (an RDMA link ends a batch's rounds in turn).
// None of the three could ever finish.
TEST(LeaseTable, StartedCommitsEndWhileAWaitingCommitOfTheirLeaseWaitsForAKey) {
  DeferredHook hook;
  TestStore t = MakeStore(8, absl::Milliseconds(2), &hook);
  LeaseTable leases(t.store.get(), ManualOptions(t));
  auto lease = leases.Grant(4096, "started", KeysOn(7));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const uint64_t id = lease->lease_id;
  uint64_t at = lease->chunk.offset;
  struct Placed {
    uint64_t offset, size;
  };
  auto place = [&](absl::string_view key, absl::string_view value) {
    Placed p{at, WriteEntry(t, at, key, value)};
    at += p.size;
    return p;
  };
  const Placed a = place("a", "va");
  const Placed k1 = place("k", "v1");
  const Placed k2 = place("k", "v2");
  absl::Status a_result = absl::UnknownError("done never ran");
  absl::Status k1_result = absl::UnknownError("done never ran");
  for (auto [p, result] : {std::pair{a, &a_result}, std::pair{k1, &k1_result}}) {
    absl::StatusOr<bool> started = leases.StartCommitFrom(
        7, id, p.offset, p.size, [result](absl::Status s) { *result = std::move(s); });
    ASSERT_THAT(started.status(), IsOk());
    ASSERT_TRUE(*started);
  }

  // A second commit of "k" waits for the key, which the second start holds.
  absl::Status waited_result = absl::UnknownError("never committed");
  std::thread waiting([&] { waited_result = leases.CommitFrom(7, id, k2.offset, k2.size); });
  ASSERT_TRUE(
      Eventually([&] { return Value(t.store->registry(), "kvstore_key_lock_waits_total") >= 1; }));

  // Both rounds end on one thread, "a" first.
  absl::Notification ended;
  std::thread finisher([&] {
    hook.Finish();
    hook.Finish();
    ended.Notify();
  });
  if (!ended.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    // The threads are stuck for good: there is nothing to join.
    std::fprintf(stderr, "deadlock: a started commit's end waits for the waiting commit\n");
    std::abort();
  }
  finisher.join();
  waiting.join();
  EXPECT_THAT(a_result, IsOk());
  EXPECT_THAT(k1_result, IsOk());
  EXPECT_THAT(waited_result, IsOk());
  EXPECT_EQ(ValueOf(*t.store, "a"), "va");
  EXPECT_EQ(ValueOf(*t.store, "k"), "v2");
  EXPECT_THAT(leases.Release(id, 7), IsOk());
}

// A connection that goes away takes its leases with it, and only its own.
TEST(LeaseTable, ReleaseHeldByEndsOnlyThatConnectionsLeases) {
  TestStore t = MakeStore();
  // Before the table: its destructor revokes the leases still alive.
  std::vector<uint64_t> revoked;
  LeaseTable leases(t.store.get(), ManualOptions(t));
  auto log = [&revoked](uint64_t id) { revoked.push_back(id); };
  auto a1 = leases.Grant(1, "a", KeysOn(1, log));
  auto a2 = leases.Grant(1, "a", KeysOn(1, log));
  auto b = leases.Grant(1, "b", KeysOn(2, log));
  auto plain = leases.Grant(1, "plain");
  ASSERT_TRUE(a1.ok() && a2.ok() && b.ok() && plain.ok());
  EXPECT_THAT(leases.KeyHolders(), ::testing::UnorderedElementsAre(1u, 2u));

  // kNoConnection matches no key, not "every lease".
  EXPECT_EQ(leases.ReleaseHeldBy(kNoConnection), 0u);
  EXPECT_EQ(leases.ReleaseHeldBy(1), 2u);
  EXPECT_THAT(revoked, ::testing::UnorderedElementsAre(a1->lease_id, a2->lease_id));
  EXPECT_EQ(leases.Lookup(a1->lease_id).status().code(), absl::StatusCode::kNotFound);
  // Connection 2's lease and the keyless one are untouched.
  EXPECT_TRUE(leases.Lookup(b->lease_id).ok());
  EXPECT_TRUE(leases.Lookup(plain->lease_id).ok());
  EXPECT_THAT(leases.KeyHolders(), ::testing::UnorderedElementsAre(2u));
  auto c = [&](const char* series) { return Value(leases.registry(), series); };
  EXPECT_EQ(c("kvstore_leases_released_total"), 2u);
  EXPECT_EQ(c("kvstore_leases_active"), 2u);
}

// A key that cannot be made fails the grant and leaves nothing behind: the
// chunk is returned and max_leases has room again.
TEST(LeaseTable, FailedKeyMakerGivesTheChunkBack) {
  TestStore t = MakeStore();
  LeaseOptions o = ManualOptions(t);
  o.max_leases = 1;
  LeaseTable leases(t.store.get(), o);
  const uint64_t free_before = Value(t.store->registry(), "kvstore_pool_segments_free");
  absl::Status s =
      leases
          .Grant(4096, "unlucky",
                 [](const LeaseInfo&) -> absl::StatusOr<std::unique_ptr<LeaseWriteKey>> {
                   return absl::UnavailableError("no live RDMA connection 3");
                 })
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("no live RDMA connection 3"));
  // Counted as granted and released at once (as when keys were bound after
  // the grant); the slot under max_leases is free again.
  auto c = [&](const char* series) { return Value(leases.registry(), series); };
  EXPECT_EQ(c("kvstore_leases_granted_total"), 1u);
  EXPECT_EQ(c("kvstore_leases_released_total"), 1u);
  EXPECT_EQ(c("kvstore_leases_active"), 0u);
  WaitForReclaim(t);
  EXPECT_EQ(Value(t.store->registry(), "kvstore_pool_segments_free"), free_before);
  EXPECT_TRUE(leases.Grant(4096, "lucky", KeysOn(3)).ok());
}

}  // namespace
}  // namespace server
}  // namespace kvstore
