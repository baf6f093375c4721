// Copyright 2026 The kvstore Authors.
//
// Membership on an in-memory etcd (FakeEtcd) and a ManualClock:
// registration, keepalive, fencing when etcd is gone or frozen, unfencing
// when it answers again, a lost lease, the map watch and a clean shutdown.
// TTLs are 1s (the fake, like etcd, raises the lease to its 2s minimum; the
// node still fences 1s - margin after its last renewal). Time passes only
// in Pass(), in steps, each step waiting until the membership threads it
// woke are done (ManualClock::Settled()), so every keepalive and the
// watchdog fire at their moment whatever the load on the machine.

#include "server/cluster/membership/membership.h"

#include <atomic>
#include <memory>
#include <string>

#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd/fake_etcd_client.h"
#include "server/cluster/membership/etcd_keys.h"
#include "server/storage/manual_clock.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::testing::Eventually;

constexpr char kCluster[] = "membertest";
// Time passes in steps this long: well under the keepalive period (333 ms)
// and the slack between a renewal and the watchdog's deadline (367 ms).
constexpr absl::Duration kStep = absl::Milliseconds(50);

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
  MembershipTest()
      : etcd_(etcd::FakeEtcdOptions{"fake-etcd", &clock_}),
        client_(etcd_.NewClient("n1")),
        admin_(etcd_.NewClient("test")) {}

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
    o.clock = &clock_;
    auto m = Membership::Start(client_.get(), &state_, &fence_, o);
    ASSERT_TRUE(m.ok()) << m.status();
    member_ = *std::move(m);
    // Keepalive, watchdog and map thread all wait on the clock.
    ASSERT_TRUE(Eventually([this] { return clock_.Waiters() == 3 && clock_.Settled(); }));
  }

  // Lets `d` pass in steps of kStep; etcd's lessor runs after each.
  void Pass(absl::Duration d) {
    for (absl::Duration passed; passed < d; passed += kStep) Step();
  }
  void Step() {
    clock_.Advance(kStep);
    etcd_.ExpireDueLeases();
    ASSERT_TRUE(Eventually([this] { return clock_.Settled(); }));
  }
  // Lets time pass until `cond` holds, for at most `limit`; then waits for
  // it (a watch delivers on its own thread, not by the clock).
  template <typename Cond>
  ::testing::AssertionResult PassUntil(Cond cond, absl::Duration limit) {
    for (absl::Duration passed; passed < limit && !cond(); passed += kStep) Step();
    return Eventually(cond);
  }

  std::optional<v1::ClusterNode> MemberKey() {
    auto kv = admin_->Get(etcd_keys::MemberKey(kCluster, "n1"));
    EXPECT_TRUE(kv.ok()) << kv.status();
    if (!kv.ok() || !kv->has_value()) return std::nullopt;
    EXPECT_EQ((*kv)->lease, member_->lease());
    auto node = etcd_keys::DecodeNode((*kv)->value);
    EXPECT_TRUE(node.ok()) << node.status();
    return node.ok() ? std::optional<v1::ClusterNode>(*node) : std::nullopt;
  }
  void PutMap(const v1::ClusterMap& map) {
    ASSERT_TRUE(admin_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(map)).ok());
  }

  uint64_t NowMs() { return static_cast<uint64_t>(absl::ToUnixMillis(clock_.Wall())); }

  ManualClock clock_;
  etcd::FakeEtcd etcd_;
  std::unique_ptr<etcd::EtcdClient> client_;  // the node's
  std::unique_ptr<etcd::EtcdClient> admin_;   // the test's
  ClusterState state_{"n1", &clock_};
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
  Pass(absl::Seconds(6));
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
  etcd_.SetReachable(false);
  // Not before ttl - margin (700 ms) after the last renewal (the start)...
  Pass(absl::Milliseconds(650));
  EXPECT_EQ(fences_.load(), 0);
  EXPECT_TRUE(state_.Serving());
  // ...and at it.
  Pass(absl::Milliseconds(100));
  EXPECT_EQ(fences_.load(), 1);
  EXPECT_FALSE(state_.Serving());
  EXPECT_TRUE(state_.fenced());
  EXPECT_EQ(fence_.words().valid_until_ms, 0u);
  // It stays fenced while etcd is away, and fences only once.
  Pass(absl::Milliseconds(700));
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(fences_.load(), 1);
  EXPECT_EQ(lost_.load(), 0);
}

