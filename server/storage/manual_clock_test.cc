// Copyright 2026 The kvstore Authors.
//
// ManualClock: waiters wake when Advance() reaches their deadline and not
// before; Settled() follows a woken thread until it waits again or ends.
// Every wait here is on a mutex condition with a generous bound, so the
// test sees each state change exactly when it happens.

#include "server/storage/manual_clock.h"

#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

constexpr absl::Duration kBound = absl::Seconds(60);

TEST(ManualClock, StartsAtOneSecondAndMovesOnlyWhenAdvanced) {
  ManualClock clock;
  EXPECT_EQ(clock.Steady(), absl::Seconds(1));
  const absl::Time wall = clock.Wall();
  clock.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(clock.Steady(), absl::Milliseconds(2500));
  EXPECT_EQ(clock.Wall() - wall, absl::Milliseconds(1500));
  clock.Advance(-absl::Seconds(1));  // time never goes back
  EXPECT_EQ(clock.Steady(), absl::Milliseconds(2500));
}

// One timer thread: waits 100 ms on the clock, then reports and blocks
// elsewhere (on `gate`) until released, then ends.
TEST(ManualClock, AWaiterWakesAtItsDeadlineAndIsBusyUntilItEnds) {
  ManualClock clock;
  absl::Mutex mu;
  bool waiting = false, woke = false, never = false;
  absl::Mutex gate_mu;
  bool go = false;
  std::thread timer([&] {
    absl::MutexLock lock(&mu);
    waiting = true;
    // Registered before `mu` is released, so once the test holds `mu` with
    // `waiting` set, the timer is inside AwaitUntil.
    EXPECT_FALSE(
        clock.AwaitUntil(&mu, absl::Condition(&never), clock.Steady() + absl::Milliseconds(100)));
    woke = true;
    mu.Unlock();
    gate_mu.LockWhen(absl::Condition(&go));
    gate_mu.Unlock();
    mu.Lock();
  });
  ASSERT_TRUE(mu.LockWhenWithTimeout(absl::Condition(&waiting), kBound));
  mu.Unlock();
  EXPECT_EQ(clock.Waiters(), 1);
  EXPECT_TRUE(clock.Settled());

  clock.Advance(absl::Milliseconds(99));
  // Not woken: its condition is false and its deadline ahead; it stays in.
  EXPECT_EQ(clock.Waiters(), 1);
  EXPECT_TRUE(clock.Settled());
  {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(woke);
  }

  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(mu.LockWhenWithTimeout(absl::Condition(&woke), kBound));
  mu.Unlock();
  // Woken by time and now blocked elsewhere: busy, not settled.
  EXPECT_EQ(clock.Waiters(), 0);
  EXPECT_FALSE(clock.Settled());
  {
    absl::MutexLock lock(&gate_mu);
    go = true;
  }
  timer.join();  // the thread ended: nothing is busy any more
  EXPECT_TRUE(clock.Settled());
}

TEST(ManualClock, AConditionWakesAWaiterWithoutTimeAndIsNotWaitedFor) {
  ManualClock clock;
  absl::Mutex mu;
  bool waiting = false, stop = false, returned = false;
  std::thread timer([&] {
    absl::MutexLock lock(&mu);
    waiting = true;
    EXPECT_TRUE(clock.AwaitUntil(&mu, absl::Condition(&stop), absl::InfiniteDuration()));
    returned = true;
  });
  ASSERT_TRUE(mu.LockWhenWithTimeout(absl::Condition(&waiting), kBound));
  stop = true;
  mu.Unlock();
  ASSERT_TRUE(mu.LockWhenWithTimeout(absl::Condition(&returned), kBound));
  mu.Unlock();
  EXPECT_EQ(clock.Steady(), absl::Seconds(1));
  EXPECT_TRUE(clock.Settled());
  timer.join();
}

// A thread that re-arms its timer (a keepalive loop): after each Advance()
// over its period it fires once, and Settled() holds again only once it
// has re-armed; Advance()s smaller than the period fire nothing.
TEST(ManualClock, APeriodicTimerFiresOncePerPeriodAndSettles) {
  ManualClock clock;
  absl::Mutex mu;
  int fired = 0;
  bool stop = false;
  std::thread timer([&] {
    absl::MutexLock lock(&mu);
    absl::Duration next = clock.Steady() + absl::Milliseconds(300);
    while (!clock.AwaitUntil(&mu, absl::Condition(&stop), next)) {
      ++fired;
      next = clock.Steady() + absl::Milliseconds(300);
    }
  });
  auto settled = [&] { return clock.Waiters() == 1 && clock.Settled(); };
  auto await_settled = [&] {
    const absl::Time end = absl::Now() + kBound;
    while (!settled() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(1));
    return settled();
  };
  ASSERT_TRUE(await_settled());
  for (int i = 1; i <= 3; ++i) {
    clock.Advance(absl::Milliseconds(100));
    ASSERT_TRUE(await_settled());
    clock.Advance(absl::Milliseconds(200));
    ASSERT_TRUE(await_settled());
    absl::MutexLock lock(&mu);
    EXPECT_EQ(fired, i);
  }
  {
    absl::MutexLock lock(&mu);
    stop = true;
  }
  timer.join();
  EXPECT_EQ(fired, 3);
}

TEST(Clock, RealAwaitUntilTimesOutOnTheSteadyClockAndSeesItsCondition) {
  const Clock& clock = Clock::Real();
  absl::Mutex mu;
  bool never = false, always = true;
  absl::MutexLock lock(&mu);
  const absl::Duration start = clock.Steady();
  EXPECT_FALSE(clock.AwaitUntil(&mu, absl::Condition(&never), start + absl::Milliseconds(5)));
  EXPECT_GE(clock.Steady(), start + absl::Milliseconds(5));
  EXPECT_TRUE(clock.AwaitUntil(&mu, absl::Condition(&always), absl::InfiniteDuration()));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
