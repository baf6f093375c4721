// Copyright 2026 The kvstore Authors.

#include "common/sync/worker_pool.h"

#include <atomic>
#include <memory>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace {

// Jobs that wait for each other only finish if each got a thread of its own.
TEST(WorkerPool, AJobThatWaitsDoesNotHoldBackTheNext) {
  WorkerPool pool(4);
  absl::BlockingCounter started(4);
  absl::Notification release;
  std::atomic<int> finished{0};
  for (int i = 0; i < 4; ++i) {
    pool.Submit([&] {
      started.DecrementCount();
      release.WaitForNotification();
      ++finished;
    });
  }
  started.Wait();  // all four run at once
  release.Notify();
  // The destructor (at scope end) would run them too; here they finish.
  while (finished.load() < 4) std::this_thread::yield();
  EXPECT_EQ(finished.load(), 4);
}

TEST(WorkerPool, TheDestructorRunsEveryJobSubmitted) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(1);
    for (int i = 0; i < 100; ++i) pool.Submit([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace kvstore
