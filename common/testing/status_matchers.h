// Copyright 2026 The kvstore Authors.
//
// gMock matchers for absl::Status and absl::StatusOr<T>, under the names
// Abseil's own status_matchers.h uses (not shipped by the Abseil this tree
// builds with), so that a test reads the same either way:
//
//   EXPECT_THAT(store->Delete("k"), IsOk());
//   EXPECT_THAT(store->Get("k"), StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(Put(...), StatusIs(absl::StatusCode::kResourceExhausted,
//                                  HasSubstr("pool full")));
//   EXPECT_THAT(store->Get("k"), IsOkAndHolds(Property(&PinnedValue::value, "v")));
//
// IsOk() and StatusIs() match a Status or any StatusOr<T>; IsOkAndHolds()
// matches a StatusOr<T> whose value matches the inner matcher. On a
// mismatch the explanation names the status that was seen.
//
// Test-only (testonly = True in BUILD). Thread safety: matchers are
// immutable once built.

#ifndef KVSTORE_COMMON_TESTING_STATUS_MATCHERS_H_
#define KVSTORE_COMMON_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace kvstore {
namespace testing {
namespace internal_status {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

class IsOkMatcher {
 public:
  template <typename T>
  bool MatchAndExplain(const T& actual, ::testing::MatchResultListener* listener) const {
    const absl::Status& status = GetStatus(actual);
    if (!status.ok()) *listener << "which has status " << status;
    return status.ok();
  }
  void DescribeTo(std::ostream* os) const { *os << "is OK"; }
  void DescribeNegationTo(std::ostream* os) const { *os << "is not OK"; }
};

class StatusIsMatcher {
 public:
  StatusIsMatcher(::testing::Matcher<absl::StatusCode> code,
                  ::testing::Matcher<const std::string&> message)
      : code_(std::move(code)), message_(std::move(message)) {}

  template <typename T>
  bool MatchAndExplain(const T& actual, ::testing::MatchResultListener* listener) const {
    const absl::Status& status = GetStatus(actual);
    *listener << "which has status " << status;
    return code_.Matches(status.code()) && message_.Matches(std::string(status.message()));
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has a status code that ";
    code_.DescribeTo(os);
    *os << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "has a status code that ";
    code_.DescribeNegationTo(os);
    *os << " or a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  const ::testing::Matcher<absl::StatusCode> code_;
  const ::testing::Matcher<const std::string&> message_;
};

// Converts to a Matcher<StatusOr<T>> for whichever T the test uses, so the
// inner matcher is cast to the value type only then.
template <typename InnerMatcher>
class IsOkAndHoldsMatcher {
 public:
  explicit IsOkAndHoldsMatcher(InnerMatcher inner) : inner_(std::move(inner)) {}

  template <typename StatusOrType>
  operator ::testing::Matcher<StatusOrType>() const {  // NOLINT: implicit by design
    using Decayed = std::decay_t<StatusOrType>;
    return ::testing::Matcher<StatusOrType>(new Impl<Decayed>(inner_));
  }

 private:
  template <typename StatusOrType>
  class Impl : public ::testing::MatcherInterface<const StatusOrType&> {
   public:
    using ValueType = typename StatusOrType::value_type;
    explicit Impl(const InnerMatcher& inner)
        : inner_(::testing::SafeMatcherCast<const ValueType&>(inner)) {}

    bool MatchAndExplain(const StatusOrType& actual,
                         ::testing::MatchResultListener* listener) const override {
      if (!actual.ok()) {
        *listener << "which has status " << actual.status();
        return false;
      }
      ::testing::StringMatchResultListener inner_listener;
      const bool matched = inner_.MatchAndExplain(*actual, &inner_listener);
      const std::string explanation = inner_listener.str();
      if (!explanation.empty()) *listener << "which holds a value " << explanation;
      return matched;
    }
    void DescribeTo(std::ostream* os) const override {
      *os << "is OK and holds a value that ";
      inner_.DescribeTo(os);
    }
    void DescribeNegationTo(std::ostream* os) const override {
      *os << "is not OK or holds a value that ";
      inner_.DescribeNegationTo(os);
    }

   private:
    const ::testing::Matcher<const ValueType&> inner_;
  };

  const InnerMatcher inner_;
};

}  // namespace internal_status

// Matches an OK Status or StatusOr.
inline ::testing::PolymorphicMatcher<internal_status::IsOkMatcher> IsOk() {
  return ::testing::MakePolymorphicMatcher(internal_status::IsOkMatcher());
}

// Matches a Status or StatusOr whose code matches `code` (a StatusCode or
// a Matcher<StatusCode>) and, in the second form, whose message matches
// `message` (a string, or a matcher such as HasSubstr(...)).
inline ::testing::PolymorphicMatcher<internal_status::StatusIsMatcher> StatusIs(
    ::testing::Matcher<absl::StatusCode> code) {
  return ::testing::MakePolymorphicMatcher(
      internal_status::StatusIsMatcher(std::move(code), ::testing::_));
}
inline ::testing::PolymorphicMatcher<internal_status::StatusIsMatcher> StatusIs(
    ::testing::Matcher<absl::StatusCode> code, ::testing::Matcher<const std::string&> message) {
  return ::testing::MakePolymorphicMatcher(
      internal_status::StatusIsMatcher(std::move(code), std::move(message)));
}

// Matches an OK StatusOr<T> whose value matches `inner` (a value or a
// matcher of T).
template <typename InnerMatcher>
internal_status::IsOkAndHoldsMatcher<std::decay_t<InnerMatcher>> IsOkAndHolds(
    InnerMatcher&& inner) {
  return internal_status::IsOkAndHoldsMatcher<std::decay_t<InnerMatcher>>(
      std::forward<InnerMatcher>(inner));
}

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_COMMON_TESTING_STATUS_MATCHERS_H_
