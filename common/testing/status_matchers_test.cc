// Copyright 2026 The kvstore Authors.
//
// The status matchers on Status and StatusOr: what they accept, what they
// refuse, and that a refusal names the status seen.

#include "common/testing/status_matchers.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace testing {
namespace {

using ::testing::AnyOf;
using ::testing::Eq;
using ::testing::Gt;
using ::testing::HasSubstr;
using ::testing::Matcher;
using ::testing::Not;
using ::testing::Pointee;
using ::testing::StartsWith;

// What a matcher says about `value` when it does not match.
template <typename T, typename M>
std::string Explain(const M& m, const T& value) {
  ::testing::StringMatchResultListener listener;
  Matcher<const T&>(m).MatchAndExplain(value, &listener);
  return listener.str();
}

TEST(StatusMatchers, IsOkOnStatusAndStatusOr) {
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(absl::StatusOr<int>(3), IsOk());
  EXPECT_THAT(absl::NotFoundError("x"), Not(IsOk()));
  EXPECT_THAT(absl::StatusOr<int>(absl::InternalError("x")), Not(IsOk()));
  EXPECT_THAT(Explain(IsOk(), absl::NotFoundError("no key k")), HasSubstr("no key k"));
}

TEST(StatusMatchers, StatusIsComparesCodeAndOptionallyMessage) {
  const absl::Status s = absl::ResourceExhaustedError("pool full: no run");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kNotFound)));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("pool full")));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted, "pool full: no run"));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("index"))));
  EXPECT_THAT(
      s, StatusIs(AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kResourceExhausted)));
  EXPECT_THAT(absl::OkStatus(), StatusIs(absl::StatusCode::kOk));

  const absl::StatusOr<std::string> so = absl::DeadlineExceededError("timed out");
  EXPECT_THAT(so, StatusIs(absl::StatusCode::kDeadlineExceeded, StartsWith("timed")));
  EXPECT_THAT(absl::StatusOr<std::string>("v"), StatusIs(absl::StatusCode::kOk));
  EXPECT_THAT(Explain(StatusIs(absl::StatusCode::kOk), s), HasSubstr("pool full: no run"));
}

TEST(StatusMatchers, IsOkAndHoldsMatchesTheValue) {
  EXPECT_THAT(absl::StatusOr<int>(7), IsOkAndHolds(7));
  EXPECT_THAT(absl::StatusOr<int>(7), IsOkAndHolds(Gt(5)));
  EXPECT_THAT(absl::StatusOr<int>(7), Not(IsOkAndHolds(8)));
  EXPECT_THAT(absl::StatusOr<int>(absl::NotFoundError("gone")), Not(IsOkAndHolds(7)));
  EXPECT_THAT(absl::StatusOr<std::string>("value"), IsOkAndHolds(HasSubstr("alu")));
  // A move-only value.
  absl::StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(4);
  EXPECT_THAT(p, IsOkAndHolds(Pointee(Eq(4))));
  EXPECT_THAT(Explain(IsOkAndHolds(7), absl::StatusOr<int>(absl::NotFoundError("gone"))),
              HasSubstr("gone"));
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
