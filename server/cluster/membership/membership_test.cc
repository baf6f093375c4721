// Copyright 2026 The kvstore Authors.
//
// Membership against a real etcd process (tests/cluster/etcd_process.h):
// registration, keepalive, fencing when etcd is gone or frozen, unfencing
// when it answers again, a lost lease, the map watch and a clean shutdown.
// TTLs are 1s (etcd raises a lease to its 2s minimum; the node still fences
// 1s - margin after its last renewal), so each test takes seconds.

#include "server/cluster/membership/membership.h"

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd_keys.h"
#include "tests/cluster/etcd_process.h"

namespace kvstore {
namespace server {
namespace {

constexpr char kCluster[] = "membertest";

// Polls `cond` every 10ms for up to `limit`.
template <typename Cond>
bool WaitFor(Cond cond, absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  while (absl::Now() < end) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return cond();
}

v1::ClusterMap OneShardMap(uint64_t epoch, const std::string& cluster) {
  v1::ClusterMap map;
  map.set_epoch(epoch);
  map.set_cluster_name(cluster);
  map.set_replication_factor(1);
  map.add_nodes()->set_node_id("n1");
  v1::Shard* s = map.add_shards();
  s->set_shard_id(0);
  s->set_shard_epoch(1);
  *s->add_slots() = cluster::EvenSlotRanges(1)[0];
  s->add_replicas("n1");
  return map;
}

class MembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status started = etcd_.Start();
    ASSERT_TRUE(started.ok()) << started;
    etcd::EtcdOptions eo;
    eo.endpoints = {etcd_.endpoint()};
    // The default rpc_timeout (2s), as ClusterNode uses: with deadlines of
    // a few hundred ms gRPC did not reconnect to a restarted etcd.
    auto client = etcd::EtcdClient::Connect(eo);
    // A loaded machine sometimes misses the first handshake.
    for (int i = 0; i < 5 && !client.ok(); ++i) client = etcd::EtcdClient::Connect(eo);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  void StartMember() {
    MembershipOptions o;
    o.cluster_name = kCluster;
    o.self.set_node_id("n1");
    o.self.set_control_address("127.0.0.1:7301");
    o.self.set_resp_address("127.0.0.1:6381");
    o.ttl = absl::Seconds(1);
    o.fence_margin = absl::Milliseconds(300);
    o.on_fence = [this] { ++fences_; };
    o.on_lease_lost = [this] { ++lost_; };
    auto m = Membership::Start(client_.get(), &state_, &fence_, o);
    ASSERT_TRUE(m.ok()) << m.status();
    member_ = *std::move(m);
  }

  std::optional<v1::ClusterNode> MemberKey() {
    auto kv = client_->Get(etcd_keys::MemberKey(kCluster, "n1"));
    EXPECT_TRUE(kv.ok()) << kv.status();
    if (!kv.ok() || !kv->has_value()) return std::nullopt;
    EXPECT_EQ((*kv)->lease, member_->lease());
    auto node = etcd_keys::DecodeNode((*kv)->value);
    EXPECT_TRUE(node.ok()) << node.status();
    return node.ok() ? std::optional<v1::ClusterNode>(*node) : std::nullopt;
  }

  uint64_t NowMs() { return static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())); }

  testing::EtcdProcess etcd_;
  std::unique_ptr<etcd::EtcdClient> client_;
  ClusterState state_{"n1"};
  FencePage fence_;
  std::unique_ptr<Membership> member_;
  std::atomic<int> fences_{0};
  std::atomic<int> lost_{0};
};

TEST_F(MembershipTest, RegistersUnderItsLeaseAndKeepsTheKeyAlive) {
  StartMember();
  auto node = MemberKey();
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->node_id(), "n1");
  EXPECT_EQ(node->incarnation(), static_cast<uint64_t>(member_->lease()));
  EXPECT_EQ(node->control_address(), "127.0.0.1:7301");
  EXPECT_EQ(node->resp_address(), "127.0.0.1:6381");
  EXPECT_TRUE(state_.Serving());
  // The page says "trust me until about now + ttl - margin", never longer.
  const uint64_t until = fence_.words().valid_until_ms;
  EXPECT_GT(until, NowMs());
  EXPECT_LE(until, NowMs() + 1000);

  // Three etcd TTLs later the key is still there: the keepalive works.
  absl::SleepFor(absl::Seconds(4));
  EXPECT_TRUE(MemberKey().has_value());
  EXPECT_TRUE(state_.Serving());
  EXPECT_GE(member_->renewals(), 6u);
  EXPECT_GT(fence_.words().valid_until_ms, NowMs());
  EXPECT_EQ(fences_.load(), 0);
  EXPECT_EQ(lost_.load(), 0);
}

TEST_F(MembershipTest, FencesWhenEtcdIsGone) {
  StartMember();
  ASSERT_TRUE(state_.Serving());
  etcd_.Kill();
  // Fenced within ttl - margin of the last renewal (plus scheduling).
  ASSERT_TRUE(WaitFor([this] { return fences_.load() == 1; }, absl::Seconds(2)));
  EXPECT_FALSE(state_.Serving());
  EXPECT_TRUE(state_.fenced());
  EXPECT_EQ(fence_.words().valid_until_ms, 0u);
  // It stays fenced while etcd is away, and fences only once.
  absl::SleepFor(absl::Milliseconds(700));
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(fences_.load(), 1);
  EXPECT_EQ(lost_.load(), 0);
}

