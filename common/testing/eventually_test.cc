// Copyright 2026 The kvstore Authors.
//
// Eventually() returns as soon as its condition holds, and fails with a
// message once the bound has passed. The bounds here are short on purpose:
// they are what is being tested, and only the failure case waits them out.

#include "common/testing/eventually.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace testing {
namespace {

using ::testing::HasSubstr;

TEST(Eventually, TrueAtOnceDoesNotPoll) {
  int calls = 0;
  EXPECT_TRUE(Eventually([&] {
    ++calls;
    return true;
  }));
  EXPECT_EQ(calls, 1);
}

TEST(Eventually, WaitsForAnotherThread) {
  std::atomic<bool> done{false};
  std::thread t([&] { done = true; });
  EXPECT_TRUE(Eventually([&] { return done.load(); }));
  t.join();
}

TEST(Eventually, ConditionBecomingTrueAfterSomePollsPasses) {
  int calls = 0;
  EXPECT_TRUE(Eventually([&] { return ++calls == 5; }));
  EXPECT_EQ(calls, 5);
}

TEST(Eventually, FailsAfterTheBoundWithAMessage) {
  int calls = 0;
  const absl::Time start = absl::Now();
  ::testing::AssertionResult r = Eventually(
      [&] {
        ++calls;
        return false;
      },
      absl::Milliseconds(20), absl::Milliseconds(1));
  EXPECT_FALSE(r);
  // It waited at least the bound (a lower bound: a slow machine only adds).
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
  EXPECT_GE(calls, 2);
  EXPECT_THAT(r.message(), HasSubstr("condition still false after"));
  EXPECT_THAT(r.message(), HasSubstr("bound 20ms"));
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
