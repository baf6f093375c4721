// Copyright 2026 The kvstore Authors.

#include "common/sync/handoff_mutex.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
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

// A service that finishes the holder's work on its Nth call: the release
// only the waiting thread can bring about (a RESP loop reading the reply
// that ends the round holding the lock).
class ReleasingService : public LockWaitService {
 public:
  ReleasingService(int release_on_call, std::function<void()> release)
      : release_on_call_(release_on_call), release_(std::move(release)) {}
  void ServeFor(absl::Duration wait) override {
    EXPECT_GT(wait, absl::ZeroDuration());
    if (++calls_ == release_on_call_) release_();
  }
  int calls() const { return calls_; }

 private:
  const int release_on_call_;
  std::function<void()> release_;
  int calls_ = 0;
};

TEST(ServeWhileWaiting, ALockWaitServesUntilTheHolderReleases) {
  // Without the service this Lock() would sleep forever: nothing else
  // releases the lock.
  HandoffMutex mu;
  mu.Lock();
  ReleasingService service(3, [&] { mu.Unlock(); });
  {
    const ServeWhileWaiting serving(&service);
    HandoffLock lock(&mu);
  }
  EXPECT_EQ(service.calls(), 3);
  EXPECT_TRUE(mu.TryLock());
  mu.Unlock();
}

TEST(ServeWhileWaiting, AReaderWaitServesUntilTheWriterLeaves) {
  HandoffSharedMutex mu;
  mu.Lock();
  ReleasingService service(2, [&] { mu.Unlock(); });
  {
    const ServeWhileWaiting serving(&service);
    HandoffReaderLock lock(&mu);
  }
  EXPECT_EQ(service.calls(), 2);
}

TEST(ServeWhileWaiting, AFreeLockIsTakenWithoutServing) {
  HandoffMutex mu;
  HandoffSharedMutex shared;
  ReleasingService service(1, [] {});
  const ServeWhileWaiting serving(&service);
  { HandoffLock lock(&mu); }
  { HandoffReaderLock lock(&shared); }
  EXPECT_EQ(service.calls(), 0);
}

TEST(ServeWhileWaiting, LockPlainSleepsAndNeverServes) {
  // A service that would release the lock is installed, yet LockPlain()
  // must not call it: the waiter sleeps until another thread releases.
  HandoffMutex mu;
  mu.Lock();
  ReleasingService service(1, [&] { mu.Unlock(); });
  std::atomic<bool> entered{false};
  absl::Notification serving_installed;
  std::thread waiter([&] {
    const ServeWhileWaiting serving(&service);
    serving_installed.Notify();
    mu.LockPlain();
    entered = true;
    mu.Unlock();
  });
  serving_installed.WaitForNotification();
  // The waiter cannot be inside: only the release below lets it in.
  EXPECT_FALSE(entered.load());
  std::thread([&] { mu.Unlock(); }).join();
  waiter.join();
  EXPECT_TRUE(entered.load());
  EXPECT_EQ(service.calls(), 0);
  EXPECT_TRUE(mu.TryLock());
  mu.Unlock();
}

TEST(ServeWhileWaiting, AWaitInsideTheServiceSleepsInsteadOfServingAgain) {
  // The service's own work waits for a lock another thread releases: that
  // wait must sleep (the service is never entered twice at once), and the
  // outer wait goes on serving after it.
  HandoffMutex outer;
  HandoffMutex inner;
  outer.Lock();
  inner.Lock();
  std::atomic<int> depth{0};
  int max_depth = 0;
  class Nested : public LockWaitService {
   public:
    Nested(HandoffMutex* outer, HandoffMutex* inner, std::atomic<int>* depth, int* max_depth)
        : outer_(outer), inner_(inner), depth_(depth), max_depth_(max_depth) {}
    void ServeFor(absl::Duration) override {
      *max_depth_ = std::max(*max_depth_, ++*depth_);
      {
        std::thread releaser([this] { inner_->Unlock(); });
        HandoffLock lock(inner_);  // sleeps until the releaser runs
        releaser.join();
      }
      inner_->Lock();  // held again for the next call (uncontended)
      if (++calls_ == 2) outer_->Unlock();
      --*depth_;
    }

   private:
    HandoffMutex* outer_;
    HandoffMutex* inner_;
    std::atomic<int>* depth_;
    int* max_depth_;
    int calls_ = 0;
  } service(&outer, &inner, &depth, &max_depth);
  {
    const ServeWhileWaiting serving(&service);
    HandoffLock lock(&outer);
  }
  EXPECT_EQ(max_depth, 1);
  inner.Unlock();
}

TEST(ServeWhileWaiting, ScopesNestAndRestore) {
  HandoffMutex mu;
  ReleasingService service(1, [&] { mu.Unlock(); });
  const ServeWhileWaiting serving(&service);
  mu.Lock();
  {
    // An inner scope without a service: its wait sleeps until another
    // thread releases, and the service is not called.
    const ServeWhileWaiting none(nullptr);
    std::thread releaser([&] { mu.Unlock(); });
    mu.Lock();
    releaser.join();
  }
  EXPECT_EQ(service.calls(), 0);
  // Held (by the inner wait): the outer service is back, and releases it.
  { HandoffLock lock(&mu); }
  EXPECT_EQ(service.calls(), 1);
}

}  // namespace
}  // namespace kvstore
