// Copyright 2026 The kvstore Authors.
//
// ClusterHarness's health rule on hand-made maps (the processes it runs are
// exercised by the failover and partition tests).

#include "tests/cluster/cluster_harness.h"

#include <set>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster/etcd_process.h"

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

// n3 was killed and restarted at once: the map still names its earlier
// life (incarnation 5) as an in-sync replica, whose copy died with it.
TEST(ClusterHarnessTest, MapProblemDoesNotCountTheEarlierLifeOfARestartedNode) {
  const std::set<std::string> all = {"n1", "n2", "n3"};
  v1::ClusterMap map = Map({{"n1", "n2"}, {"n2", "n3"}, {"n3", "n1"}});
  for (const char* id : {"n1", "n2", "n3"}) {
    v1::ClusterNode* n = map.add_nodes();
    n->set_node_id(id);
    n->set_incarnation(5);
  }
  EXPECT_THAT(ClusterHarness::MapProblem(map, all, 2, {{"n3", 5}}),
              HasSubstr("shard 1 [n2,n3] syncing []: n3 is an earlier incarnation"));
  // Once the map records the new process, it counts.
  map.mutable_nodes(2)->set_incarnation(6);
  EXPECT_EQ(ClusterHarness::MapProblem(map, all, 2, {{"n3", 5}}), "");
}

TEST(ClusterHarnessTest, NeedsAnEtcdEndpoint) {
  ClusterOptions o;
  auto h = ClusterHarness::Start(o);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
}

// The harness's fault controls on a real cluster (no client load): the map
// gets full, a killed primary is replaced, the restarted node rejoins in
// sync, a frozen-then-resumed primary registers again (memory kept) and the
// cluster is whole again without a restart.
TEST(ClusterHarnessTest, KillRestartAndFreezeAPrimary) {
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.Start().ok());
  ClusterOptions o;
  o.etcd_endpoint = etcd.endpoint();
  auto c = ClusterHarness::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ClusterHarness& cluster = **c;
  absl::Status s = cluster.WaitHealthy(absl::Seconds(30));
  ASSERT_TRUE(s.ok()) << s << "\n" << cluster.Logs();
  EXPECT_EQ(cluster.ControlAddresses().size(), 3u);

  absl::StatusOr<int> primary = cluster.PrimaryIndexOf("key0");
  ASSERT_TRUE(primary.ok()) << primary.status();
  absl::StatusOr<std::vector<int>> backups = cluster.BackupIndexesOf("key0");
  ASSERT_TRUE(backups.ok());
  ASSERT_EQ(backups->size(), 1u);
  const absl::Time killed = absl::Now();
  cluster.KillNode(*primary);
  EXPECT_EQ(cluster.node(*primary), nullptr);
  absl::StatusOr<std::string> next =
      cluster.WaitNewPrimary("key0", ClusterHarness::NodeId(*primary), absl::Seconds(20));
  ASSERT_TRUE(next.ok()) << next.status() << "\n" << cluster.Logs();
  EXPECT_EQ(*next, ClusterHarness::NodeId(backups->front()));
  std::printf("kill -9 -> new primary in the map: %.0f ms\n",
              absl::ToDoubleMilliseconds(absl::Now() - killed));
  ASSERT_TRUE(cluster.RestartNode(*primary).ok());
  s = cluster.WaitHealthy(absl::Seconds(30));
  ASSERT_TRUE(s.ok()) << s << "\n" << cluster.Logs();

  absl::StatusOr<int> frozen = cluster.PrimaryIndexOf("key0");
  ASSERT_TRUE(frozen.ok());
  cluster.PauseNode(*frozen);
  next = cluster.WaitNewPrimary("key0", ClusterHarness::NodeId(*frozen), absl::Seconds(20));
  ASSERT_TRUE(next.ok()) << next.status() << "\n" << cluster.Logs();
  cluster.ResumeNode(*frozen);
  s = cluster.WaitReregistered(*frozen, absl::Seconds(15));
  ASSERT_TRUE(s.ok()) << s << "\n" << cluster.Logs();
  s = cluster.WaitHealthy(absl::Seconds(30));
  EXPECT_TRUE(s.ok()) << s << "\n" << cluster.Logs();
}

TEST(ClusterHarnessTest, NamesNodes) {
  EXPECT_EQ(ClusterHarness::NodeId(0), "n1");
  EXPECT_EQ(ClusterHarness::NodeId(2), "n3");
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