TEST_F(MembershipTest, AFrozenEtcdFencesAndItsReturnUnfences) {
  StartMember();
  const uint64_t before = member_->renewals();
  // Nothing answers (the fake at once, a frozen etcd after rpc_timeout).
  // The lease (2s in etcd) outlives the pause; the node's deadline (0.7s
  // after its last renewal) does not.
  etcd_.SetReachable(false);
  Pass(absl::Milliseconds(750));
  const bool fenced = fences_.load() >= 1;
  const uint64_t valid_until = fence_.words().valid_until_ms;
  const bool serving = state_.Serving();
  etcd_.SetReachable(true);
  ASSERT_TRUE(fenced);
  EXPECT_EQ(valid_until, 0u);
  EXPECT_FALSE(serving);
  // etcd answers again and the lease is alive: nobody replaced this node.
  ASSERT_TRUE(PassUntil([this] { return state_.Serving(); }, absl::Seconds(1)));
  EXPECT_FALSE(state_.fenced());
  EXPECT_GT(fence_.words().valid_until_ms, NowMs());
  EXPECT_GT(member_->renewals(), before);
  EXPECT_EQ(lost_.load(), 0);
  EXPECT_TRUE(MemberKey().has_value());
}

// etcd goes down and comes back with its data: the node unfences, and its
// map thread, whose watch broke, reads and watches the map again.
TEST_F(MembershipTest, AfterAnEtcdRestartItUnfencesAndWatchesTheMapAgain) {
  StartMember();
  etcd_.SetReachable(false);
  Pass(absl::Milliseconds(750));
  ASSERT_EQ(fences_.load(), 1);
  // Same data: etcd keeps the lease (and renews every lease when it
  // becomes leader), so this node was not replaced.
  etcd_.RenewAllLeases();
  etcd_.SetReachable(true);
  ASSERT_TRUE(PassUntil([this] { return state_.Serving(); }, absl::Seconds(1)));
  EXPECT_GT(fence_.words().valid_until_ms, NowMs());
  EXPECT_EQ(lost_.load(), 0);
  // The watch broke with the old etcd; the map thread read and watched
  // again (after its retry delay), so a map written now arrives.
  PutMap(OneShardMap(2, kCluster));
  EXPECT_TRUE(PassUntil([this] { return state_.map_epoch() == 2; }, absl::Seconds(1)));
}

TEST_F(MembershipTest, AnExpiredLeaseFencesAndCallsOnLeaseLost) {
  StartMember();
  // etcd expires the lease (as when this node was cut off for longer than
  // the TTL): the next keepalive answers "not found".
  ASSERT_TRUE(etcd_.ExpireLease(member_->lease()).ok());
  ASSERT_TRUE(PassUntil([this] { return lost_.load() == 1; }, absl::Seconds(1)));
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(fence_.words().valid_until_ms, 0u);
  EXPECT_EQ(fences_.load(), 1);
  // No unfencing afterwards, whatever happens.
  Pass(absl::Seconds(2));
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(lost_.load(), 1);
}

TEST_F(MembershipTest, InstallsMapsFromEtcdAndPublishesTheAppliedEpoch) {
  // A map already there at start is installed by Start() itself.
  PutMap(OneShardMap(3, kCluster));
  StartMember();
  EXPECT_EQ(state_.map_epoch(), 3u);
  EXPECT_EQ(fence_.words().map_epoch, 3u);

  // A newer one arrives through the watch.
  PutMap(OneShardMap(5, kCluster));
  ASSERT_TRUE(Eventually([this] { return state_.map_epoch() == 5; }));
  EXPECT_EQ(fence_.words().map_epoch, 5u);
  // The member key follows with the next renewal.
  ASSERT_TRUE(PassUntil(
      [this] {
        auto n = MemberKey();
        return n.has_value() && n->applied_map_epoch() == 5;
      },
      absl::Seconds(1)));

  // Ignored: another cluster's map, an invalid map, an older epoch.
  PutMap(OneShardMap(9, "other"));
  v1::ClusterMap bad = OneShardMap(10, kCluster);
  bad.mutable_shards(0)->add_replicas("n-unknown");
  PutMap(bad);
  PutMap(OneShardMap(4, kCluster));
  PutMap(OneShardMap(6, kCluster));
  ASSERT_TRUE(Eventually([this] { return state_.map_epoch() == 6; }));
  EXPECT_EQ(fence_.words().map_epoch, 6u);
}

TEST_F(MembershipTest, CleanShutdownRemovesTheKeyAtOnce) {
  StartMember();
  ASSERT_TRUE(MemberKey().has_value());
  const auto key = etcd_keys::MemberKey(kCluster, "n1");
  member_->Shutdown();
  // No waiting for the TTL: the lease was revoked.
  auto kv = admin_->Get(key);
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_FALSE(kv->has_value());
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(fence_.words().valid_until_ms, 0u);
  EXPECT_EQ(lost_.load(), 0);
}

TEST_F(MembershipTest, StartFailsWithoutEtcd) {
  etcd_.SetReachable(false);
  MembershipOptions o;
  o.cluster_name = kCluster;
  o.self.set_node_id("n1");
  o.ttl = absl::Seconds(1);
  o.fence_margin = absl::Milliseconds(300);
  o.clock = &clock_;
  auto m = Membership::Start(client_.get(), &state_, &fence_, o);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable) << m.status();
}

}  // namespace
}  // namespace server
}  // namespace kvstore
