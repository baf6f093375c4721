// Copyright 2026 The kvstore Authors.
//
// ClusterHarness's health rule on hand-made maps (the processes it runs are
// exercised by the failover and partition tests).

#include "tests/cluster/cluster_harness.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace testing {
namespace {

using ::testing::HasSubstr;

v1::ClusterMap Map(const std::vector<std::vector<std::string>>& replicas,
                   const std::vector<std::vector<std::string>>& syncing = {}) {
  v1::ClusterMap map;
  map.set_epoch(7);
  for (size_t i = 0; i < replicas.size(); ++i) {
    v1::Shard* s = map.add_shards();
    s->set_shard_id(static_cast<uint32_t>(i));
    for (const std::string& r : replicas[i]) s->add_replicas(r);
    if (i < syncing.size()) {
      for (const std::string& r : syncing[i]) s->add_syncing(r);
    }
  }
  return map;
}

TEST(ClusterHarnessTest, MapProblemWantsFullInSyncShardsOfRunningNodes) {
  const std::set<std::string> all = {"n1", "n2", "n3"};
  EXPECT_EQ(ClusterHarness::MapProblem(Map({{"n1", "n2"}, {"n2", "n3"}, {"n3", "n1"}}), all, 2),
            "");
  EXPECT_THAT(ClusterHarness::MapProblem(v1::ClusterMap(), all, 2), HasSubstr("no shards"));
  EXPECT_THAT(ClusterHarness::MapProblem(Map({{"n1", "n2"}, {"n2"}, {"n3", "n1"}}), all, 2),
              HasSubstr("shard 1 [n2] syncing []: want 2"));
  EXPECT_THAT(
      ClusterHarness::MapProblem(Map({{"n1", "n2"}, {"n2"}, {"n3", "n1"}}, {{}, {"n3"}}), all, 2),
      HasSubstr("want 2"));
  EXPECT_THAT(ClusterHarness::MapProblem(Map({{"n1", "n2"}, {"n2", "n3"}}, {{"n3"}}), all, 2),
              HasSubstr("still syncing"));
  // n3 is down: shards need min(R, 2) = 2 replicas, none of them n3.
  const std::set<std::string> two = {"n1", "n2"};
  EXPECT_THAT(ClusterHarness::MapProblem(Map({{"n1", "n2"}, {"n2", "n3"}}), two, 2),
              HasSubstr("n3 is not running"));
  EXPECT_EQ(ClusterHarness::MapProblem(Map({{"n1", "n2"}, {"n2", "n1"}}), two, 3), "");
}

TEST(ClusterHarnessTest, NeedsAnEtcdEndpoint) {
  ClusterOptions o;
  auto h = ClusterHarness::Start(o);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClusterHarnessTest, NamesNodes) {
  EXPECT_EQ(ClusterHarness::NodeId(0), "n1");
  EXPECT_EQ(ClusterHarness::NodeId(2), "n3");
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
