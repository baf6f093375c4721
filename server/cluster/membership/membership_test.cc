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
#include <thread>

#include "common/failpoint/failpoint_testing.h"
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

// Shard 0 led by `primary`, with `backup` as its in-sync backup; incarnations
// unrecorded (0).
v1::ClusterMap TwoNodeMap(uint64_t epoch, const std::string& primary, const std::string& backup) {
  v1::ClusterMap map;
  map.set_epoch(epoch);
  map.set_cluster_name(kCluster);
  map.set_replication_factor(2);
  map.add_nodes()->set_node_id("n1");
  map.add_nodes()->set_node_id("n2");
  v1::Shard* s = map.add_shards();
  s->set_shard_id(0);
  s->set_shard_epoch(epoch);
  *s->add_slots() = cluster::EvenSlotRanges(1)[0];
  s->add_replicas(primary);
  s->add_replicas(backup);
  return map;
}

class MembershipTest : public ::testing::Test {
 protected:
  MembershipTest()
      : etcd_(etcd::FakeEtcdOptions{"fake-etcd", &clock_}),
        client_(etcd_.NewClient("n1")),
        admin_(etcd_.NewClient("test")) {}

  void StartMember() {
    auto m = Membership::Start(client_.get(), &state_, &fence_, Options());
    ASSERT_TRUE(m.ok()) << m.status();
    member_ = *std::move(m);
    // Keepalive, watchdog and map thread all wait on the clock.
    ASSERT_TRUE(Eventually([this] { return clock_.Waiters() == 3 && clock_.Settled(); }));
  }

  MembershipOptions Options() {
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
    return o;
  }

