// Copyright 2026 The kvstore Authors.
//
// kvserver's cluster mode as an operator sees it: the §19.6 flags and their
// errors, registration in a real etcd, the start-up line, a clean stop that
// removes the member key at once, and a node whose lease is gone registering
// again (a new incarnation of the same running process) instead of exiting.

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/cluster/membership/etcd_keys.h"
#include "tests/cluster/etcd_process.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace {

using ::testing::HasSubstr;
using testing::KvServerProcess;
using testing::RunProcess;

const std::vector<std::string> kBase = {"--pool_size=16M", "--transport=tcp"};

// A cluster secret file for this test's nodes (cluster mode needs one).
std::string SecretFile() {
  static const std::string path = [] {
    std::string p = testing::TempDir() + "/kvserver_cluster_mode_test.secret";
    std::ofstream(p) << "mode-test-cluster-secret-0123456789\n";
    return p;
  }();
  return path;
}

testing::ProcessResult RunKvserver(std::vector<std::string> flags) {
  std::vector<std::string> argv = {testing::BinaryPath("server/kvserver"), "--control_port=0",
                                   "--resp_port=0"};
  argv.insert(argv.end(), kBase.begin(), kBase.end());
  argv.insert(argv.end(), flags.begin(), flags.end());
  return RunProcess(argv, "", 30);
}

