// Copyright 2026 The kvstore Authors.
//
// Finding 7 (part): ending a lease revokes its write key, which on RDMA
// waits for the NIC (up to 5 s). A commit racing that revocation must not
// wait behind it: the RDMA commit poller is one thread for every client.

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/protocol/layout.h"
#include "gtest/gtest.h"
#include "server/storage/kv_store.h"
#include "server/storage/lease_table.h"

namespace kvstore {
namespace server {
namespace {

constexpr uint64_t kSegment = 1 << 20;
constexpr absl::Duration kRevokeTakes = absl::Milliseconds(250);

// A write key whose revocation is slow, as an invalidation waiting for a
// busy NIC is.
class SlowKey final : public LeaseWriteKey {
 public:
  explicit SlowKey(uint64_t connection_id) : LeaseWriteKey(7, connection_id) {}
  void Revoke() override { absl::SleepFor(kRevokeTakes); }
};

TEST(LeaseRevoke, CommitsDoNotWaitBehindASlowKeyRevocation) {
  MemoryPoolOptions po;
  po.data_bytes = 8 * kSegment;
  po.index_bytes = 1 << 16;
  auto pool = MemoryPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  KvStoreOptions so;
  so.segment_bytes = kSegment;
  so.cleaner_interval = absl::ZeroDuration();
  auto store = KvStore::Create(pool->get(), so);
  ASSERT_TRUE(store.ok()) << store.status();
  LeaseOptions lo;
  lo.expire_interval = absl::ZeroDuration();
  LeaseTable leases(store->get(), lo);
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);

  absl::Duration slowest;
  for (int round = 0; round < 20; ++round) {
    auto lease = leases.Grant(4096, "holder", [](const LeaseInfo&) {
      return absl::StatusOr<std::unique_ptr<LeaseWriteKey>>(std::make_unique<SlowKey>(1));
    });
    ASSERT_TRUE(lease.ok()) << lease.status();
    const uint64_t off = lease->chunk.offset;
    layout::EncodeEntry((*pool)->data() + off, "k", "v", (*store)->Version());
    std::atomic<bool> started{false};
    absl::Duration worst;
    std::thread committer([&] {
      // Commits back to back until the lease is gone; the first publishes,
      // the others are refused (one offset, one commit) but still take the
      // lease's commit lock, as a racing commit does.
      for (;;) {
        const absl::Time t0 = absl::Now();
        absl::Status s = leases.CommitFrom(1, lease->lease_id, off, layout::EntryBytes(1, 1));
        worst = std::max(worst, absl::Now() - t0);
        started = true;
        if (s.code() == absl::StatusCode::kAborted) return;
      }
    });
    while (!started.load()) std::this_thread::yield();
    absl::SleepFor(absl::Microseconds(rng() % 500));
    ASSERT_TRUE(leases.Release(lease->lease_id, 1).ok());
    committer.join();
    slowest = std::max(slowest, worst);
    (void)(*store)->Delete("k");  // the next round publishes "k" anew
  }
  std::printf("slowest commit %s\n", absl::FormatDuration(slowest).c_str());
  EXPECT_LT(slowest, kRevokeTakes / 2);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
