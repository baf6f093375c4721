// Copyright 2026 The kvstore Authors.

#include "common/auth/delayed_answers.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace auth {
namespace {

using ::kvstore::testing::Eventually;

// Only lower bounds on time are checked: an answer may run late on a
// loaded machine, never early.
TEST(DelayedAnswersTest, AnAnswerRunsNoSoonerThanItsDelay) {
  DelayedAnswers answers(8);
  const absl::Time start = absl::Now();
  std::atomic<int64_t> ran_after_ms{-1};
  ASSERT_TRUE(answers.RunLater(absl::Milliseconds(100), [&] {
    ran_after_ms = absl::ToInt64Milliseconds(absl::Now() - start);
  }));
  ASSERT_TRUE(Eventually([&] { return ran_after_ms >= 0; }));
  EXPECT_GE(ran_after_ms, 100);
  EXPECT_EQ(answers.pending(), 0u);
}

TEST(DelayedAnswersTest, AnswersRunInTheOrderOfTheirDeadlines) {
  DelayedAnswers answers(8);
  absl::Mutex mu;
  std::vector<int> order;
  auto record = [&](int i) {
    return [&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
    };
  };
  ASSERT_TRUE(answers.RunLater(absl::Milliseconds(300), record(1)));
  ASSERT_TRUE(answers.RunLater(absl::Milliseconds(20), record(2)));
  ASSERT_TRUE(answers.RunLater(absl::Milliseconds(150), record(3)));
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock lock(&mu);
    return order.size() == 3;
  }));
  EXPECT_EQ(order, (std::vector<int>{2, 3, 1}));
}

// Beyond the bound the caller is told to answer itself, and nothing is
// kept; Stop() (and the destructor) run what waits at once.
TEST(DelayedAnswersTest, BeyondTheBoundTheCallerAnswersAndStopRunsTheRestNow) {
  DelayedAnswers answers(2);
  std::atomic<int> ran{0};
  EXPECT_TRUE(answers.RunLater(absl::Hours(1), [&] { ++ran; }));
  EXPECT_TRUE(answers.RunLater(absl::Hours(1), [&] { ++ran; }));
  EXPECT_FALSE(answers.RunLater(absl::Hours(1), [&] { ran += 100; }));
  EXPECT_EQ(answers.pending(), 2u);
  EXPECT_EQ(ran, 0);
  answers.Stop();
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(answers.pending(), 0u);
  EXPECT_FALSE(answers.RunLater(absl::Milliseconds(1), [&] { ran += 100; }));
  EXPECT_EQ(ran, 2);
}

TEST(DelayedAnswersTest, TheDestructorRunsWaitingAnswers) {
  std::atomic<int> ran{0};
  {
    DelayedAnswers answers(4);
    ASSERT_TRUE(answers.RunLater(absl::Hours(1), [&] { ++ran; }));
  }
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace auth
}  // namespace kvstore
