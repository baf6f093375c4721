// Copyright 2026 The kvstore Authors.
//
// The controller on an in-memory etcd (FakeEtcd) and a ManualClock. Nodes
// are simulated by member keys the test writes under leases of its own
// (membership is membership.h's job); revoking a lease is a node dying, and
// a lease runs out only when the test advances the clock past its TTL.
// Controllers started with Start() are driven by their watches alone (the
// poll interval is on the clock, which stands still unless a test moves
// it). The applied-seq question is answered by a table, except in the last
// tests, where MakeGrpcAppliedSeqFn talks to small in-test KvCluster
// services.

#include "server/cluster/controller/controller.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth/token.h"
#include "common/cluster/cluster_map.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/cluster/membership/etcd/fake_etcd_client.h"
#include "server/cluster/membership/etcd_keys.h"
#include "server/storage/manual_clock.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::testing::Eventually;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kCluster[] = "ctltest";

std::vector<std::string> Replicas(const v1::ClusterMap& map, uint32_t shard) {
  return {map.shards(shard).replicas().begin(), map.shards(shard).replicas().end()};
}
std::vector<std::string> Syncing(const v1::ClusterMap& map, uint32_t shard) {
  return {map.shards(shard).syncing().begin(), map.shards(shard).syncing().end()};
}

// Applied seqs from a table; a missing entry is an unreachable node.
class FakeSeqs {
 public:
  void Set(const std::string& node, uint32_t shard, uint64_t seq) {
    absl::MutexLock lock(&mu_);
    seqs_[{node, shard}] = seq;
  }
  AppliedSeqFn Fn() {
    return [this](const v1::ClusterNode& node, uint32_t shard) -> absl::StatusOr<uint64_t> {
      absl::MutexLock lock(&mu_);
      auto it = seqs_.find({node.node_id(), shard});
      if (it == seqs_.end()) return absl::UnavailableError("unreachable");
      return it->second;
    };
  }

 private:
  absl::Mutex mu_;
  std::map<std::pair<std::string, uint32_t>, uint64_t> seqs_ ABSL_GUARDED_BY(mu_);
};

class ControllerTest : public ::testing::Test {
 protected:
  ControllerTest()
      : fake_(etcd::FakeEtcdOptions{"fake-etcd", &clock_}), etcd_(fake_.NewClient("test")) {}

  // A node comes up: a lease and its member key. Returns the incarnation.
  int64_t Register(const std::string& id, const std::string& control_address = "") {
    absl::StatusOr<int64_t> lease = etcd_->GrantLease(absl::Seconds(10));
    EXPECT_TRUE(lease.ok()) << lease.status();
    v1::ClusterNode node;
    node.set_node_id(id);
    node.set_incarnation(static_cast<uint64_t>(*lease));
    node.set_control_address(control_address.empty() ? absl::StrCat(id, ":7000") : control_address);
    node.set_resp_address(absl::StrCat(id, ":6379"));
    EXPECT_TRUE(
        etcd_->Put(etcd_keys::MemberKey(kCluster, id), etcd_keys::EncodeNode(node), *lease).ok());
    leases_[id] = *lease;
    return *lease;
  }
  // A node dies: etcd deletes its key with its lease.
  void Kill(const std::string& id) { ASSERT_TRUE(etcd_->RevokeLease(leases_.at(id)).ok()); }

  std::unique_ptr<Controller> MakeController(const std::string& id, uint32_t replicas,
                                             uint32_t min_nodes, AppliedSeqFn fn,
                                             absl::Duration poll = absl::Milliseconds(200),
                                             absl::Duration lease_ttl = absl::Seconds(10)) {
    absl::StatusOr<int64_t> lease = etcd_->GrantLease(lease_ttl);
    EXPECT_TRUE(lease.ok()) << lease.status();
    controller_leases_[id] = *lease;
    ControllerOptions options;
    options.cluster_name = kCluster;
    options.node_id = id;
    options.lease = *lease;
    options.replicas = replicas;
    options.min_nodes = min_nodes;
    options.poll_interval = poll;
    options.map_epoch = [this](const v1::ClusterNode& node) -> absl::StatusOr<uint64_t> {
      absl::MutexLock lock(&epochs_mu_);
      auto it = applied_epochs_.find(node.node_id());
      if (it == applied_epochs_.end()) return absl::UnavailableError("unreachable");
      return it->second;
    };
    options.demote_confirm_timeout = absl::Milliseconds(600);
    options.member_ttl = member_ttl_;
    options.clock = &clock_;
    options.on_lease_gone = on_lease_gone_;
    // Each controller is a node of its own, with its own client.
    clients_.push_back(fake_.NewClient(id));
    return std::make_unique<Controller>(clients_.back().get(), options, std::move(fn));
  }
  // What the map_epoch fn of MakeController's controllers answers for `id`.
  void SetAppliedEpoch(const std::string& id, uint64_t epoch) {
    absl::MutexLock lock(&epochs_mu_);
    applied_epochs_[id] = epoch;
  }

