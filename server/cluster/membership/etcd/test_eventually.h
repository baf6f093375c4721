// Copyright 2026 The kvstore Authors.
//
// Eventually(): how the cluster tests wait for something another thread
// will do. It polls a condition until it holds or a generous bound passes,
// so a loaded machine makes a test slower, never red; an idle machine
// returns as soon as the condition holds. Never a fixed sleep followed by an
// assertion instead.
//
//   ASSERT_TRUE(Eventually([&] { return state.map_epoch() == 5; }));
//
// Returns a ::testing::AssertionResult: success as soon as `condition` is
// true; failure, saying how long it polled, when it is still false at
// `bound` (it is evaluated once more at the bound).
//
// Local to the cluster tests until the shared common/testing/eventually.h
// (same name, same signature) is in the tree; then this file goes.
//
// Test-only. `condition` runs on the calling thread.

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_TEST_EVENTUALLY_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_TEST_EVENTUALLY_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace testing {

// Far longer than anything the tests wait for takes on an idle machine: the
// bound only decides how long a really broken test takes to say so.
inline constexpr absl::Duration kEventuallyBound = absl::Seconds(60);
inline constexpr absl::Duration kEventuallyPoll = absl::Milliseconds(2);

template <typename Condition>
::testing::AssertionResult Eventually(Condition&& condition,
                                      absl::Duration bound = kEventuallyBound,
                                      absl::Duration poll = kEventuallyPoll) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + bound;
  while (!condition()) {
    if (absl::Now() >= deadline) {
      if (condition()) break;
      return ::testing::AssertionFailure() << "condition still false after polling for "
                                           << absl::FormatDuration(absl::Now() - start);
    }
    absl::SleepFor(poll);
  }
  return ::testing::AssertionSuccess();
}

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_TEST_EVENTUALLY_H_
