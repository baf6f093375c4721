// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/history_check.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/jepsen/history_io.h"
#include "tests/jepsen/test_ops.h"

namespace kvstore {
namespace jepsen {
namespace {

using test_ops::Get;
using test_ops::Put;
using ::testing::HasSubstr;

Op Final(Op op) {
  op.final_read = true;
  return op;
}

TEST(HistoryCheckTest, ACleanHistoryPasses) {
  const HistoryCheckResult r =
      CheckHistory({Put(1, "k", "v1", 0, 1), Put(2, "k", "v2", 0, 3, Outcome::kUnknown),
                    Final(Get(3, "k", "v1", 10, 11))},
                   HistoryCheckOptions());
  EXPECT_EQ(r.ExitCode(), 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("ops: 3 (writes ok 1, fail 0, unknown 1; reads ok 1"));
  EXPECT_THAT(r.text, HasSubstr("linearizability: 1 keys, 1 ok, 0 violating, 0 unknown"));
}

TEST(HistoryCheckTest, AViolationIsPrintedWithItsOps) {
  const HistoryCheckResult r =
      CheckHistory({Put(1, "k", "v1", 0, 1), Put(2, "k", "v2", 2, 3), Get(3, "k", "v1", 4, 5)},
                   HistoryCheckOptions());
  EXPECT_EQ(r.ExitCode(), 1);
  EXPECT_THAT(r.text, HasSubstr("VIOLATION key k"));
  EXPECT_THAT(r.text, HasSubstr("#3 c3 GET k -> v1"));
}

TEST(HistoryCheckTest, SetKeysGoToTheSetChecker) {
  HistoryCheckOptions options;
  options.set_prefix = "s-";
  const HistoryCheckResult r =
      CheckHistory({Put(1, "s-1", "a", 0, 1), Final(Get(2, "s-1", std::nullopt, 10, 11)),
                    Put(3, "k", "v1", 0, 1), Final(Get(4, "k", "v1", 10, 11))},
                   options);
  EXPECT_EQ(r.ExitCode(), 1);
  EXPECT_THAT(r.text, HasSubstr("linearizability: 1 keys, 1 ok"));
  EXPECT_THAT(r.text, HasSubstr("VIOLATION lost key s-1"));
}

TEST(HistoryCheckTest, MissingFinalReadsFailOnlyWhenRequired) {
  const std::vector<Op> ops = {Put(1, "k", "v1", 0, 1)};
  EXPECT_EQ(CheckHistory(ops, HistoryCheckOptions()).ExitCode(), 0);
  HistoryCheckOptions options;
  options.require_final_reads = true;
  const HistoryCheckResult r = CheckHistory(ops, options);
  EXPECT_EQ(r.ExitCode(), 1);
  EXPECT_THAT(r.text, HasSubstr("no final read of k"));
}

TEST(HistoryCheckTest, AnUndecidedKeyIsNotAPass) {
  HistoryCheckOptions options;
  options.linearizability.budget.max_steps = 1;
  const HistoryCheckResult r =
      CheckHistory({Put(1, "k", "v1", 0, 1), Get(2, "k", "v1", 2, 3)}, options);
  EXPECT_EQ(r.ExitCode(), 3);
  EXPECT_THAT(r.text, HasSubstr("UNKNOWN key k"));
}

// The review's example in chaos.sh's format: concurrent W1, W2 acknowledged
// late, reads v2, v1, v2.
TEST(HistoryCheckTest, TheClusterTestsFormatIsChecked) {
  absl::StatusOr<std::vector<Op>> ops = ParseHistory(
      R"({"id":0,"client":0,"op":"PUT","key":"key1","value":"v1","invoke_us":0,"complete_us":100,"outcome":"ok"}
{"id":1,"client":1,"op":"PUT","key":"key1","value":"v2","invoke_us":0,"complete_us":100,"outcome":"ok"}
{"id":2,"client":2,"op":"GET","key":"key1","value":"v2","invoke_us":10,"complete_us":20,"outcome":"ok"}
{"id":3,"client":2,"op":"GET","key":"key1","value":"v1","invoke_us":30,"complete_us":40,"outcome":"ok"}
{"id":4,"client":2,"op":"GET","key":"key1","value":"v2","invoke_us":50,"complete_us":60,"outcome":"ok"}
)");
  ASSERT_TRUE(ops.ok()) << ops.status();
  const HistoryCheckResult r = CheckHistory(*ops, HistoryCheckOptions());
  EXPECT_EQ(r.ExitCode(), 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("no order of these 5 ops"));
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
