// Copyright 2026 The kvstore Authors.

#include "common/sync/handoff_mutex.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace {

TEST(HandoffMutex, AnotherThreadReleasesWhatOneTook) {
  HandoffMutex mu;
  mu.Lock();
  EXPECT_FALSE(mu.TryLock());
  std::thread releaser([&] { mu.Unlock(); });
  releaser.join();
  EXPECT_TRUE(mu.TryLock());
  mu.Unlock();
}

TEST(HandoffMutex, LockWaitsForTheRelease) {
  HandoffMutex mu;
  mu.Lock();
  std::atomic<bool> entered{false};
  absl::Notification waiting;
  std::thread waiter([&] {
    waiting.Notify();
    HandoffLock lock(&mu);
    entered = true;
  });
  waiting.WaitForNotification();
  // The waiter cannot be inside: the lock is held until the Unlock below.
  EXPECT_FALSE(entered.load());
  std::thread([&] { mu.Unlock(); }).join();
  waiter.join();
  EXPECT_TRUE(entered.load());
  EXPECT_TRUE(mu.TryLock());
  mu.Unlock();
}

TEST(HandoffSharedMutex, ReadersShareAndAnotherThreadReleasesThem) {
  HandoffSharedMutex mu;
  ASSERT_TRUE(mu.TryReaderLock());
  ASSERT_TRUE(mu.TryReaderLock());
  std::thread([&] {
    mu.ReaderUnlock();
    mu.ReaderUnlock();
  }).join();
  HandoffWriterLock writer(&mu);
  EXPECT_FALSE(mu.TryReaderLock());
}

TEST(HandoffSharedMutex, AWaitingWriterKeepsNewReadersOutUntilItIsDone) {
  HandoffSharedMutex mu;
  mu.ReaderLock();
  std::atomic<bool> writer_in{false};
  std::thread writer([&] {
    HandoffWriterLock lock(&mu);
    writer_in = true;
  });
  // Eventually the writer waits; from then on a new reader is refused. The
  // bound is generous: the writer thread only has to start.
  bool refused = false;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (!refused && absl::Now() < give_up) {
    if (mu.TryReaderLock()) {
      mu.ReaderUnlock();
      std::this_thread::yield();
    } else {
      refused = true;
    }
  }
  EXPECT_TRUE(refused);
  EXPECT_FALSE(writer_in.load());  // the first reader still holds it
  std::thread([&] { mu.ReaderUnlock(); }).join();
  writer.join();
  EXPECT_TRUE(writer_in.load());
  EXPECT_TRUE(mu.TryReaderLock());
  mu.ReaderUnlock();
}

}  // namespace
}  // namespace kvstore