  std::optional<etcd::KeyValue> MapKv() {
    auto kv = etcd_->Get(etcd_keys::MapKey(kCluster));
    EXPECT_TRUE(kv.ok()) << kv.status();
    return kv.ok() ? *kv : std::nullopt;
  }
  v1::ClusterMap ReadMap() {
    std::optional<etcd::KeyValue> kv = MapKv();
    if (!kv.has_value()) return v1::ClusterMap();
    auto map = etcd_keys::DecodeMap(kv->value);
    EXPECT_TRUE(map.ok()) << map.status();
    EXPECT_TRUE(cluster::ClusterMapView::Build(*map).ok());
    return *map;
  }
  std::string ControllerKeyValue() {
    auto kv = etcd_->Get(etcd_keys::ControllerKey(kCluster));
    return kv.ok() && kv->has_value() ? (*kv)->value : "";
  }

  // Runs `fn` on this thread while another lets time pass, a step at a
  // time, whenever every thread waiting on the clock is settled in its wait
  // (a call blocked in a timed wait, such as RemoveNode() waiting for a
  // confirmation, then sees its deadline come). Only for tests without a
  // Start()ed controller, whose poll would also be moved.
  template <typename F>
  auto WhileTimePasses(F fn) {
    std::atomic<bool> done{false};
    std::thread advancer([&] {
      while (
          Eventually([&] { return done.load() || (clock_.Waiters() > 0 && clock_.Settled()); })) {
        if (done.load()) return;
        clock_.Advance(absl::Milliseconds(50));
      }
    });
    auto result = fn();
    done = true;
    advancer.join();
    return result;
  }

  ManualClock clock_;
  // Given to every controller MakeController makes from then on.
  std::function<void()> on_lease_gone_;
  // Zero: a departed node counts as dead at once, so that the tests of
  // planning need not wait; the wait itself has tests of its own.
  absl::Duration member_ttl_ = absl::ZeroDuration();
  etcd::FakeEtcd fake_;
  std::unique_ptr<etcd::EtcdClient> etcd_;                  // the test's own
  std::vector<std::unique_ptr<etcd::EtcdClient>> clients_;  // the controllers'

  std::map<std::string, int64_t> leases_;
  std::map<std::string, int64_t> controller_leases_;
  FakeSeqs seqs_;
  absl::Mutex epochs_mu_;
  std::map<std::string, uint64_t> applied_epochs_ ABSL_GUARDED_BY(epochs_mu_);
};

TEST_F(ControllerTest, OneWinsElectionLoserTakesOverWhenWinnerLeaseGoes) {
  auto a = MakeController("ctl-a", 2, 99, seqs_.Fn());
  auto b = MakeController("ctl-b", 2, 99, seqs_.Fn());
  a->Start();
  b->Start();
  ASSERT_TRUE(Eventually([&] { return a->IsLeader() || b->IsLeader(); }));
  // Both have looked at the key (the loser lost its campaign): exactly one
  // believes it leads.
  const std::string winner_id = ControllerKeyValue();
  ASSERT_TRUE(winner_id == "ctl-a" || winner_id == "ctl-b") << winner_id;
  ASSERT_TRUE(
      Eventually([&] { return a->ControllerId() == winner_id && b->ControllerId() == winner_id; }));
  ASSERT_NE(a->IsLeader(), b->IsLeader());
  Controller* winner = a->IsLeader() ? a.get() : b.get();
  Controller* loser = a->IsLeader() ? b.get() : a.get();
  EXPECT_EQ(winner_id, a->IsLeader() ? "ctl-a" : "ctl-b");
  const std::string loser_id = a->IsLeader() ? "ctl-b" : "ctl-a";

  // The winner's node dies: etcd drops its key, the loser campaigns.
  ASSERT_TRUE(etcd_->RevokeLease(controller_leases_[winner_id]).ok());
  ASSERT_TRUE(Eventually([&] { return loser->IsLeader(); }));
  EXPECT_EQ(ControllerKeyValue(), loser_id);
  EXPECT_TRUE(Eventually([&] { return !winner->IsLeader(); }));

  // Resigning deletes the key at once (not after a TTL).
  loser->Stop();
  EXPECT_EQ(ControllerKeyValue(), "");
}