TEST_F(MembershipTest, AFrozenEtcdFencesAndItsReturnUnfences) {
  StartMember();
  const uint64_t before = member_->renewals();
  etcd_.Pause();
  // The lease (2s in etcd) outlives the pause; the node's deadline (0.7s
  // after its last renewal) does not.
  const bool fenced = WaitFor([this] { return fences_.load() >= 1; }, absl::Milliseconds(1100));
  const uint64_t valid_until = fence_.words().valid_until_ms;
  const bool serving = state_.Serving();
  etcd_.Resume();
  ASSERT_TRUE(fenced);
  EXPECT_EQ(valid_until, 0u);
  EXPECT_FALSE(serving);
  // etcd answers again and the lease is alive: nobody replaced this node.
  ASSERT_TRUE(WaitFor([this] { return state_.Serving(); }, absl::Seconds(2)));
  EXPECT_FALSE(state_.fenced());
  EXPECT_GT(fence_.words().valid_until_ms, NowMs());
  EXPECT_GT(member_->renewals(), before);
  EXPECT_EQ(lost_.load(), 0);
  EXPECT_TRUE(MemberKey().has_value());
}

// Membership keeps calling etcd during the outage; the client must still
// reach the restarted etcd (EtcdClientTest.CallsDuring*StillRecover*).
TEST_F(MembershipTest, AfterAnEtcdRestartItUnfencesAndWatchesTheMapAgain) {
  StartMember();
  etcd_.Kill();
  ASSERT_TRUE(WaitFor([this] { return fences_.load() == 1; }, absl::Seconds(2)));
  // Same data, same ports: etcd keeps the lease (and renews every lease
  // when it becomes leader), so this node was not replaced.
  absl::Status restarted = etcd_.Start();
  ASSERT_TRUE(restarted.ok()) << restarted;
  ASSERT_TRUE(WaitFor([this] { return state_.Serving(); }, absl::Seconds(5)));
  EXPECT_GT(fence_.words().valid_until_ms, NowMs());
  EXPECT_EQ(lost_.load(), 0);
  // The watch broke with the old etcd; the map thread read and watched
  // again, so a map written now arrives.
  ASSERT_TRUE(
      client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(OneShardMap(2, kCluster)))
          .ok());
  EXPECT_TRUE(WaitFor([this] { return state_.map_epoch() == 2; }, absl::Seconds(3)));
}

TEST_F(MembershipTest, AnExpiredLeaseFencesAndCallsOnLeaseLost) {
  StartMember();
  // etcd forgets the lease (as when it expired while this node was cut
  // off): the next keepalive answers "not found".
  ASSERT_TRUE(client_->RevokeLease(member_->lease()).ok());
  ASSERT_TRUE(WaitFor([this] { return lost_.load() == 1; }, absl::Seconds(2)));
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(fence_.words().valid_until_ms, 0u);
  EXPECT_EQ(fences_.load(), 1);
  // No unfencing afterwards, whatever happens.
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(lost_.load(), 1);
}

TEST_F(MembershipTest, InstallsMapsFromEtcdAndPublishesTheAppliedEpoch) {
  // A map already there at start is installed by Start() itself.
  ASSERT_TRUE(
      client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(OneShardMap(3, kCluster)))
          .ok());
  StartMember();
  EXPECT_EQ(state_.map_epoch(), 3u);
  EXPECT_EQ(fence_.words().map_epoch, 3u);

  // A newer one arrives through the watch.
  ASSERT_TRUE(
      client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(OneShardMap(5, kCluster)))
          .ok());
  ASSERT_TRUE(WaitFor([this] { return state_.map_epoch() == 5; }, absl::Seconds(2)));
  EXPECT_EQ(fence_.words().map_epoch, 5u);
  // The member key follows with the next renewal.
  ASSERT_TRUE(WaitFor(
      [this] {
        auto n = MemberKey();
        return n.has_value() && n->applied_map_epoch() == 5;
      },
      absl::Seconds(2)));

  // Ignored: another cluster's map, an invalid map, an older epoch.
  ASSERT_TRUE(
      client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(OneShardMap(9, "other")))
          .ok());
  v1::ClusterMap bad = OneShardMap(10, kCluster);
  bad.mutable_shards(0)->add_replicas("n-unknown");
  ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(bad)).ok());
  ASSERT_TRUE(
      client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(OneShardMap(4, kCluster)))
          .ok());
  ASSERT_TRUE(
      client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(OneShardMap(6, kCluster)))
          .ok());
  ASSERT_TRUE(WaitFor([this] { return state_.map_epoch() == 6; }, absl::Seconds(2)));
  EXPECT_EQ(fence_.words().map_epoch, 6u);
}

TEST_F(MembershipTest, CleanShutdownRemovesTheKeyAtOnce) {
  StartMember();
  ASSERT_TRUE(MemberKey().has_value());
  const auto key = etcd_keys::MemberKey(kCluster, "n1");
  member_->Shutdown();
  // No waiting for the TTL: the lease was revoked.
  auto kv = client_->Get(key);
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_FALSE(kv->has_value());
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(fence_.words().valid_until_ms, 0u);
  EXPECT_EQ(lost_.load(), 0);
}

TEST_F(MembershipTest, StartFailsWithoutEtcd) {
  etcd_.Kill();
  MembershipOptions o;
  o.cluster_name = kCluster;
  o.self.set_node_id("n1");
  o.ttl = absl::Seconds(1);
  o.fence_margin = absl::Milliseconds(300);
  auto m = Membership::Start(client_.get(), &state_, &fence_, o);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable) << m.status();
}

}  // namespace
}  // namespace server
}  // namespace kvstore