  // The lease the member key is under (0: no key).
  int64_t MemberKeyLease() {
    auto kv = admin_->Get(etcd_keys::MemberKey(kCluster, "n1"));
    EXPECT_TRUE(kv.ok()) << kv.status();
    return kv.ok() && kv->has_value() ? (*kv)->lease : 0;
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

// Another caller (the controller's campaign) hears of the expiry first:
// the node fences and is told once, and its keepalive, answered "not found"
// afterwards, tells nothing more.
TEST_F(MembershipTest, AnExpiryToldByAnotherCallerEndsTheLeaseOnce) {
  StartMember();
  ASSERT_TRUE(etcd_.ExpireLease(member_->lease()).ok());
  member_->LeaseGone("the test");
  EXPECT_EQ(lost_.load(), 1);
  EXPECT_EQ(fences_.load(), 1);
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(fence_.words().valid_until_ms, 0u);
  member_->LeaseGone("the test, again");
  Pass(absl::Seconds(2));
  EXPECT_EQ(lost_.load(), 1);
  EXPECT_FALSE(state_.Serving());
}

// A keepalive etcd did not answer is sent again after the retry delay
// (200 ms), not a period (ttl/3) later: after an outage the node must hear
// of an expiry, or renew, before the controller counts it dead.
TEST_F(MembershipTest, AKeepaliveEtcdDidNotAnswerIsSentAgainSoon) {
  StartMember();
  const uint64_t before = member_->renewals();
  etcd_.SetReachable(false);
  Pass(absl::Milliseconds(350));  // the keepalive at ttl/3 (333 ms) failed
  EXPECT_EQ(member_->renewals(), before);
  etcd_.SetReachable(true);
  // Retried at about 533 ms; the next period would be at 666 ms.
  Pass(absl::Milliseconds(250));
  EXPECT_TRUE(Eventually([&] { return member_->renewals() > before; }));
  EXPECT_EQ(lost_.load(), 0);
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

// A shard this node starts to lead is held until its backups match it
// (ClusterState::HoldNewLeads; the reconciler releases it): meanwhile the
// fence page shows epoch 0, so one-sided readers refuse this node's data,
// and the map's epoch once the hold is released.
TEST_F(MembershipTest, TheFencePageShowsEpochZeroWhileANewLeadIsHeld) {
  state_.HoldNewLeads();
  PutMap(TwoNodeMap(3, "n2", "n1"));
  StartMember();
  ASSERT_EQ(state_.map_epoch(), 3u);
  EXPECT_EQ(fence_.words().map_epoch, 3u);  // a backup: nothing held
  PutMap(TwoNodeMap(4, "n1", "n2"));        // n1 leads shard 0 now
  ASSERT_TRUE(Eventually([this] { return state_.map_epoch() == 4; }));
  ASSERT_TRUE(Eventually([this] { return fence_.words().map_epoch != 3; }));
  EXPECT_EQ(fence_.words().map_epoch, 0u);
  state_.ReleaseHold(0, 4);  // reconciled on map 4
  EXPECT_EQ(fence_.words().map_epoch, 4u);
}

// The map watch stalls without an error (a half-open connection, an etcd
// member without a leader) while keepalives still succeed elsewhere, and a
// manual failover deposes this node. Its renewal must not vouch for the
// old map: within one renewal period it serves the new map (where it is a
// backup), and at no moment is its fence page extended at the old epoch.
TEST_F(MembershipTest, AStalledWatchCannotKeepADeposedPrimaryOnTheOldMap) {
  PutMap(TwoNodeMap(3, "n1", "n2"));
  StartMember();
  ASSERT_EQ(state_.map_epoch(), 3u);
  etcd_.StallWatches("n1");
  Pass(kStep);
  const uint64_t trusted_until = fence_.words().valid_until_ms;
  PutMap(TwoNodeMap(4, "n2", "n1"));  // kvctl cluster failover --shard=0
  for (absl::Duration passed; passed < absl::Milliseconds(400); passed += kStep) {
    Step();
    const fence::FenceWords w = fence_.words();
    if (w.map_epoch == 3) {
      EXPECT_LE(w.valid_until_ms, trusted_until)
          << "extended at the old map after " << absl::FormatDuration(passed + kStep);
    }
  }
  EXPECT_EQ(state_.map_epoch(), 4u);
  EXPECT_EQ(fence_.words().map_epoch, 4u);
}

// Another incarnation's lease holds the member key (a duplicate process
// with this node id): this node's lease still renews, but it is no longer
// the node the map names. It fences at its next renewal, and does not
// write its own record over the other's key.
TEST_F(MembershipTest, AMemberKeyUnderAnotherLeaseFencesAtTheNextRenewal) {
  StartMember();
  auto other = admin_->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(admin_->Put(etcd_keys::MemberKey(kCluster, "n1"), "{}", *other).ok());
  Pass(absl::Milliseconds(400));  // one renewal period and a step
  EXPECT_EQ(fences_.load(), 1);
  EXPECT_FALSE(state_.Serving());
  EXPECT_EQ(fence_.words().valid_until_ms, 0u);
  EXPECT_EQ(MemberKeyLease(), *other);
  EXPECT_EQ(lost_.load(), 0);
}

// A restart within the TTL finds the earlier incarnation's key. That
// process may still be alive, so the new one waits for the key to go (the
// lease to expire) instead of overwriting it.
TEST_F(MembershipTest, RegisterWaitsForAnEarlierIncarnationsKeyToGo) {
  auto earlier = admin_->GrantLease(absl::Seconds(1));  // the fake's minimum: 2s
  ASSERT_TRUE(earlier.ok()) << earlier.status();
  ASSERT_TRUE(admin_->Put(etcd_keys::MemberKey(kCluster, "n1"), "{}", *earlier).ok());
  std::atomic<bool> started{false};
  absl::StatusOr<std::unique_ptr<Membership>> m;
  std::thread starter([&] {
    m = Membership::Start(client_.get(), &state_, &fence_, Options());
    started = true;
  });
  // Registered (over the key) or waiting on the clock for the key to go.
  ASSERT_TRUE(Eventually([&] { return started.load() || clock_.Waiters() > 0; }));
  Pass(absl::Seconds(1));
  EXPECT_EQ(MemberKeyLease(), *earlier);
  EXPECT_FALSE(started.load());
  EXPECT_TRUE(PassUntil([&] { return started.load(); }, absl::Seconds(3)));
  starter.join();
  ASSERT_TRUE(m.ok()) << m.status();
  member_ = *std::move(m);
  EXPECT_EQ(MemberKeyLease(), member_->lease());
  EXPECT_TRUE(state_.Serving());
}

TEST_F(MembershipTest, RegisterFailsWhileAnotherLiveIncarnationHoldsTheKey) {
  auto other = admin_->GrantLease(absl::Seconds(1));
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(admin_->Put(etcd_keys::MemberKey(kCluster, "n1"), "{}", *other).ok());
  std::atomic<bool> started{false};
  absl::StatusOr<std::unique_ptr<Membership>> m;
  std::thread starter([&] {
    m = Membership::Start(client_.get(), &state_, &fence_, Options());
    started = true;
  });
  ASSERT_TRUE(Eventually([&] { return started.load() || clock_.Waiters() > 0; }));
  // The other process keeps renewing.
  for (absl::Duration passed; passed < absl::Seconds(4) && !started.load(); passed += kStep) {
    ASSERT_TRUE(admin_->KeepAliveOnce(*other).ok());
    Step();
  }
  ASSERT_TRUE(Eventually([&] { return started.load(); }));
  starter.join();
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition) << m.status();
  EXPECT_EQ(MemberKeyLease(), *other);
}

// A watch that goes silent is replaced within a third of the TTL (it asks
// for progress notices, and none come), and the map written meanwhile is
// read. Renewals are cut here, so only the map thread can bring the map.
TEST_F(MembershipTest, ASilentWatchIsReplacedWithinAThirdOfTheTtl) {
  StartMember();
  failpoint::ScopedFailpoint cut("membership/before-keepalive",
                                 failpoint::ReturnError(absl::UnavailableError("cut")));
  etcd_.StallWatches("n1");
  PutMap(OneShardMap(2, kCluster));
  EXPECT_TRUE(PassUntil([this] { return state_.map_epoch() == 2; }, absl::Milliseconds(400)));
}

// The etcd client moved to another endpoint: the watch, still on the old
// one, is replaced at the next progress check (a sixth of the TTL), before
// it could be found silent.
TEST_F(MembershipTest, AWatchFollowsTheClientToAnotherEndpoint) {
  StartMember();
  failpoint::ScopedFailpoint cut("membership/before-keepalive",
                                 failpoint::ReturnError(absl::UnavailableError("cut")));
  etcd_.ChangeEndpoint("n1");
  PutMap(OneShardMap(2, kCluster));
  EXPECT_TRUE(PassUntil([this] { return state_.map_epoch() == 2; }, absl::Milliseconds(250)));
}

// The fence page speaks wall time, but a step of this host's wall clock
// forward must not lengthen the window readers trust: valid_until moves
// with the steady clock only.
TEST_F(MembershipTest, AWallClockStepForwardDoesNotExtendValidUntil) {
  StartMember();
  const uint64_t before = fence_.words().valid_until_ms;
  const absl::Duration start = clock_.Steady();
  clock_.StepWall(absl::Hours(1));
  const uint64_t renewals = member_->renewals();
  ASSERT_TRUE(PassUntil([&] { return member_->renewals() > renewals; }, absl::Seconds(1)));
  const uint64_t after = fence_.words().valid_until_ms;
  EXPECT_GT(after, before);
  EXPECT_LE(after, before + absl::ToInt64Milliseconds(clock_.Steady() - start));
  EXPECT_TRUE(state_.Serving());
}

// A step back is followed at once: readers trust less, never more.
TEST_F(MembershipTest, AWallClockStepBackShortensValidUntil) {
  StartMember();
  const uint64_t before = fence_.words().valid_until_ms;
  clock_.StepWall(-absl::Seconds(10));
  const uint64_t renewals = member_->renewals();
  ASSERT_TRUE(PassUntil([&] { return member_->renewals() > renewals; }, absl::Seconds(1)));
  EXPECT_LT(fence_.words().valid_until_ms, before);
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
