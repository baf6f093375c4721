// Copyright 2026 The kvstore Authors.
//
// The per-key linearizability checker on hand-written histories: ones a
// linearizable register may produce (must pass) and ones it cannot (must
// fail, with the ops that show it).

#include "tests/jepsen/linearizability.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/jepsen/test_ops.h"

namespace kvstore {
namespace jepsen {
namespace {

using test_ops::Del;
using test_ops::Get;
using test_ops::Put;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

LinearizabilityReport Check(const std::vector<Op>& ops) {
  return CheckLinearizable(ops, LinearizabilityOptions());
}

std::vector<uint64_t> Ids(const std::vector<Op>& ops) {
  std::vector<uint64_t> ids;
  for (const Op& op : ops) ids.push_back(op.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The one violating key's explanation (ids sorted); fails the test unless
// exactly one key violates.
std::vector<uint64_t> ViolationIds(const LinearizabilityReport& r) {
  EXPECT_EQ(r.violations.size(), 1u);
  EXPECT_THAT(r.unknown, IsEmpty());
  if (r.violations.size() != 1) return {};
  EXPECT_TRUE(r.violations[0].minimal);
  return Ids(r.violations[0].explanation);
}

TEST(LinearizabilityTest, EmptyAndSequentialHistoriesPass) {
  EXPECT_TRUE(Check({}).ok());
  const LinearizabilityReport r =
      Check({Get(1, "k", std::nullopt, 0, 1), Put(2, "k", "v1", 2, 3), Get(3, "k", "v1", 4, 5),
             Del(4, "k", 6, 7), Get(5, "k", std::nullopt, 8, 9)});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.keys, 1u);
  EXPECT_EQ(r.keys_ok, 1u);
}

TEST(LinearizabilityTest, ConcurrentWritesMaySeemToTakeEffectInEitherOrder) {
  for (const char* seen : {"v1", "v2"}) {
    EXPECT_TRUE(Check({Put(1, "k", "v1", 0, 10), Put(2, "k", "v2", 0, 10),
                       Get(3, "k", seen, 11, 12), Get(4, "k", seen, 13, 14)})
                    .ok())
        << seen;
  }
  // A read concurrent with a write may see the old or the new value.
  EXPECT_TRUE(Check({Put(1, "k", "v1", 0, 1), Put(2, "k", "v2", 2, 10), Get(3, "k", "v1", 3, 4),
                     Get(4, "k", "v2", 5, 6), Get(5, "k", "v2", 7, 8)})
                  .ok());
}

TEST(LinearizabilityTest, StaleReadAfterAnAcknowledgedWriteFails) {
  const LinearizabilityReport r =
      Check({Put(1, "k", "v1", 0, 1), Put(2, "k", "v2", 2, 3), Get(3, "k", "v1", 4, 5)});
  EXPECT_THAT(ViolationIds(r), ElementsAre(1, 2, 3));
}

// W1 and W2 overlap and are both acknowledged late; reads in real-time order
// return v2, v1, v2. Either order of the writes leaves one read impossible.
// (A per-read "superseded" test that only looks at the first read of each
// value accepts this.)
TEST(LinearizabilityTest, FlipFlopBetweenConcurrentWritesFails) {
  const LinearizabilityReport r =
      Check({Put(1, "k", "v1", 0, 100), Put(2, "k", "v2", 0, 100), Get(3, "k", "v2", 10, 20),
             Get(4, "k", "v1", 30, 40), Get(5, "k", "v2", 50, 60)});
  EXPECT_THAT(ViolationIds(r), ElementsAre(1, 2, 3, 4, 5));
  // Without the last read, W2 then W1 explains it.
  EXPECT_TRUE(Check({Put(1, "k", "v1", 0, 100), Put(2, "k", "v2", 0, 100),
                     Get(3, "k", "v2", 10, 20), Get(4, "k", "v1", 30, 40)})
                  .ok());
}

TEST(LinearizabilityTest, ARefusedWriteWhoseValueIsReadFails) {
  const LinearizabilityReport r =
      Check({Put(1, "k", "v1", 0, 1, Outcome::kFail), Get(2, "k", "v1", 2, 3)});
  EXPECT_THAT(ViolationIds(r), ElementsAre(1, 2));
  EXPECT_THAT(r.violations[0].reason, HasSubstr("refused"));
  // The same write of unknown outcome may have taken effect.
  EXPECT_TRUE(Check({Put(1, "k", "v1", 0, 1, Outcome::kUnknown), Get(2, "k", "v1", 2, 3)}).ok());
}

// An unknown write v1 is read, an acknowledged v2 overwrites it, then v1 is
// read again: the write took effect twice, or after a later acked write.
TEST(LinearizabilityTest, AValueResurrectedAfterALaterAcknowledgedOverwriteFails) {
  const LinearizabilityReport r =
      Check({Put(1, "k", "v1", 0, 1, Outcome::kUnknown), Get(2, "k", "v1", 2, 3),
             Put(3, "k", "v2", 4, 5), Get(4, "k", "v2", 6, 7), Get(5, "k", "v1", 8, 9)});
  EXPECT_THAT(ViolationIds(r), ElementsAre(1, 2, 3, 5));
}

// An unknown write may take effect long after its invocation, even after a
// later acknowledged write (the "maybe, at any time" of an unknown outcome).
TEST(LinearizabilityTest, AnUnknownWriteMayTakeEffectLateOrNever) {
  EXPECT_TRUE(Check({Put(1, "k", "v1", 0, 1, Outcome::kUnknown), Put(2, "k", "v2", 4, 5),
                     Get(3, "k", "v2", 6, 7), Get(4, "k", "v1", 8, 9), Get(5, "k", "v1", 10, 11)})
                  .ok());
  EXPECT_TRUE(Check({Put(1, "k", "v1", 0, 1, Outcome::kUnknown), Get(2, "k", std::nullopt, 2, 3),
                     Get(3, "k", std::nullopt, 100, 101)})
                  .ok());
  // ... but not before it was invoked.
  const LinearizabilityReport r =
      Check({Get(1, "k", "v1", 0, 1), Put(2, "k", "v1", 2, 3, Outcome::kUnknown)});
  EXPECT_THAT(ViolationIds(r), ElementsAre(1, 2));
  EXPECT_THAT(r.violations[0].reason, HasSubstr("before its write began"));
}

TEST(LinearizabilityTest, ADeleteFollowedByAReadOfTheOldValueFails) {
  const LinearizabilityReport r =
      Check({Put(1, "k", "v1", 0, 1), Del(2, "k", 2, 3), Get(3, "k", "v1", 4, 5)});
  EXPECT_THAT(ViolationIds(r), ElementsAre(1, 2, 3));
  EXPECT_TRUE(
      Check({Put(1, "k", "v1", 0, 1), Del(2, "k", 2, 3), Get(3, "k", std::nullopt, 4, 5)}).ok());
}

TEST(LinearizabilityTest, AbsentAfterAnAcknowledgedWriteFails) {
  const LinearizabilityReport r = Check({Put(1, "k", "v1", 0, 1), Get(2, "k", std::nullopt, 2, 3)});
  EXPECT_THAT(ViolationIds(r), ElementsAre(1, 2));
}

TEST(LinearizabilityTest, APhantomValueFails) {
  const LinearizabilityReport r = Check({Put(1, "k", "v1", 0, 1), Get(2, "k", "v9", 2, 3)});
  EXPECT_THAT(ViolationIds(r), ElementsAre(2));
  EXPECT_THAT(r.violations[0].reason, HasSubstr("no write of this key wrote"));
}

TEST(LinearizabilityTest, ReadsThatSawNothingAreDropped) {
  Op failed = Get(2, "k", std::nullopt, 2, 3);
  failed.outcome = Outcome::kFail;
  Op unknown = Get(3, "k", std::nullopt, 4, 5);
  unknown.outcome = Outcome::kUnknown;
  EXPECT_TRUE(Check({Put(1, "k", "v1", 0, 1), failed, unknown}).ok());
}

TEST(LinearizabilityTest, KeysAreJudgedApart) {
  const LinearizabilityReport r =
      Check({Put(1, "a", "v1", 0, 1), Put(2, "b", "v1", 0, 1), Get(3, "a", "v1", 2, 3),
             Put(4, "b", "v2", 2, 3), Get(5, "b", "v1", 4, 5)});
  EXPECT_EQ(r.keys, 2u);
  EXPECT_EQ(r.keys_ok, 1u);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_EQ(r.violations[0].key, "b");
}

// A stale read at the end of a long correct history: the explanation is the
// three ops that show it, not the history.
TEST(LinearizabilityTest, TheExplanationIsSmall) {
  std::vector<Op> ops;
  uint64_t id = 1;
  int64_t t = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string v = "v" + std::to_string(i);
    ops.push_back(Put(id++, "k", v, t, t + 3));
    ops.push_back(Get(id++, "k", v, t + 4, t + 5));
    ops.push_back(Get(id++, "k", v, t + 4, t + 6));
    t += 10;
  }
  ops.push_back(Get(id, "k", "v150", t, t + 1));
  const LinearizabilityReport r = Check(ops);
  ASSERT_EQ(r.violations.size(), 1u);
  const std::vector<uint64_t> ids = Ids(r.violations[0].explanation);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 1u + 150 * 3);  // PUT v150
  EXPECT_EQ(ids[2], id);            // the stale read
  EXPECT_EQ(r.violations[0].explanation.back().id, id);
}

TEST(LinearizabilityTest, ASearchPastItsBudgetIsUnknownNeverOk) {
  LinearizabilityOptions options;
  options.budget.max_steps = 2;
  const LinearizabilityReport r =
      CheckLinearizable({Put(1, "k", "v1", 0, 10), Put(2, "k", "v2", 0, 10),
                         Get(3, "k", "v1", 11, 12), Get(4, "k", "v1", 13, 14)},
                        options);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.keys_ok, 0u);
  EXPECT_THAT(r.violations, IsEmpty());
  ASSERT_EQ(r.unknown.size(), 1u);
  EXPECT_EQ(r.unknown[0].verdict, Verdict::kUnknown);
  EXPECT_THAT(r.unknown[0].reason, HasSubstr("budget"));
}

// A MultiPut's pairs are writes with the batch's interval, judged one by one.
TEST(LinearizabilityTest, MultiPutPairsAreSeparateWrites) {
  Op a = Put(1, "a", "m1", 0, 10);
  Op b = Put(2, "b", "m1", 0, 10, Outcome::kUnknown);
  a.batch = b.batch = "batch-1";
  EXPECT_TRUE(Check({a, b, Get(3, "a", "m1", 11, 12), Get(4, "b", std::nullopt, 11, 12)}).ok());
  const LinearizabilityReport r =
      Check({a, b, Put(3, "a", "x", 11, 12), Get(4, "a", "m1", 13, 14)});
  EXPECT_THAT(ViolationIds(r), ElementsAre(1, 3, 4));
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
