// Copyright 2026 The kvstore Authors.

#include "client/internal/cluster/pair_outcomes.h"

#include <string>
#include <utility>
#include <vector>

#include "client/internal/cluster/cluster_errors.h"
#include "client/internal/data_path.h"
#include "common/cluster/refusal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

using Next = PairOutcomes::Next;
using Pairs = std::vector<std::pair<std::string, std::string>>;

absl::Status TryAgain() { return cluster::ToStatus(cluster::Refusal::TryAgain(7, "handoff")); }
absl::Status Moved() { return cluster::ToStatus(cluster::Refusal::Moved(7, "n2", "h:1")); }

TEST(PairOutcomesTest, StoredPairsAreDoneAndRefusedOnesGoAgain) {
  const Pairs pairs = {{"a", "1"}, {"b", "2"}, {"c", "3"}};
  PairOutcomes o(pairs);
  EXPECT_EQ(o.Record(0, absl::OkStatus(), true, Verdict::kFinal), Next::kDone);
  EXPECT_EQ(o.Record(1, Moved(), true, Verdict::kRedirect), Next::kAgain);
  EXPECT_EQ(o.Record(2, TryAgain(), true, Verdict::kTryAgain), Next::kSingle);
  EXPECT_TRUE(o.MaySend(1));
  EXPECT_TRUE(o.status(0).ok());
}

// A pair that reached a node which then failed may have been stored: it
// ends kUnknown and is never sent again; a pair that never left is.
TEST(PairOutcomesTest, APairThatMayHaveBeenStoredIsUnknownAndNotSentAgain) {
  const Pairs pairs = {{"a", "1"}, {"b", "2"}};
  PairOutcomes o(pairs);
  EXPECT_EQ(o.Record(0, absl::UnavailableError("connection lost"), true, Verdict::kDown),
            Next::kDone);
  EXPECT_EQ(o.status(0).code(), absl::StatusCode::kUnknown);
  EXPECT_THAT(std::string(o.status(0).message()), ::testing::HasSubstr("outcome unknown"));
  EXPECT_EQ(o.Record(1, NotSent(absl::UnavailableError("not sent")), true, Verdict::kDown),
            Next::kAgain);
  // A refusal of unknown effect stands too.
  PairOutcomes o2(pairs);
  const absl::Status late = cluster::OutcomeUnknown(TryAgain());
  EXPECT_EQ(o2.Record(0, late, true, Verdict::kFinal), Next::kDone);
  EXPECT_EQ(o2.status(0).code(), absl::StatusCode::kUnknown);
}

// A node's answer (not stored) stands and does not hold back later pairs of
// its key.
TEST(PairOutcomesTest, ANodesAnswerStands) {
  const Pairs pairs = {{"a", "1"}, {"a", "2"}};
  PairOutcomes o(pairs);
  EXPECT_EQ(o.Record(0, absl::ResourceExhaustedError("pool full"), true, Verdict::kFinal),
            Next::kDone);
  EXPECT_EQ(o.Record(1, Moved(), true, Verdict::kRedirect), Next::kAgain);
  EXPECT_TRUE(o.MaySend(1));
  EXPECT_TRUE(absl::IsResourceExhausted(o.status(0)));
}

// Order per key: a later pair is not sent after an earlier one of unknown
// outcome (which could land after it), and follows an earlier pair put
// aside to be stored alone.
TEST(PairOutcomesTest, OrderPerKeyIsKept) {
  const Pairs pairs = {{"a", "1"}, {"b", "2"}, {"a", "3"}, {"b", "4"}, {"c", "5"}};
  PairOutcomes o(pairs);
  EXPECT_EQ(o.Record(0, absl::DeadlineExceededError("late"), true, Verdict::kFinal), Next::kDone);
  EXPECT_EQ(o.Record(1, TryAgain(), true, Verdict::kTryAgain), Next::kSingle);
  EXPECT_EQ(o.Record(2, Moved(), true, Verdict::kRedirect), Next::kAgain);
  EXPECT_EQ(o.Record(3, Moved(), true, Verdict::kRedirect), Next::kSingle);
  EXPECT_EQ(o.Record(4, Moved(), true, Verdict::kRedirect), Next::kAgain);
  EXPECT_FALSE(o.MaySend(2));
  EXPECT_EQ(o.status(2).code(), absl::StatusCode::kUnknown);
  EXPECT_TRUE(o.MaySend(4));
  // A pair stored alone with an unknown outcome holds back later ones too.
  o.Set(1, absl::UnknownError("outcome unknown: UNAVAILABLE: lost"));
  EXPECT_FALSE(o.MaySend(3));
}

}  // namespace
}  // namespace client
}  // namespace kvstore
