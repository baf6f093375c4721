// Copyright 2026 The kvstore Authors.

#include "common/sync/handoff_mutex.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

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

TEST(HandoffMutex, ContendingThreadsEachGetInAlone) {
  // Four threads take the lock in turn: every increment of the plain
  // counter happens alone (a lost one shows in the total; TSan names the
  // race), and takers that find it held sleep and are woken.
  HandoffMutex mu;
  int64_t counter = 0;
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        HandoffLock lock(&mu);
        ++counter;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, int64_t{kThreads} * kRounds);
  EXPECT_TRUE(mu.TryLock());
  mu.Unlock();
}

TEST(HandoffMutex, ALockReleasedElsewhereWakesItsWaiters) {
  // The holder's release is done by a third thread while two others wait:
  // both get in, one after the other.
  HandoffMutex mu;
  mu.Lock();
  std::atomic<int> entered{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&] {
      HandoffLock lock(&mu);
      entered.fetch_add(1);
    });
  }
  EXPECT_EQ(entered.load(), 0);  // the lock is held until the release below
  std::thread([&] { mu.Unlock(); }).join();
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(entered.load(), 2);
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
