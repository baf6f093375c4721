// Copyright 2026 The kvstore Authors.
//
// Eventually(): the one way a test waits for something another thread or
// process will do. It polls a condition until it holds or a generous bound
// passes, so a loaded machine makes the test slower, never red; an idle
// machine returns as soon as the condition holds. Never use a fixed sleep
// followed by an assertion instead.
//
//   ASSERT_TRUE(Eventually([&] { return Value(reg, "x_total") == 1; }))
//       << "the sweep never counted the slow reader";
//
// The result is a ::testing::AssertionResult: success as soon as
// `condition` returns true; failure, saying how long it polled, when it
// was still false after `bound` (the condition is evaluated once more at
// the bound, so a condition that became true during the last poll interval
// passes).
//
// Test-only (testonly = True in BUILD). Thread safety: `condition` runs on
// the calling thread.

#ifndef KVSTORE_COMMON_TESTING_EVENTUALLY_H_
#define KVSTORE_COMMON_TESTING_EVENTUALLY_H_

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace testing {

// Far longer than anything a test waits for takes on an idle machine
// (milliseconds to a few seconds): the bound only decides how long a test
// that is really broken takes to say so.
inline constexpr absl::Duration kEventuallyBound = absl::Seconds(60);
inline constexpr absl::Duration kEventuallyPoll = absl::Milliseconds(2);

template <typename Condition>
::testing::AssertionResult Eventually(Condition&& condition,
                                      absl::Duration bound = kEventuallyBound,
                                      absl::Duration poll = kEventuallyPoll) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + bound;
  for (;;) {
    if (condition()) return ::testing::AssertionSuccess();
    if (absl::Now() >= deadline) break;
    absl::SleepFor(poll);
  }
  if (condition()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "condition still false after polling for " << absl::FormatDuration(absl::Now() - start)
         << " (bound " << absl::FormatDuration(bound) << ")";
}

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_COMMON_TESTING_EVENTUALLY_H_
