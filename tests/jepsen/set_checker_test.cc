// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/set_checker.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/jepsen/test_ops.h"

namespace kvstore {
namespace jepsen {
namespace {

using test_ops::Get;
using test_ops::Put;
using ::testing::IsEmpty;

Op Final(Op op) {
  op.final_read = true;
  return op;
}

std::vector<SetViolationKind> Kinds(const SetReport& r) {
  std::vector<SetViolationKind> kinds;
  for (const SetViolation& v : r.violations) kinds.push_back(v.kind);
  return kinds;
}

TEST(SetCheckerTest, AckedInsertsPresentAtTheEndPass) {
  const SetReport r =
      CheckSet({Put(1, "s1", "a", 0, 1), Put(2, "s2", "b", 0, 1), Get(3, "s1", std::nullopt, 0, 1),
                Get(4, "s1", "a", 2, 3), Final(Get(5, "s1", "a", 10, 11)),
                Final(Get(6, "s2", "b", 10, 11))});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.keys, 2u);
  EXPECT_EQ(r.acked, 2u);
  EXPECT_EQ(r.unchecked, 0u);
}

TEST(SetCheckerTest, AnAckedInsertAbsentAtTheEndIsLost) {
  const SetReport r =
      CheckSet({Put(1, "s1", "a", 0, 1), Final(Get(2, "s1", std::nullopt, 10, 11))});
  EXPECT_THAT(Kinds(r), ::testing::ElementsAre(SetViolationKind::kLost));
  EXPECT_EQ(r.violations[0].key, "s1");
  EXPECT_EQ(r.violations[0].ops.size(), 2u);
}

TEST(SetCheckerTest, PresentThenAbsentIsUnstable) {
  const SetReport r =
      CheckSet({Put(1, "s1", "a", 0, 5, Outcome::kUnknown), Get(2, "s1", "a", 6, 7),
                Get(3, "s1", std::nullopt, 8, 9), Final(Get(4, "s1", "a", 20, 21))});
  EXPECT_THAT(Kinds(r), ::testing::ElementsAre(SetViolationKind::kUnstable));
  // Concurrent reads may disagree.
  EXPECT_TRUE(CheckSet({Put(1, "s1", "a", 0, 10), Get(2, "s1", "a", 1, 5),
                        Get(3, "s1", std::nullopt, 2, 6), Final(Get(4, "s1", "a", 20, 21))})
                  .ok());
}

TEST(SetCheckerTest, AnUnknownInsertMayAppearOrNot) {
  const SetReport r = CheckSet(
      {Put(1, "s1", "a", 0, 1, Outcome::kUnknown), Put(2, "s2", "b", 0, 1, Outcome::kUnknown),
       Final(Get(3, "s1", "a", 10, 11)), Final(Get(4, "s2", std::nullopt, 10, 11))});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.unknown, 2u);
  EXPECT_EQ(r.unknown_present, 1u);
}

TEST(SetCheckerTest, ARefusedInsertThatAppearsIsAViolation) {
  const SetReport r =
      CheckSet({Put(1, "s1", "a", 0, 1, Outcome::kFail), Final(Get(2, "s1", "a", 10, 11))});
  EXPECT_THAT(Kinds(r), ::testing::ElementsAre(SetViolationKind::kRefusedPresent));
  EXPECT_EQ(r.failed, 1u);
  EXPECT_TRUE(
      CheckSet({Put(1, "s1", "a", 0, 1, Outcome::kFail), Final(Get(2, "s1", std::nullopt, 10, 11))})
          .ok());
}

TEST(SetCheckerTest, PhantomsFutureReadsAndOverwritesAreViolations) {
  EXPECT_THAT(Kinds(CheckSet({Final(Get(1, "s9", "z", 10, 11))})),
              ::testing::ElementsAre(SetViolationKind::kPhantom));
  EXPECT_THAT(Kinds(CheckSet({Put(1, "s1", "a", 0, 1), Final(Get(2, "s1", "b", 10, 11))})),
              ::testing::ElementsAre(SetViolationKind::kPhantom));
  EXPECT_THAT(Kinds(CheckSet({Get(1, "s1", "a", 0, 1), Put(2, "s1", "a", 5, 6),
                              Final(Get(3, "s1", "a", 10, 11))})),
              ::testing::ElementsAre(SetViolationKind::kFutureRead));
  EXPECT_THAT(Kinds(CheckSet({Put(1, "s1", "a", 0, 1), Put(2, "s1", "b", 2, 3)})),
              ::testing::ElementsAre(SetViolationKind::kNotWriteOnce));
}

TEST(SetCheckerTest, AKeyWithoutAFinalReadIsCountedNotJudgedLost) {
  const SetReport r = CheckSet({Put(1, "s1", "a", 0, 1)});
  EXPECT_THAT(r.violations, IsEmpty());
  EXPECT_EQ(r.unchecked, 1u);
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