TEST_F(ControllerTest, LoserTakesOverWithinTheTtlWhenWinnerLeaseExpires) {
  // The first controller's node stops keeping its 2 s lease alive (it hung
  // or lost etcd): etcd expires it, and the second controller takes over.
  auto first =
      MakeController("ctl-a", 2, 99, seqs_.Fn(), absl::Milliseconds(200), absl::Seconds(2));
  ASSERT_TRUE(first->RunOnce().ok());
  ASSERT_TRUE(first->IsLeader());
  auto second = MakeController("ctl-b", 2, 99, seqs_.Fn());
  second->Start();
  ASSERT_TRUE(Eventually([&] { return second->ControllerId() == "ctl-a"; }));
  // Just short of the TTL the key is still ctl-a's...
  clock_.Advance(absl::Seconds(2) - absl::Milliseconds(1));
  EXPECT_EQ(fake_.ExpireDueLeases(), 0);
  EXPECT_FALSE(second->IsLeader());
  EXPECT_EQ(ControllerKeyValue(), "ctl-a");
  // ...and at the TTL etcd expires the lease: the watch wakes ctl-b. The
  // fake, like etcd's lessor, also expires due leases on any request, so
  // ctl-b's own loop may have ended it first: at most one is left to end.
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_LE(fake_.ExpireDueLeases(), 1);
  EXPECT_EQ(fake_.ExpireDueLeases(), 0);
  ASSERT_TRUE(Eventually([&] { return second->IsLeader(); }));
  EXPECT_EQ(ControllerKeyValue(), "ctl-b");
}

// After an etcd outage every lease is gone, and the controller's campaign
// may be the first call of its node that etcd answers: the node must hear
// of the expiry from it (its keepalive may still be stuck on a member that
// is down; the controller counts the node dead one TTL after its key went).
TEST_F(ControllerTest, ACampaignUnderAnExpiredLeaseTellsItsNode) {
  std::atomic<int> gone{0};
  on_lease_gone_ = [&gone] { ++gone; };
  auto alive = MakeController("ctl-a", 2, 99, seqs_.Fn());
  auto expired = MakeController("ctl-b", 2, 99, seqs_.Fn());
  ASSERT_TRUE(etcd_->RevokeLease(controller_leases_["ctl-b"]).ok());
  expired->Start();
  ASSERT_TRUE(Eventually([&] { return gone.load() > 0; }));
  EXPECT_FALSE(expired->IsLeader());
  // A campaign under a live lease wins and tells nothing.
  gone = 0;
  expired->Stop();
  ASSERT_TRUE(alive->RunOnce().ok());
  EXPECT_TRUE(alive->IsLeader());
  EXPECT_EQ(gone.load(), 0);
}

