// Copyright 2026 The kvstore Authors.
//
// Stock Redis Cluster clients against a real kvstore cluster (etcd, three
// kvserver processes, R=2): `redis-cli -c` and redis-py's RedisCluster
// follow MOVED across nodes, and still find every key after the primary of
// a shard was killed and a backup promoted. (resp_cluster_test covers the
// reply formats on in-process servers with a hand-made map.)

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

std::string RespPort(ClusterHarness& cluster, int i) {
  return absl::StrCat(cluster.node(i)->resp_port());
}

// `redis-cli -c -p PORT args...`, output without the trailing newline.
std::string RedisCli(const std::string& port, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"redis-cli", "-c", "-p", port};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, "", 20);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::string(absl::StripSuffix(r.out, "\n"));
}

TEST(RedisClusterE2eTest, StockClientsFollowMovedBeforeAndAfterAFailover) {
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.Start().ok());
  ClusterOptions o;
  o.etcd_endpoint = etcd.endpoint();
  auto c = ClusterHarness::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ClusterHarness& cluster = **c;
  absl::Status s = cluster.WaitHealthy(absl::Seconds(30));
  ASSERT_TRUE(s.ok()) << s << "\n" << cluster.Logs();

  // Written through node 0, read through node 2: most keys need a MOVED.
  constexpr int kKeys = 30;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_EQ(RedisCli(RespPort(cluster, 0), {"set", absl::StrCat("k", i), absl::StrCat("v", i)}),
              "OK");
  }
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ(RedisCli(RespPort(cluster, 2), {"get", absl::StrCat("k", i)}), absl::StrCat("v", i));
  }
  // A cluster-aware client library (redis-py) learns the slots itself.
  ProcessResult py = RunProcess({"python3", BinaryPath("server/resp/redis_cluster_client_test.py"),
                                 RespPort(cluster, 1), "1234", "60"},
                                "", 60);
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;

  // Kill the primary of k0's shard: once the backup is promoted, every key
  // is still there, through any surviving node.
  absl::StatusOr<int> primary = cluster.PrimaryIndexOf("k0");
  ASSERT_TRUE(primary.ok()) << primary.status();
  cluster.KillNode(*primary);
  ASSERT_TRUE(
      cluster.WaitNewPrimary("k0", ClusterHarness::NodeId(*primary), absl::Seconds(20)).ok())
      << cluster.Logs();
  const int survivor = (*primary + 1) % 3;
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ(RedisCli(RespPort(cluster, survivor), {"get", absl::StrCat("k", i)}),
              absl::StrCat("v", i));
  }
  EXPECT_EQ(RedisCli(RespPort(cluster, survivor), {"set", "k0", "after"}), "OK");
  EXPECT_EQ(RedisCli(RespPort(cluster, survivor), {"get", "k0"}), "after");
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
