// Copyright 2026 The kvstore Authors.
//
// `kvctl cluster remove-node` against a real cluster (etcd, three kvserver
// processes, R=2) under a client workload: the node leading a shard is
// drained through another node (forwarded to the controller), the shards
// it was in are refilled from the two nodes left, the drained node is then
// stopped without any failover, and the history of every operation has
// zero violations (acknowledged writes kept, reads linearizable per key).
// Prints the seed (CLUSTER_TEST_SEED replays the workload's choices).

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"
#include "tests/cluster/history.h"
#include "tests/cluster/history_checker.h"
#include "tests/cluster/workload.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

uint32_t Seed() {
  uint32_t s = std::random_device{}();
  const char* env = std::getenv("CLUSTER_TEST_SEED");
  if (env != nullptr) (void)absl::SimpleAtoi(env, &s);
  std::printf("seed %u (CLUSTER_TEST_SEED=%u replays it)\n", s, s);
  return s;
}

ProcessResult Kvctl(const std::string& server, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BinaryPath("client/kvctl/kvctl"),
                                   absl::StrCat("--server=", server), "--timeout=10s"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv);
}

bool Names(const v1::ClusterMap& map, const std::string& id) {
  for (const v1::Shard& shard : map.shards()) {
    for (const std::string& r : shard.replicas()) {
      if (r == id) return true;
    }
    for (const std::string& r : shard.syncing()) {
      if (r == id) return true;
    }
  }
  return false;
}

TEST(ClusterRemoveNodeTest, DrainUnderLoadThenStopWithoutFailover) {
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.Start().ok());
  ClusterOptions o;
  o.etcd_endpoint = etcd.endpoint();
  o.nodes = 3;
  o.replicas = 2;
  auto started = ClusterHarness::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  ClusterHarness& cluster = **started;
  absl::Status healthy = cluster.WaitHealthy(absl::Seconds(30));
  ASSERT_TRUE(healthy.ok()) << healthy << "\n" << cluster.Logs();

  History history;
  WorkloadOptions w;
  w.servers = cluster.ControlAddresses();
  w.seed = Seed();
  Workload load(w, &history);
  load.Start();
  for (absl::Time end = absl::Now() + absl::Seconds(10);
       load.acknowledged_writes() < 20 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GT(load.acknowledged_writes(), 0u) << cluster.Logs();

  absl::StatusOr<int> victim = cluster.PrimaryIndexOf(load.Key(0));
  ASSERT_TRUE(victim.ok()) << victim.status();
  const std::string victim_id = ClusterHarness::NodeId(*victim);
  const int asker = (*victim + 1) % cluster.size();
  const std::string via = cluster.node(asker)->control_address();

  // Unknown node: refused, nothing changes.
  ProcessResult unknown = Kvctl(via, {"cluster", "remove-node", "nobody"});
  EXPECT_EQ(unknown.exit_code, 3) << unknown.out << unknown.err;
  EXPECT_TRUE(absl::StrContains(unknown.err, "nobody")) << unknown.err;

  ProcessResult removed = Kvctl(via, {"--json", "cluster", "remove-node", victim_id});
  ASSERT_EQ(removed.exit_code, 0) << removed.out << removed.err << "\n" << cluster.Logs();
  EXPECT_TRUE(absl::StrContains(removed.out, absl::StrCat("\"draining\":[\"", victim_id, "\"]")))
      << removed.out;
  std::printf("drained %s via %s\n", victim_id.c_str(), ClusterHarness::NodeId(asker).c_str());

  // The shards it was in are refilled from the others and caught up.
  ASSERT_TRUE(cluster.WaitNodeOutOfMap(*victim, absl::Seconds(10)).ok()) << cluster.Logs();
  healthy = cluster.WaitHealthy(absl::Seconds(30));
  ASSERT_TRUE(healthy.ok()) << healthy << "\n" << cluster.Logs();
  absl::StatusOr<v1::ClusterMap> before = cluster.GetMap();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(Names(*before, victim_id));
  ASSERT_EQ(before->draining_size(), 1);
  EXPECT_EQ(before->draining(0).node_id(), victim_id);
  for (const v1::Shard& shard : before->shards()) EXPECT_EQ(shard.replicas_size(), 2);

  // Stopped: no failover, only the mark goes.
  EXPECT_EQ(cluster.StopNode(*victim), 0);
  absl::StatusOr<v1::ClusterMap> after = cluster.GetMap();
  for (absl::Time end = absl::Now() + absl::Seconds(15);
       absl::Now() < end && (!after.ok() || after->draining_size() > 0);) {
    absl::SleepFor(absl::Milliseconds(100));
    after = cluster.GetMap();
  }
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->draining_size(), 0) << cluster.Logs();
  ASSERT_EQ(after->shards_size(), before->shards_size());
  for (int i = 0; i < after->shards_size(); ++i) {
    EXPECT_EQ(after->shards(i).shard_epoch(), before->shards(i).shard_epoch()) << i;
  }
  absl::SleepFor(absl::Milliseconds(500));  // load on the smaller cluster

  load.Stop();
  absl::Status read = load.FinalReads(absl::Seconds(20));
  EXPECT_TRUE(read.ok()) << read << "\n" << cluster.Logs();
  CheckOptions check;
  check.require_final_reads = true;
  const CheckResult result = CheckHistory(history.Snapshot(), check);
  std::printf("%s\n%llu operations\n", result.Report(0).c_str(),
              static_cast<unsigned long long>(load.operations()));
  EXPECT_TRUE(result.ok()) << result.Report() << "\n" << cluster.Logs();
  EXPECT_GT(result.acknowledged_writes, 50u);
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