TEST(KvserverClusterFlags, BadValuesStopStartUpNamingTheFlag) {
  struct Case {
    std::vector<std::string> flags;
    const char* message;
  } cases[] = {
      {{"--etcd=localhost"}, "--etcd: bad endpoint 'localhost'"},
      {{"--etcd=127.0.0.1:2379,:5"}, "--etcd: bad endpoint"},
      {{"--etcd=127.0.0.1:2379", "--node_id=n1", "--replicas=4"}, "--replicas=4"},
      {{"--etcd=127.0.0.1:2379", "--node_id=n1", "--replicas=0"}, "--replicas=0"},
      {{"--etcd=127.0.0.1:2379", "--node_id=n1", "--replicas=3", "--cluster_min_nodes=2"},
       "--cluster_min_nodes=2"},
      {{"--etcd=127.0.0.1:2379", "--node_id=n1", "--fence_margin=2s"}, "--fence_margin"},
      {{"--etcd=127.0.0.1:2379", "--node_id=n1", "--member_ttl=500ms"}, "--member_ttl"},
      {{"--etcd=127.0.0.1:2379", "--node_id=a/b"}, "--node_id"},
      {{"--replicas=3"}, "need --etcd"},
      {{"--node_id=n1"}, "need --etcd"},
  };
  for (const Case& c : cases) {
    testing::ProcessResult r = RunKvserver(c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags.back() << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.flags.back();
  }
}

TEST(KvserverClusterFlags, NeedsANodeIdWithAPickedPortAndAReachableEtcd) {
  testing::ProcessResult r = RunKvserver({"--etcd=127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--control_port=0 in cluster mode needs --node_id"));
  // Peers know each other by the cluster secret alone: no start without it.
  r = RunKvserver({"--etcd=127.0.0.1:1", "--node_id=n1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cluster mode needs --cluster_secret_file"));
  r = RunKvserver({"--etcd=127.0.0.1:1", "--node_id=n1", "--cluster_secret_file=" + SecretFile()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--etcd=127.0.0.1:1"));
}

// The node's log once it holds `text`, or after a generous minute without
// it. A line logged after an etcd write may trail what a test saw in etcd,
// so a check of such a line waits for it rather than reading at once.
std::string EventuallyLog(const KvServerProcess& node, const std::string& text) {
  for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
    std::string log = node.Log();
    if (log.find(text) != std::string::npos) return log;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return node.Log();
}

class KvserverClusterMode : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status started = etcd_.Start();
    ASSERT_TRUE(started.ok()) << started;
    server::etcd::EtcdOptions eo;
    eo.endpoints = {etcd_.endpoint()};
    auto client = server::etcd::EtcdClient::Connect(eo);
    // A loaded machine sometimes misses the first handshake.
    for (int i = 0; i < 5 && !client.ok(); ++i) client = server::etcd::EtcdClient::Connect(eo);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  absl::StatusOr<KvServerProcess> StartNode(const std::string& id,
                                            const std::vector<std::string>& more = {}) {
    std::vector<std::string> flags = kBase;
    flags.insert(flags.end(), more.begin(), more.end());
    flags.insert(flags.end(), {"--etcd=" + etcd_.endpoint(), "--node_id=" + id,
                               "--cluster_name=modetest", "--member_ttl=1s", "--fence_margin=300ms",
                               "--cluster_secret_file=" + SecretFile()});
    return KvServerProcess::Start(flags);
  }

  std::optional<server::etcd::KeyValue> Member(const std::string& id) {
    auto kv = client_->Get(server::etcd_keys::MemberKey("modetest", id));
    EXPECT_TRUE(kv.ok()) << kv.status();
    return kv.ok() ? *kv : std::nullopt;
  }

  testing::EtcdProcess etcd_;
  std::unique_ptr<server::etcd::EtcdClient> client_;
};

TEST_F(KvserverClusterMode, RegistersAndLeavesAtOnceOnSigterm) {
  auto node = StartNode("n1");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_THAT(node->Log(), ::testing::Not(HasSubstr("single-node")));
  EXPECT_THAT(node->Log(), HasSubstr("cluster modetest node n1 incarnation"));
  EXPECT_THAT(node->Log(), HasSubstr(absl::StrCat("etcd ", etcd_.endpoint())));
  auto kv = Member("n1");
  ASSERT_TRUE(kv.has_value());
  auto self = server::etcd_keys::DecodeNode(kv->value);
  ASSERT_TRUE(self.ok()) << self.status();
  EXPECT_EQ(self->control_address(), absl::StrCat("127.0.0.1:", node->control_port()));
  EXPECT_EQ(self->resp_address(), absl::StrCat("127.0.0.1:", node->resp_port()));
  EXPECT_EQ(self->incarnation(), static_cast<uint64_t>(kv->lease));

  // Alive well past the TTL: the keepalive runs in the real process.
  absl::SleepFor(absl::Seconds(3));
  EXPECT_TRUE(Member("n1").has_value());

  EXPECT_EQ(node->Stop(), 0);
  EXPECT_FALSE(Member("n1").has_value()) << "the lease was not revoked on SIGTERM";
}

// The controller inside kvserver: once --cluster_min_nodes members are
// registered, one of them writes the first map and every node applies it.
TEST_F(KvserverClusterMode, TwoNodesGetAFirstMapAndApplyIt) {
  auto n1 = StartNode("n1", {"--replicas=1", "--cluster_min_nodes=2"});
  ASSERT_TRUE(n1.ok()) << n1.status();
  auto n2 = StartNode("n2", {"--replicas=1", "--cluster_min_nodes=2"});
  ASSERT_TRUE(n2.ok()) << n2.status();
  std::optional<server::etcd::KeyValue> map;
  const absl::Time end = absl::Now() + absl::Seconds(10);
  auto applied = [&](const std::string& id, uint64_t epoch) {
    auto kv = Member(id);
    if (!kv.has_value()) return false;
    auto node = server::etcd_keys::DecodeNode(kv->value);
    return node.ok() && node->applied_map_epoch() == epoch;
  };
  uint64_t epoch = 0;
  while (absl::Now() < end) {
    auto kv = client_->Get(server::etcd_keys::MapKey("modetest"));
    if (kv.ok() && kv->has_value()) {
      auto m = server::etcd_keys::DecodeMap((*kv)->value);
      ASSERT_TRUE(m.ok()) << m.status();
      epoch = m->epoch();
      EXPECT_EQ(m->shards_size(), 2);
      EXPECT_EQ(m->nodes_size(), 2);
      if (applied("n1", epoch) && applied("n2", epoch)) break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_GT(epoch, 0u) << "no map was written\n" << n1->Log() << n2->Log();
  EXPECT_TRUE(applied("n1", epoch)) << n1->Log();
  EXPECT_TRUE(applied("n2", epoch)) << n2->Log();
  EXPECT_THAT(EventuallyLog(*n1, "installed cluster map epoch"),
              HasSubstr("installed cluster map epoch"));
  EXPECT_EQ(n1->Stop(), 0);
  EXPECT_EQ(n2->Stop(), 0);
}

TEST_F(KvserverClusterMode, RegistersAgainWhenItsLeaseIsGone) {
  auto node = StartNode("n2");
  ASSERT_TRUE(node.ok()) << node.status();
  auto kv = Member("n2");
  ASSERT_TRUE(kv.has_value());
  ASSERT_TRUE(client_->RevokeLease(kv->lease).ok());
  // A new member key under another lease, written by the same process
  // (it never exits).
  std::optional<server::etcd::KeyValue> again;
  for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
    again = Member("n2");
    if (again.has_value() && again->lease != kv->lease) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(again.has_value() && again->lease != kv->lease) << node->Log();
  EXPECT_EQ(node->WaitExit(absl::ZeroDuration()), std::nullopt) << node->Log();
  // The node logs the new incarnation after etcd took the key.
  EXPECT_THAT(EventuallyLog(*node, "registered again as incarnation"),
              HasSubstr("registered again as incarnation"));
  auto before = server::etcd_keys::DecodeNode(kv->value);
  auto after = server::etcd_keys::DecodeNode(again->value);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_FALSE(after->process_id().empty());
  EXPECT_EQ(after->process_id(), before->process_id());
  EXPECT_EQ(node->Stop(), 0);
}

}  // namespace
}  // namespace kvstore
