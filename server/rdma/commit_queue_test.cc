// Copyright 2026 The kvstore Authors.
//
// CommitQueue without a NIC: credits enforced per lane, order within a lane,
// round-robin between lanes, a blocked lane holding one thread only, and
// dropping on Forget()/Stop(). Jobs are held with Notifications, never with
// sleeps.

#include "server/rdma/commit_queue.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/testing/eventually.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::testing::Eventually;

// Records the order jobs ran in.
class Log {
 public:
  void Add(int v) {
    absl::MutexLock lock(&mu_);
    order_.push_back(v);
  }
  std::vector<int> order() const {
    absl::MutexLock lock(&mu_);
    return order_;
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return order_.size();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<int> order_;
};

TEST(CommitQueueTest, ALaneHoldsAtMostItsCreditsOfWaitingJobs) {
  CommitQueue q("test", 1);
  absl::Notification started, release;
  ASSERT_TRUE(q.Push(7, 3, [&] {
                 started.Notify();
                 release.WaitForNotification();
               }).ok());
  started.WaitForNotification();
  // The running job is answered last (its ack follows it): it takes no credit.
  Log log;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.Push(7, 3, [&log, i] { log.Add(i); }).ok());
  const absl::Status over = q.Push(7, 3, [&log] { log.Add(99); });
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_NE(over.message().find("3 commit credits"), absl::string_view::npos) << over;
  EXPECT_EQ(q.waiting(7), 3u);
  // Another lane is not charged for it.
  ASSERT_TRUE(q.Push(8, 1, [&log] { log.Add(100); }).ok());
  EXPECT_EQ(q.waiting_total(), 4u);
  release.Notify();
  ASSERT_TRUE(Eventually([&] { return log.size() == 4; }));
  EXPECT_EQ(q.waiting_total(), 0u);
  // The refused job never ran.
  for (int v : log.order()) EXPECT_NE(v, 99);
}

TEST(CommitQueueTest, LanesAreServedInTurnAndEachInOrder) {
  CommitQueue q("test", 1);
  absl::Notification started, release;
  Log log;
  ASSERT_TRUE(q.Push(1, 8, [&] {
                 log.Add(10);
                 started.Notify();
                 release.WaitForNotification();
               }).ok());
  started.WaitForNotification();
  // Lane 1 has a backlog; lanes 2 and 3 arrive after it.
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(q.Push(1, 8, [&log, i] { log.Add(10 + i); }).ok());
  ASSERT_TRUE(q.Push(2, 8, [&log] { log.Add(20); }).ok());
  ASSERT_TRUE(q.Push(2, 8, [&log] { log.Add(21); }).ok());
  ASSERT_TRUE(q.Push(3, 8, [&log] { log.Add(30); }).ok());
  release.Notify();
  ASSERT_TRUE(Eventually([&] { return log.size() == 8; }));
  // One job per lane per turn: lane 1's backlog delays the others by one
  // job each, never by all four.
  EXPECT_EQ(log.order(), (std::vector<int>{10, 20, 30, 11, 21, 12, 13, 14}));
}

TEST(CommitQueueTest, ABlockedLaneTakesOneThreadOnly) {
  CommitQueue q("test", 2);
  absl::Notification started, release;
  std::atomic<int> done{0};
  ASSERT_TRUE(q.Push(1, 4, [&] {
                 started.Notify();
                 release.WaitForNotification();
               }).ok());
  started.WaitForNotification();
  // Lane 1's next job waits behind its blocked one and must not take the
  // second thread; lane 2's jobs all run while lane 1 is stuck.
  ASSERT_TRUE(q.Push(1, 4, [&] { done++; }).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Push(2, 4, [&] { done++; }).ok());
  ASSERT_TRUE(Eventually([&] { return done.load() == 4; }));
  EXPECT_EQ(q.waiting(1), 1u);
  // A lane is idle only with no job waiting and none running (what lets
  // the RDMA poller start a commit itself without overtaking the lane).
  EXPECT_FALSE(q.idle(1));
  ASSERT_TRUE(Eventually([&] { return q.idle(2); }));
  EXPECT_TRUE(q.idle(3));
  release.Notify();
  ASSERT_TRUE(Eventually([&] { return done.load() == 5; }));
  ASSERT_TRUE(Eventually([&] { return q.idle(1); }));
}

TEST(CommitQueueTest, ASenderKeepingToItsCreditsIsNeverRefused) {
  // A sender with `credits` commits in flight that reuses a credit only
  // once the job answering it ran (as an RDMA client does with its acks).
  constexpr uint32_t kCredits = 4;
  constexpr int kCommits = 20000;
  CommitQueue q("test", 3);
  absl::Mutex mu;
  uint32_t in_flight = 0;
  int refused = 0;
  for (int i = 0; i < kCommits; ++i) {
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](uint32_t* n) { return *n < kCredits; }, &in_flight));
      ++in_flight;
    }
    absl::Status s = q.Push(5, kCredits, [&] {
      absl::MutexLock lock(&mu);
      --in_flight;  // the "ack": the last thing the job does
    });
    if (!s.ok()) {
      absl::MutexLock lock(&mu);
      ++refused;
      --in_flight;
    }
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](uint32_t* n) { return *n == 0; }, &in_flight));
  EXPECT_EQ(refused, 0);
}

TEST(CommitQueueTest, ForgetDropsWaitingJobsAndLetsTheRunningOneFinish) {
  CommitQueue q("test", 1);
  absl::Notification started, release;
  std::atomic<int> ran{0};
  ASSERT_TRUE(q.Push(1, 4, [&] {
                 started.Notify();
                 release.WaitForNotification();
                 ran++;
               }).ok());
  started.WaitForNotification();
  ASSERT_TRUE(q.Push(1, 4, [&] { ran += 100; }).ok());
  ASSERT_TRUE(q.Push(1, 4, [&] { ran += 100; }).ok());
  q.Forget(1);
  EXPECT_EQ(q.waiting(1), 0u);
  EXPECT_EQ(q.waiting_total(), 0u);
  release.Notify();
  // The lane is usable again once its sender reconnects under that id.
  absl::Notification after;
  ASSERT_TRUE(q.Push(1, 4, [&] { after.Notify(); }).ok());
  after.WaitForNotification();
  EXPECT_EQ(ran.load(), 1);
}

TEST(CommitQueueTest, StopDropsWaitingJobsAndRefusesMore) {
  auto q = std::make_unique<CommitQueue>("test", 1);
  absl::Notification started, release;
  std::atomic<int> ran{0};
  ASSERT_TRUE(q->Push(1, 4, [&] {
                 started.Notify();
                 release.WaitForNotification();
                 ran++;
               }).ok());
  started.WaitForNotification();
  ASSERT_TRUE(q->Push(1, 4, [&] { ran += 100; }).ok());
  ASSERT_TRUE(q->Push(2, 4, [&] { ran += 100; }).ok());
  std::thread stopper([&] { q->Stop(); });
  // Stop() waits for the running job; release it once Stop() has begun
  // refusing (which it does before joining).
  ASSERT_TRUE(Eventually([&] { return q->waiting_total() == 0; }));
  release.Notify();
  stopper.join();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(q->Push(3, 4, [] {}).code(), absl::StatusCode::kCancelled);
  q->Stop();  // idempotent
}

}  // namespace
}  // namespace server
}  // namespace kvstore
