// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/write_availability.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace jepsen {
namespace {

constexpr int64_t kMs = 1000000;

Op Write(const std::string& key, int64_t invoke_ms, int64_t complete_ms, Outcome out) {
  Op op;
  op.kind = OpKind::kPut;
  op.key = key;
  op.value = "v";
  op.invoke_ns = invoke_ms * kMs;
  op.complete_ns = out == Outcome::kUnknown ? kNever : complete_ms * kMs;
  op.outcome = out;
  return op;
}

// Keys "a..." are shard 0, "b..." shard 1.
int ShardOf(const std::string& key) { return key[0] == 'a' ? 0 : key[0] == 'b' ? 1 : -1; }

TEST(WriteAvailability, CountsOnlyAcknowledgedWritesInvokedAfterTheInstant) {
  const std::vector<Op> ops = {
      Write("a1", 0, 10, Outcome::kOk),
      Write("a2", 900, 1500, Outcome::kOk),  // invoked before 1000: a retry got through
      Write("b1", 1100, 0, Outcome::kUnknown),
      Write("b2", 1150, 1160, Outcome::kFail),
      Write("a3", 1200, 1300, Outcome::kOk),
      Write("b3", 1400, 1700, Outcome::kOk),
  };
  const WriteAvailability a = MeasureWrites(ops, ShardOf, 2, 100 * kMs, 1000 * kMs, 2000 * kMs);
  EXPECT_DOUBLE_EQ(a.first_write_ms, 300);
  EXPECT_DOUBLE_EQ(a.all_shards_ms, 700);
  EXPECT_EQ(a.shards_without_write, 0);
  // 10 -> 1300 is the longest gap between acknowledged completions.
  EXPECT_DOUBLE_EQ(a.longest_gap_ms, 1290);
  EXPECT_EQ(a.gap_start_ns, 10 * kMs);
  // Shard 1 wrote nothing acknowledged before 1700: from `from` (100).
  EXPECT_EQ(a.longest_gap_shard, 1);
  EXPECT_DOUBLE_EQ(a.longest_shard_gap_ms, 1600);
}

TEST(WriteAvailability, ShardWithoutWriteAndGapToTheEnd) {
  const std::vector<Op> ops = {
      Write("a1", 0, 10, Outcome::kOk),
      Write("a2", 1200, 1300, Outcome::kOk),
  };
  const WriteAvailability a = MeasureWrites(ops, ShardOf, 2, 100 * kMs, 1000 * kMs, 5000 * kMs);
  EXPECT_DOUBLE_EQ(a.first_write_ms, 300);
  EXPECT_LT(a.all_shards_ms, 0);
  EXPECT_EQ(a.shards_without_write, 1);
  EXPECT_DOUBLE_EQ(a.longest_gap_ms, 3700);  // 1300 -> the end of the load
  EXPECT_THAT(DescribeAvailability(a), ::testing::HasSubstr("1 shards never"));
}

TEST(WriteAvailability, NoWriteAtAll) {
  const WriteAvailability a = MeasureWrites({}, ShardOf, 1, 0, 0, 100 * kMs);
  EXPECT_LT(a.first_write_ms, 0);
  EXPECT_DOUBLE_EQ(a.longest_gap_ms, 100);
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
