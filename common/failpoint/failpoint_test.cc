// Copyright 2026 The kvstore Authors.
//
// The failpoint library: unarmed points are OK, armed ones run their
// action on the thread that reaches them, a Pause holds threads until it
// is released, and the command-line spec arms what it says or nothing.

#include "common/failpoint/failpoint.h"

#include <atomic>
#include <thread>

#include "absl/status/status.h"
#include "common/failpoint/failpoint_testing.h"
#include "common/status_macros.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace failpoint {
namespace {

using ::kvstore::testing::Eventually;
using ::kvstore::testing::IsOk;
using ::kvstore::testing::StatusIs;
using ::testing::HasSubstr;

// A function with a point in it, as production code has.
absl::Status Step(const char* name, int* after) {
  KV_RETURN_IF_ERROR(KV_FAILPOINT(name));
  ++*after;
  return absl::OkStatus();
}

TEST(Failpoint, UnarmedPointsAreOkAndCostNoLookup) {
  EXPECT_EQ(internal::armed_points.load(), 0);
  int after = 0;
  EXPECT_THAT(Step("test/unarmed", &after), IsOk());
  EXPECT_EQ(after, 1);
  EXPECT_EQ(internal::Hits("test/unarmed"), 0);
}

TEST(Failpoint, AnErrorActionStopsTheStepAndDisarmingRestoresIt) {
  int after = 0;
  {
    ScopedFailpoint fp("test/error", ReturnError(absl::UnavailableError("injected")));
    EXPECT_EQ(internal::armed_points.load(), 1);
    EXPECT_THAT(Step("test/error", &after),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr("injected")));
    // Another point is untouched by it.
    EXPECT_THAT(Step("test/other", &after), IsOk());
    EXPECT_EQ(fp.hits(), 1);
  }
  EXPECT_EQ(internal::armed_points.load(), 0);
  EXPECT_THAT(Step("test/error", &after), IsOk());
  EXPECT_EQ(after, 2);
}

TEST(Failpoint, ACallbackRunsOnTheThreadThatReachesThePoint) {
  std::thread::id ran_on;
  ScopedFailpoint fp("test/callback", [&] {
    ran_on = std::this_thread::get_id();
    return absl::OkStatus();
  });
  int after = 0;
  std::thread t([&] { EXPECT_THAT(Step("test/callback", &after), IsOk()); });
  const std::thread::id id = t.get_id();
  t.join();
  EXPECT_EQ(ran_on, id);
  EXPECT_EQ(after, 1);
}

TEST(Failpoint, APauseHoldsThreadsUntilReleased) {
  Pause pause("test/pause");
  std::atomic<int> after{0};
  int a = 0, b = 0;
  std::thread t1([&] {
    EXPECT_THAT(Step("test/pause", &a), IsOk());
    ++after;
  });
  std::thread t2([&] {
    EXPECT_THAT(Step("test/pause", &b), IsOk());
    ++after;
  });
  ASSERT_TRUE(pause.WaitUntilReached());
  ASSERT_TRUE(Eventually([&] { return pause.reached() == 2; }));
  // Both are held at the point: neither has gone past it.
  EXPECT_EQ(after.load(), 0);
  pause.Release();
  t1.join();
  t2.join();
  EXPECT_EQ(after.load(), 2);
  // Released means disarmed: a later arrival passes.
  int c = 0;
  EXPECT_THAT(Step("test/pause", &c), IsOk());
  EXPECT_EQ(pause.reached(), 2);
}

TEST(Failpoint, WaitUntilReachedFailsWhenNothingArrives) {
  Pause pause("test/never");
  EXPECT_FALSE(pause.WaitUntilReached(absl::Milliseconds(1)));
}

TEST(Failpoint, SpecArmsErrorsAndSleeps) {
  ASSERT_THAT(ArmFromSpec("test/spec-a=error(UNAVAILABLE), test/spec-b=sleep(1ms)"), IsOk());
  int after = 0;
  EXPECT_THAT(Step("test/spec-a", &after),
              StatusIs(absl::StatusCode::kUnavailable, "failpoint test/spec-a"));
  EXPECT_THAT(Step("test/spec-b", &after), IsOk());
  EXPECT_EQ(after, 1);
  internal::Disarm("test/spec-a");
  internal::Disarm("test/spec-b");
  EXPECT_EQ(internal::armed_points.load(), 0);
}

TEST(Failpoint, MalformedSpecArmsNothing) {
  for (const char* bad : {"test/x", "test/x=", "=exit", "test/x=explode", "test/x=error(NOPE)",
                          "test/x=sleep(soon)", "test/ok=exit,test/y=error()"}) {
    EXPECT_THAT(ArmFromSpec(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
  EXPECT_EQ(internal::armed_points.load(), 0);
}

TEST(FailpointDeathTest, ExitStopsTheProcessWithItsOwnStatus) {
  EXPECT_EXIT(
      {
        (void)ArmFromSpec("test/exit=exit");
        int after = 0;
        (void)Step("test/exit", &after);
      },
      ::testing::ExitedWithCode(kFailpointExitCode), "");
}

}  // namespace
}  // namespace failpoint
}  // namespace kvstore
