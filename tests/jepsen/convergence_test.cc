// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/convergence.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/jepsen/replica_dumps_io.h"

namespace kvstore {
namespace jepsen {
namespace {

using ::testing::HasSubstr;

TEST(ConvergenceTest, IdenticalReplicasConverge) {
  const ConvergenceReport r = CheckConvergence(
      {ShardDumps{"0", {{"n1", {{"a", "1"}, {"b", "2"}}}, {"n2", {{"a", "1"}, {"b", "2"}}}}},
       ShardDumps{"1", {{"n3", {}}, {"n4", {}}}}});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.shards, 2u);
  EXPECT_EQ(r.replicas, 4u);
  EXPECT_EQ(r.keys, 2u);
}

TEST(ConvergenceTest, DifferentAndMissingValuesAreReported) {
  const ConvergenceReport r =
      CheckConvergence({ShardDumps{"0",
                                   {{"n1", {{"a", "1"}, {"b", "2"}, {"c", "3"}}},
                                    {"n2", {{"a", "1"}, {"b", "9"}}},
                                    {"n3", {{"a", "1"}, {"b", "2"}, {"c", "3"}}}}}});
  ASSERT_EQ(r.differences.size(), 2u);
  EXPECT_EQ(r.differences[0].key, "b");
  EXPECT_EQ(DescribeDifference(r.differences[0]), "shard 0 key b: n1=2 n2=9 n3=2");
  EXPECT_EQ(DescribeDifference(r.differences[1]), "shard 0 key c: n1=3 n2=(absent) n3=3");
}

TEST(ConvergenceTest, DumpsParseFromJsonLines) {
  absl::StatusOr<std::vector<ShardDumps>> dumps = ParseReplicaDumps(
      "{\"shard\":0,\"replica\":\"n1\",\"data\":{\"a\":\"1\"}}\n"
      "\n"
      "{\"shard\":0,\"replica\":\"n2\",\"data\":{\"a\":\"2\"}}\n");
  ASSERT_TRUE(dumps.ok()) << dumps.status();
  ASSERT_EQ(dumps->size(), 1u);
  EXPECT_EQ(CheckConvergence(*dumps).differences.size(), 1u);
  EXPECT_THAT(std::string(ParseReplicaDumps("{\"shard\":0,\"replica\":\"n1\",\"data\":{}}\n"
                                            "{\"shard\":0,\"replica\":\"n1\",\"data\":{}}")
                              .status()
                              .message()),
              HasSubstr("second dump"));
  EXPECT_FALSE(ParseReplicaDumps("{\"shard\":0,\"replica\":\"n1\"}").ok());
  EXPECT_FALSE(ParseReplicaDumps("{\"shard\":0,\"replica\":\"n1\",\"data\":{\"a\":1}}").ok());
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