TEST_F(ControllerTest, FirstMapWaitsForMinNodesAndHasTheExpectedShape) {
  auto ctl = MakeController("ctl", /*replicas=*/2, /*min_nodes=*/3, seqs_.Fn());
  Register("n0");
  Register("n1");
  ASSERT_TRUE(ctl->RunOnce().ok());
  EXPECT_TRUE(ctl->IsLeader());
  EXPECT_FALSE(MapKv().has_value());  // 2 of 3

  Register("n2");
  ASSERT_TRUE(ctl->RunOnce().ok());
  v1::ClusterMap map = ReadMap();
  EXPECT_EQ(map.epoch(), 1u);
  EXPECT_EQ(map.controller(), "ctl");
  EXPECT_EQ(map.cluster_name(), kCluster);
  EXPECT_EQ(map.replication_factor(), 2u);
  ASSERT_EQ(map.shards_size(), 3);
  EXPECT_THAT(Replicas(map, 0), ElementsAre("n0", "n1"));
  EXPECT_THAT(Replicas(map, 1), ElementsAre("n1", "n2"));
  EXPECT_THAT(Replicas(map, 2), ElementsAre("n2", "n0"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(map.shards(i).shard_epoch(), 1u);
  ASSERT_EQ(map.nodes_size(), 3);
  EXPECT_EQ(map.nodes(1).incarnation(), static_cast<uint64_t>(leases_["n1"]));
  EXPECT_EQ(map.nodes(1).resp_address(), "n1:6379");

  // Nothing changed: another round writes nothing.
  const int64_t revision = MapKv()->mod_revision;
  ASSERT_TRUE(ctl->RunOnce().ok());
  EXPECT_EQ(MapKv()->mod_revision, revision);
}

TEST_F(ControllerTest, FailoverPromotesTheBackupWithTheHighestAppliedSeq) {
  auto ctl = MakeController("ctl", /*replicas=*/3, /*min_nodes=*/3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  ASSERT_THAT(Replicas(ReadMap(), 0), ElementsAre("n0", "n1", "n2"));
  seqs_.Set("n1", 0, 5);
  seqs_.Set("n2", 0, 9);

  Kill("n0");
  ASSERT_TRUE(ctl->RunOnce().ok());
  v1::ClusterMap map = ReadMap();
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_THAT(Replicas(map, 0), ElementsAre("n2", "n1"));
  EXPECT_THAT(Replicas(map, 1), ElementsAre("n1", "n2"));
  EXPECT_THAT(Replicas(map, 2), ElementsAre("n2", "n1"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(map.shards(i).shard_epoch(), 2u) << i;
  EXPECT_EQ(map.nodes_size(), 2);
}

TEST_F(ControllerTest, WatchDrivesFailoverWithoutPolling) {
  // Polling once a minute: only the watch can make this fast.
  auto ctl = MakeController("ctl", 2, 3, seqs_.Fn(), absl::Seconds(60));
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ctl->Start();
  ASSERT_TRUE(Eventually([&] { return MapKv().has_value(); }));
  Kill("n1");
  // Epoch 2 removes n1; epoch 3 (right after) refills shards 0 and 1.
  ASSERT_TRUE(Eventually([&] { return ReadMap().epoch() >= 2; }));
  v1::ClusterMap map = ReadMap();
  EXPECT_THAT(Replicas(map, 0), ElementsAre("n0"));
  EXPECT_THAT(Replicas(map, 1), ElementsAre("n2"));
  EXPECT_THAT(Replicas(map, 2), ElementsAre("n2", "n0"));
}

TEST_F(ControllerTest, DeposedControllerCannotWriteTheMap) {
  auto ctl = MakeController("ctl", 2, 3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  ASSERT_TRUE(ctl->IsLeader());
  const int64_t map_revision = MapKv()->mod_revision;

  // Behind its back another controller takes the key (as after a lease
  // expiry the old one did not notice yet). ctl still believes it leads.
  ASSERT_TRUE(etcd_->Delete(etcd_keys::ControllerKey(kCluster)).ok());
  absl::StatusOr<int64_t> other = etcd_->GrantLease(absl::Seconds(10));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(etcd_->Put(etcd_keys::ControllerKey(kCluster), "usurper", *other).ok());
  ASSERT_TRUE(ctl->IsLeader());

  auto failover = ctl->Failover(0, "n1");
  EXPECT_EQ(failover.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(failover.status().message(), HasSubstr("usurper"));
  EXPECT_EQ(MapKv()->mod_revision, map_revision);
  EXPECT_FALSE(ctl->IsLeader());
  Register("n3");  // neither add-node nor rebalance writes either
  EXPECT_TRUE(absl::IsFailedPrecondition(ctl->AddNode("n3").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(ctl->Rebalance(false).status()));
  EXPECT_EQ(MapKv()->mod_revision, map_revision);

  // Nor does its reconcile loop, with a node dying.
  Kill("n1");
  ASSERT_TRUE(ctl->RunOnce().ok());
  EXPECT_EQ(MapKv()->mod_revision, map_revision);
  EXPECT_EQ(ctl->ControllerId(), "usurper");
}

// 3 nodes, R=2: the dead node's shards are refilled from the two nodes
// left (as syncing), without waiting for it; when it comes back every
// shard is full and it stays out.
TEST_F(ControllerTest, DeadNodesShardsAreRefilledFromServingNodes) {
  auto ctl = MakeController("ctl", 2, 3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  seqs_.Set("n1", 0, 1);

  Kill("n0");
  ASSERT_TRUE(ctl->RunOnce().ok());
  v1::ClusterMap map = ReadMap();
  ASSERT_EQ(map.epoch(), 3u);  // one txn removes n0, one refills
  EXPECT_THAT(Replicas(map, 0), ElementsAre("n1"));
  EXPECT_THAT(Syncing(map, 0), ElementsAre("n2"));
  EXPECT_THAT(Replicas(map, 1), ElementsAre("n1", "n2"));
  EXPECT_THAT(Syncing(map, 1), IsEmpty());
  EXPECT_THAT(Replicas(map, 2), ElementsAre("n2"));
  EXPECT_THAT(Syncing(map, 2), ElementsAre("n1"));
  EXPECT_EQ(map.shards(0).shard_epoch(), 3u);
  EXPECT_EQ(map.shards(1).shard_epoch(), 1u);  // n0 was never in shard 1

  Register("n0");  // back, empty, new lease: nothing is below R
  ASSERT_TRUE(ctl->RunOnce().ok());
  EXPECT_EQ(ReadMap().epoch(), 3u);
}

// remove-node drains a node: its shard moves to the newest backup, it
// leaves every shard, is marked draining and not placed again; the refill
// uses the others. Stopping it then is no failure; restarting it (a new
// incarnation) clears the mark.
TEST_F(ControllerTest, RemoveNodeDrainsThenRefillsWithOthers) {
  auto ctl = MakeController("ctl", 2, 3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2", "n3"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  ASSERT_THAT(Replicas(ReadMap(), 0), ElementsAre("n0", "n1"));
  ASSERT_THAT(Replicas(ReadMap(), 3), ElementsAre("n3", "n0"));
  seqs_.Set("n1", 0, 7);
  // n0 applies map 2 (its demotion) as soon as the controller asks.
  SetAppliedEpoch("n0", 2);

  auto removed = ctl->RemoveNode("n0");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->epoch(), 3u);  // demoted in map 2, gone in map 3
  EXPECT_THAT(Replicas(*removed, 0), ElementsAre("n1"));
  EXPECT_THAT(Replicas(*removed, 3), ElementsAre("n3"));
  ASSERT_EQ(removed->draining_size(), 1);
  EXPECT_EQ(removed->draining(0).node_id(), "n0");
  EXPECT_EQ(ReadMap().epoch(), 3u);

  ASSERT_TRUE(ctl->RunOnce().ok());  // the refill
  v1::ClusterMap map = ReadMap();
  EXPECT_EQ(map.epoch(), 4u);
  EXPECT_THAT(Syncing(map, 0), ElementsAre("n2"));  // n2 and n3 serve 2, n1 3
  EXPECT_THAT(Syncing(map, 3), ElementsAre("n1"));
  for (const v1::ClusterNode& node : map.nodes()) EXPECT_NE(node.node_id(), "n0");

  Kill("n0");  // stopped after draining: only the mark goes
  ASSERT_TRUE(ctl->RunOnce().ok());
  map = ReadMap();
  EXPECT_EQ(map.epoch(), 5u);
  EXPECT_EQ(map.draining_size(), 0);
  EXPECT_THAT(Replicas(map, 0), ElementsAre("n1"));
  EXPECT_EQ(map.shards(0).shard_epoch(), 4u);
}

// A demoted primary that never says it applied its demotion stays a
// backup (one-sided readers on the older map may still read it, and it
// still receives every write); once its lease is gone it is fenced and
// remove-node finishes without asking.
TEST_F(ControllerTest, RemoveNodeKeepsAnUnconfirmedDemotedPrimaryAsBackup) {
  auto ctl = MakeController("ctl", 2, 3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  seqs_.Set("n1", 0, 1);
  SetAppliedEpoch("n0", 1);  // answers, but stays on map 1

  // It keeps asking for demote_confirm_timeout (600 ms on the clock).
  const absl::Duration asked = clock_.Steady();
  auto stuck = WhileTimePasses([&] { return ctl->RemoveNode("n0"); });
  EXPECT_EQ(stuck.status().code(), absl::StatusCode::kDeadlineExceeded) << stuck.status();
  EXPECT_GE(clock_.Steady() - asked, absl::Milliseconds(600));
  EXPECT_THAT(stuck.status().message(), HasSubstr("run remove-node again"));
  v1::ClusterMap map = ReadMap();
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_THAT(Replicas(map, 0), ElementsAre("n1", "n0"));
  EXPECT_EQ(map.draining_size(), 1);

  Kill("n0");
  auto removed = ctl->RemoveNode("n0");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->epoch(), 3u);
  EXPECT_THAT(Replicas(*removed, 0), ElementsAre("n1"));
}

// add-node gives a registered spare a new, empty shard; rebalance queues
// the moves in one write and the loop starts the first one only.
TEST_F(ControllerTest, AddNodeThenRebalanceQueuesAndStartsOneMigration) {
  auto ctl = MakeController("ctl", 2, 2, seqs_.Fn());
  for (const char* id : {"n0", "n1"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  Register("n2");  // every shard is full: n2 stays out
  ASSERT_TRUE(ctl->RunOnce().ok());
  ASSERT_EQ(ReadMap().epoch(), 1u);
  EXPECT_TRUE(absl::IsNotFound(ctl->AddNode("n9").status()));
  auto added = ctl->AddNode("n2");
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->shard_id(), 2u);
  v1::ClusterMap map = ReadMap();
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_THAT(Replicas(map, 2), ElementsAre("n2", "n0"));  // n0, n1 tie: node id
  EXPECT_TRUE(absl::IsFailedPrecondition(ctl->AddNode("n2").status()));

  auto dry = ctl->Rebalance(/*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_EQ(dry->planned_size(), 2);  // the top of shards 0 and 1 to shard 2
  EXPECT_EQ(ReadMap().epoch(), 2u);
  auto queued = ctl->Rebalance(/*dry_run=*/false);
  ASSERT_TRUE(queued.ok()) << queued.status();
  map = ReadMap();
  EXPECT_EQ(map.epoch(), 3u);
  ASSERT_EQ(map.migrations_size(), 2);
  EXPECT_EQ(map.migrations(0).DebugString(), dry->planned(0).DebugString());
  EXPECT_EQ(map.next_migration_id(), 2u);
  EXPECT_TRUE(absl::IsFailedPrecondition(ctl->Rebalance(false).status()));

  ASSERT_TRUE(ctl->RunOnce().ok());  // starts migration 0, and only it
  map = ReadMap();
  EXPECT_EQ(map.epoch(), 4u);
  EXPECT_EQ(map.migrations(0).state(), v1::MIGRATION_COPYING);
  EXPECT_EQ(map.migrations(1).state(), v1::MIGRATION_PENDING);
}

TEST_F(ControllerTest, RemoveNodeRefusesToLeaveAShardWithoutAnInSyncReplica) {
  auto ctl = MakeController("ctl", /*replicas=*/1, 2, seqs_.Fn());
  auto other = MakeController("ctl-2", 1, 2, seqs_.Fn());
  for (const char* id : {"n0", "n1"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  ASSERT_TRUE(other->RunOnce().ok());
  auto refused = ctl->RemoveNode("n0");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("without an in-sync replica"));
  EXPECT_EQ(ctl->RemoveNode("nobody").status().code(), absl::StatusCode::kNotFound);
  auto elsewhere = other->RemoveNode("n0");
  EXPECT_EQ(elsewhere.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(elsewhere.status().message(), HasSubstr("the controller is ctl"));
  v1::ClusterMap map = ReadMap();
  EXPECT_EQ(map.epoch(), 1u);  // nothing written
  EXPECT_EQ(map.draining_size(), 0);
}

TEST_F(ControllerTest, NewIncarnationWithoutAGapIsFailedOverThenPlaced) {
  auto ctl = MakeController("ctl", 2, 3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  seqs_.Set("n2", 1, 4);
  // n1 restarts faster than its old lease expires: the key is overwritten.
  const int64_t incarnation = Register("n1");
  ASSERT_TRUE(ctl->RunOnce().ok());
  v1::ClusterMap map = ReadMap();
  EXPECT_EQ(map.epoch(), 3u);  // one txn for the failure, one for the placement
  EXPECT_THAT(Replicas(map, 0), ElementsAre("n0"));
  EXPECT_THAT(Syncing(map, 0), ElementsAre("n1"));
  EXPECT_THAT(Replicas(map, 1), ElementsAre("n2"));
  EXPECT_THAT(Syncing(map, 1), ElementsAre("n1"));
  auto view = cluster::ClusterMapView::Build(map);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)->Node("n1")->incarnation(), static_cast<uint64_t>(incarnation));
}

// etcd may delete a member key before the node's own deadline has passed
// (a lease revoked early by a stale etcd leader, or revoked by an operator):
// the primary may still serve. Its backup is promoted only one full TTL
// after the controller saw the key go, when that deadline has surely passed.
TEST_F(ControllerTest, APrimaryIsReplacedOnlyOneTtlAfterItsKeyWent) {
  member_ttl_ = absl::Seconds(3);
  auto ctl = MakeController("ctl", /*replicas=*/2, /*min_nodes=*/3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  ASSERT_THAT(Replicas(ReadMap(), 0), ElementsAre("n0", "n1"));
  seqs_.Set("n1", 0, 5);
  Kill("n0");
  ASSERT_TRUE(ctl->RunOnce().ok());  // the controller sees the key gone now
  EXPECT_EQ(ReadMap().epoch(), 1u);
  clock_.Advance(absl::Milliseconds(2950));
  ASSERT_TRUE(ctl->RunOnce().ok());
  EXPECT_EQ(ReadMap().epoch(), 1u);
  EXPECT_THAT(Replicas(ReadMap(), 0), ElementsAre("n0", "n1"));
  clock_.Advance(absl::Milliseconds(50));
  ASSERT_TRUE(ctl->RunOnce().ok());
  EXPECT_GE(ReadMap().epoch(), 2u);
  EXPECT_EQ(Replicas(ReadMap(), 0).front(), "n1");
}

// A second process with the same node id registered while the first may
// still be alive and serving: the first is replaced one TTL later, not at
// once.
TEST_F(ControllerTest, ANewIncarnationReplacesTheOldOneOnlyOneTtlLater) {
  member_ttl_ = absl::Seconds(3);
  auto ctl = MakeController("ctl", 2, 3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  const uint64_t first = ReadMap().nodes(1).incarnation();
  seqs_.Set("n2", 1, 4);
  Register("n1");
  ASSERT_TRUE(ctl->RunOnce().ok());
  EXPECT_EQ(ReadMap().epoch(), 1u);
  EXPECT_THAT(Replicas(ReadMap(), 1), ElementsAre("n1", "n2"));
  EXPECT_EQ(ReadMap().nodes(1).incarnation(), first);
  clock_.Advance(absl::Seconds(3));
  ASSERT_TRUE(ctl->RunOnce().ok());
  EXPECT_THAT(Replicas(ReadMap(), 1), ElementsAre("n2"));
}

// A Start()ed controller looks again when a departure becomes due, even
// with a poll interval far beyond it.
TEST_F(ControllerTest, TheLoopActsWhenADepartureBecomesDue) {
  member_ttl_ = absl::Seconds(3);
  auto ctl = MakeController("ctl", 2, 3, seqs_.Fn(), absl::Seconds(60));
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  // The first map and the departure are seen here, at a known moment; only
  // then does the loop run.
  ASSERT_TRUE(ctl->RunOnce().ok());
  Kill("n1");
  ASSERT_TRUE(ctl->RunOnce().ok());
  ASSERT_EQ(ReadMap().epoch(), 1u);
  ctl->Start();
  // Up to 5 s of clock in steps, each once the loop is settled in its wait
  // (a step it was woken by is written by then).
  for (int advanced = 0;; ++advanced) {
    ASSERT_TRUE(Eventually([&] { return clock_.Waiters() > 0 && clock_.Settled(); }));
    if (ReadMap().epoch() >= 2 || advanced == 50) break;
    clock_.Advance(absl::Milliseconds(100));
  }
  EXPECT_GE(ReadMap().epoch(), 2u);
}

TEST_F(ControllerTest, ManualFailover) {
  auto ctl = MakeController("ctl", 3, 3, seqs_.Fn());
  auto other = MakeController("ctl-2", 3, 3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  ASSERT_TRUE(other->RunOnce().ok());
  ASSERT_FALSE(other->IsLeader());

  auto moved = ctl->Failover(0, "n2");
  ASSERT_TRUE(moved.ok()) << moved.status();
  v1::ClusterMap map = ReadMap();
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_EQ(moved->epoch(), 2u);
  EXPECT_THAT(Replicas(map, 0), ElementsAre("n2", "n0", "n1"));
  EXPECT_EQ(map.shards(0).shard_epoch(), 2u);
  EXPECT_EQ(map.shards(1).shard_epoch(), 1u);

  // No target: the backup with the newest data.
  seqs_.Set("n0", 1, 10);
  seqs_.Set("n2", 1, 12);
  moved = ctl->Failover(1, "");
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_THAT(Replicas(ReadMap(), 1), ElementsAre("n2", "n1", "n0"));

  // Refusals.
  EXPECT_EQ(ctl->Failover(7, "n0").status().code(), absl::StatusCode::kNotFound);
  Kill("n1");  // not failed over yet: ctl has not run since
  EXPECT_EQ(ctl->Failover(2, "n1").status().code(), absl::StatusCode::kFailedPrecondition);
  auto elsewhere = other->Failover(0, "n0");
  EXPECT_EQ(elsewhere.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(elsewhere.status().message(), HasSubstr("the controller is ctl"));
  EXPECT_EQ(ReadMap().epoch(), 3u);
}

TEST_F(ControllerTest, ShardThatLosesEveryReplicaIsDownUntilTheLossIsAccepted) {
  auto ctl = MakeController("ctl", /*replicas=*/1, 3, seqs_.Fn());
  for (const char* id : {"n0", "n1", "n2"}) Register(id);
  ASSERT_TRUE(ctl->RunOnce().ok());
  Kill("n0");
  ASSERT_TRUE(ctl->RunOnce().ok());
  v1::ClusterMap map = ReadMap();  // ReadMap checks it passes Build
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_THAT(Replicas(map, 0), IsEmpty());
  EXPECT_THAT(Replicas(map, 1), ElementsAre("n1"));

  // A new member does not make it serve again, empty.
  Register("n3");
  ASSERT_TRUE(ctl->RunOnce().ok());
  map = ReadMap();
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_THAT(Replicas(map, 0), IsEmpty());
  ASSERT_EQ(map.shards(0).last_in_sync_size(), 1);
  EXPECT_EQ(map.shards(0).last_in_sync(0).node_id(), "n0");
  // The operator accepts the loss.
  auto accepted = ctl->AcceptLoss(0);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  map = ReadMap();
  EXPECT_EQ(map.epoch(), 3u);
  EXPECT_THAT(Replicas(map, 0), ElementsAre("n3"));  // primary, empty
  EXPECT_EQ(map.shards(0).shard_epoch(), 3u);
}

// The production AppliedSeqFn against a KvCluster service that implements
// only ReplicaStatus.
class ReplicaStatusService final : public v1::KvCluster::Service {
 public:
  ReplicaStatusService(std::string token, uint64_t base) : token_(std::move(token)), base_(base) {}
  grpc::Status ReplicaStatus(grpc::ServerContext* context, const v1::ReplicaStatusRequest* request,
                             v1::ReplicaStatusResponse* response) override {
    auto it = context->client_metadata().find("authorization");
    const std::string given = it == context->client_metadata().end()
                                  ? ""
                                  : std::string(it->second.data(), it->second.size());
    if (given != auth::BearerHeader(token_)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad token");
    }
    response->set_applied_seq(base_ + request->shard_id());
    response->set_fenced(request->shard_id() == 99);
    return grpc::Status::OK;
  }

 private:
  const std::string token_;
  const uint64_t base_;
};

struct ServiceServer {
  ServiceServer(std::string token, uint64_t base) : service(std::move(token), base) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~ServiceServer() { server->Shutdown(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  ReplicaStatusService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

TEST(GrpcAppliedSeqTest, AsksReplicaStatusWithTheBearerToken) {
  ServiceServer server("sekret", 40);
  ASSERT_NE(server.server, nullptr);
  v1::ClusterNode node;
  node.set_node_id("n1");
  node.set_control_address(server.address());

  PeerClient peers({"sekret"});
  AppliedSeqFn fn = MakeGrpcAppliedSeqFn({absl::Milliseconds(500), &peers});
  absl::StatusOr<uint64_t> seq = fn(node, 2);
  ASSERT_TRUE(seq.ok()) << seq.status();
  EXPECT_EQ(*seq, 42u);
  EXPECT_EQ(fn(node, 99).status().code(), absl::StatusCode::kUnavailable);  // fenced

  PeerClient other({"other"});
  AppliedSeqFn wrong = MakeGrpcAppliedSeqFn({absl::Milliseconds(500), &other});
  EXPECT_EQ(wrong(node, 2).status().code(), absl::StatusCode::kUnauthenticated);

  // Nobody there: an error naming the node.
  node.set_control_address("127.0.0.1:1");
  absl::StatusOr<uint64_t> gone = fn(node, 2);
  EXPECT_FALSE(gone.ok());
  EXPECT_THAT(gone.status().message(), HasSubstr("n1"));

  // A peer that takes the connection and never answers (a frozen process:
  // the kernel completes the TCP handshake from the listen backlog): the
  // call ends by its deadline instead of hanging the controller. No timing
  // bound: the code says the deadline ended it.
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(silent, 8), 0);
  ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  node.set_control_address(absl::StrCat("127.0.0.1:", ntohs(addr.sin_port)));
  absl::StatusOr<uint64_t> frozen = fn(node, 2);
  EXPECT_EQ(frozen.status().code(), absl::StatusCode::kDeadlineExceeded) << frozen.status();
  EXPECT_THAT(frozen.status().message(), HasSubstr("n1"));
  close(silent);
}

TEST_F(ControllerTest, FailoverAsksRealReplicaStatusServices) {
  ServiceServer n1("tok", 100);  // shard 0: applied 100
  ServiceServer n2("tok", 200);  // shard 0: applied 200
  ASSERT_NE(n1.server, nullptr);
  ASSERT_NE(n2.server, nullptr);
  PeerClient peers({"tok"});
  auto ctl = MakeController("ctl", 3, 3, MakeGrpcAppliedSeqFn({absl::Milliseconds(500), &peers}));
  Register("n0");
  Register("n1", n1.address());
  Register("n2", n2.address());
  ASSERT_TRUE(ctl->RunOnce().ok());
  Kill("n0");
  ASSERT_TRUE(ctl->RunOnce().ok());
  EXPECT_THAT(Replicas(ReadMap(), 0), ElementsAre("n2", "n1"));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
