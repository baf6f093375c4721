// Copyright 2026 The kvstore Authors.

#include "common/sync/deadline_timer.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace {

TEST(DeadlineTimer, ADeadlinePassedRunsAndACancelledOneDoesNot) {
  DeadlineTimer timer;
  absl::Notification ran;
  bool cancelled_ran = false;
  DeadlineTimer::Id later = timer.Add(absl::Now() + absl::Hours(1), [&] { cancelled_ran = true; });
  timer.Add(absl::Now() - absl::Seconds(1), [&] { ran.Notify(); });
  // The thread was asleep until the hour's deadline: the earlier one wakes it.
  ran.WaitForNotification();
  EXPECT_TRUE(timer.Cancel(later));
  EXPECT_FALSE(timer.Cancel(later));
  EXPECT_FALSE(cancelled_ran);
}

TEST(DeadlineTimer, CallbacksRunInDeadlineOrder) {
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification busy, release, last;
  DeadlineTimer timer;
  // The thread is held in a first callback while three more, already due,
  // are added latest deadline first.
  timer.Add(absl::Now() - absl::Seconds(10), [&] {
    busy.Notify();
    release.WaitForNotification();
  });
  busy.WaitForNotification();
  const absl::Time now = absl::Now();
  for (int i = 3; i >= 1; --i) {
    timer.Add(now - absl::Seconds(4 - i), [&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
      if (i == 3) last.Notify();
    });
  }
  release.Notify();
  last.WaitForNotification();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

}  // namespace
}  // namespace kvstore
