// Copyright 2026 The kvstore Authors.
//
// Finding 7 (part): ending a lease revokes its write key, which on RDMA
// waits for the NIC (up to 5 s). A commit racing that revocation must not
// wait behind it: the RDMA commit poller is one thread for every client.
//
// The revocation here blocks until the test lets it finish, so "a commit
// made while the key is being revoked" is a fact the test arranges, not a
// window it hopes to hit; a commit that waited behind it would never return
// and Eventually() would fail.

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/protocol/layout.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/storage/kv_store.h"
#include "server/storage/lease_table.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::testing::Eventually;
using ::kvstore::testing::IsOk;
using ::kvstore::testing::StatusIs;

constexpr uint64_t kSegment = 1 << 20;

// A write key whose revocation takes as long as the test says, as an
// invalidation waiting for a busy NIC does.
class SlowKey final : public LeaseWriteKey {
 public:
  SlowKey(uint64_t connection_id, absl::Notification* entered, absl::Notification* finish)
      : LeaseWriteKey(7, connection_id), entered_(entered), finish_(finish) {}
  void Revoke() override {
    entered_->Notify();
    finish_->WaitForNotification();
  }

 private:
  absl::Notification* const entered_;
  absl::Notification* const finish_;
};

TEST(LeaseRevoke, CommitsDoNotWaitBehindASlowKeyRevocation) {
  MemoryPoolOptions po;
  po.data_bytes = 8 * kSegment;
  po.index_bytes = 1 << 16;
  auto pool = MemoryPool::Create(po);
  ASSERT_THAT(pool, IsOk());
  KvStoreOptions so;
  so.segment_bytes = kSegment;
  so.cleaner_interval = absl::ZeroDuration();
  auto store = KvStore::Create(pool->get(), so);
  ASSERT_THAT(store, IsOk());
  LeaseOptions lo;
  lo.expire_interval = absl::ZeroDuration();
  LeaseTable leases(store->get(), lo);

  absl::Notification entered, finish;
  auto slow = leases.Grant(4096, "holder", [&](const LeaseInfo&) {
    return absl::StatusOr<std::unique_ptr<LeaseWriteKey>>(
        std::make_unique<SlowKey>(1, &entered, &finish));
  });
  ASSERT_THAT(slow, IsOk());
  auto other = leases.Grant(4096, "holder");
  ASSERT_THAT(other, IsOk());
  const uint64_t size = layout::EntryBytes(1, 1);
  layout::EncodeEntry((*pool)->data() + slow->chunk.offset, "k", "v", (*store)->Version());
  layout::EncodeEntry((*pool)->data() + other->chunk.offset, "o", "v", (*store)->Version());
  ASSERT_THAT(leases.CommitFrom(1, slow->lease_id, slow->chunk.offset, size), IsOk());

  // The holder releases the lease; the release blocks in the key's Revoke().
  std::thread releaser([&] { EXPECT_THAT(leases.Release(slow->lease_id, 1), IsOk()); });
  entered.WaitForNotification();

  // Meanwhile commits are answered at once: on the lease being ended, a
  // refusal (it is revoked); on another lease, a commit.
  std::atomic<bool> answered{false};
  absl::Status on_slow, on_other;
  std::thread committer([&] {
    on_slow = leases.CommitFrom(1, slow->lease_id, slow->chunk.offset + 64, size);
    on_other = leases.Commit(other->lease_id, other->chunk.offset, size);
    answered = true;
  });
  const ::testing::AssertionResult in_time = Eventually([&] { return answered.load(); });
  finish.Notify();  // whatever happened, let the revocation end
  committer.join();
  releaser.join();
  ASSERT_TRUE(in_time) << "a commit waited behind the key's revocation";
  EXPECT_THAT(on_slow, StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(on_other, IsOk());
  // What was committed before the release stays published.
  EXPECT_TRUE((*store)->Exists("k"));
  EXPECT_TRUE((*store)->Exists("o"));
  ASSERT_THAT(leases.Release(other->lease_id), IsOk());
}

}  // namespace
}  // namespace server
}  // namespace kvstore
