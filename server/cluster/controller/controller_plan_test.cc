// Copyright 2026 The kvstore Authors.
//
// The controller's decisions without etcd: each PlanNext rule and
// PlanFailover on hand-made maps. controller_test.cc runs the same paths
// through a real etcd.

#include "server/cluster/controller/controller_plan.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

v1::ClusterNode Node(const std::string& id, uint64_t incarnation) {
  v1::ClusterNode n;
  n.set_node_id(id);
  n.set_incarnation(incarnation);
  n.set_control_address(absl::StrCat(id, ":7000"));
  return n;
}

MemberSet Members(const std::vector<std::string>& ids, uint64_t incarnation = 1) {
  MemberSet m;
  for (const std::string& id : ids) m[id] = Node(id, incarnation);
  return m;
}

std::vector<std::string> Replicas(const v1::ClusterMap& map, uint32_t shard) {
  return {map.shards(shard).replicas().begin(), map.shards(shard).replicas().end()};
}
std::vector<std::string> Syncing(const v1::ClusterMap& map, uint32_t shard) {
  return {map.shards(shard).syncing().begin(), map.shards(shard).syncing().end()};
}

// Answers from a table; a missing entry is an error (an unreachable node).
struct FakeSeqs {
  std::map<std::pair<std::string, uint32_t>, uint64_t> seqs;
  std::vector<std::string> asked;
  AppliedSeqFn Fn() {
    return [this](const v1::ClusterNode& node, uint32_t shard) -> absl::StatusOr<uint64_t> {
      asked.push_back(absl::StrCat(node.node_id(), "/", shard));
      auto it = seqs.find({node.node_id(), shard});
      if (it == seqs.end()) return absl::UnavailableError("unreachable");
      return it->second;
    };
  }
};

void ExpectValid(const v1::ClusterMap& map) {
  EXPECT_TRUE(cluster::ClusterMapView::Build(map).ok())
      << cluster::ClusterMapView::Build(map).status();
}

TEST(ControllerPlanTest, FirstMapShapeThreeNodesRTwo) {
  v1::ClusterMap map = MakeFirstMap(Members({"c", "a", "b"}), 2, "test");
  ExpectValid(map);
  EXPECT_EQ(map.epoch(), 1u);
  EXPECT_EQ(map.replication_factor(), 2u);
  EXPECT_EQ(map.cluster_name(), "test");
  ASSERT_EQ(map.shards_size(), 3);
  EXPECT_THAT(Replicas(map, 0), ElementsAre("a", "b"));
  EXPECT_THAT(Replicas(map, 1), ElementsAre("b", "c"));
  EXPECT_THAT(Replicas(map, 2), ElementsAre("c", "a"));
  const std::vector<v1::SlotRange> even = cluster::EvenSlotRanges(3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(map.shards(i).shard_id(), static_cast<uint32_t>(i));
    EXPECT_EQ(map.shards(i).shard_epoch(), 1u);
    ASSERT_EQ(map.shards(i).slots_size(), 1);
    EXPECT_EQ(map.shards(i).slots(0).start(), even[i].start());
    EXPECT_EQ(map.shards(i).slots(0).end(), even[i].end());
  }
  EXPECT_EQ(map.nodes_size(), 3);
}

TEST(ControllerPlanTest, FewerNodesThanReplicas) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b"}), 3, "test");
  ExpectValid(map);
  EXPECT_THAT(Replicas(map, 0), ElementsAre("a", "b"));
  EXPECT_THAT(Replicas(map, 1), ElementsAre("b", "a"));
}

TEST(ControllerPlanTest, StableMapNeedsNoChange) {
  MemberSet members = Members({"a", "b", "c"});
  v1::ClusterMap map = MakeFirstMap(members, 2, "test");
  // applied_map_epoch alone must not cause a new map (it changes on every
  // install, so it would loop).
  members["a"].set_applied_map_epoch(7);
  FakeSeqs seqs;
  EXPECT_FALSE(PlanNext(map, members, seqs.Fn()).has_value());
}

TEST(ControllerPlanTest, DeadPrimaryHighestSeqWins) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 3, "test");
  FakeSeqs seqs;
  seqs.seqs[{"b", 0}] = 5;
  seqs.seqs[{"c", 0}] = 9;
  auto step = PlanNext(map, Members({"b", "c"}), seqs.Fn());
  ASSERT_TRUE(step.has_value());
  ExpectValid(step->map);
  EXPECT_EQ(step->map.epoch(), 2u);
  EXPECT_THAT(Replicas(step->map, 0), ElementsAre("c", "b"));
  EXPECT_THAT(Replicas(step->map, 1), ElementsAre("b", "c"));
  EXPECT_THAT(Replicas(step->map, 2), ElementsAre("c", "b"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step->map.shards(i).shard_epoch(), 2u);
  EXPECT_THAT(seqs.asked, ElementsAre("b/0", "c/0"));  // only shard 0 lost its primary
  EXPECT_EQ(step->map.nodes_size(), 2);
}

TEST(ControllerPlanTest, TiesAndUnknownsGoByListOrder) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 3, "test");
  FakeSeqs tie;
  tie.seqs[{"b", 0}] = 4;
  tie.seqs[{"c", 0}] = 4;
  EXPECT_THAT(Replicas(PlanNext(map, Members({"b", "c"}), tie.Fn())->map, 0),
              ElementsAre("b", "c"));
  FakeSeqs b_unreachable;
  b_unreachable.seqs[{"c", 0}] = 1;
  EXPECT_THAT(Replicas(PlanNext(map, Members({"b", "c"}), b_unreachable.Fn())->map, 0),
              ElementsAre("c", "b"));
  FakeSeqs none;
  EXPECT_THAT(Replicas(PlanNext(map, Members({"b", "c"}), none.Fn())->map, 0),
              ElementsAre("b", "c"));
}

TEST(ControllerPlanTest, NewIncarnationIsADeadNodeThenPlaced) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 2, "test");
  MemberSet members = Members({"a", "b", "c"});
  members["a"] = Node("a", 2);  // restarted
  FakeSeqs seqs;
  auto removed = PlanNext(map, members, seqs.Fn());
  ASSERT_TRUE(removed.has_value());
  EXPECT_THAT(Replicas(removed->map, 0), ElementsAre("b"));
  EXPECT_THAT(Replicas(removed->map, 2), ElementsAre("c"));
  auto placed = PlanNext(removed->map, members, seqs.Fn());
  ASSERT_TRUE(placed.has_value());
  ExpectValid(placed->map);
  EXPECT_EQ(placed->map.epoch(), 3u);
  EXPECT_THAT(Syncing(placed->map, 0), ElementsAre("a"));
  EXPECT_THAT(Syncing(placed->map, 2), ElementsAre("a"));
  EXPECT_THAT(Syncing(placed->map, 1), IsEmpty());
  EXPECT_EQ(placed->map.shards(0).shard_epoch(), 3u);
  EXPECT_EQ(placed->map.shards(1).shard_epoch(), 1u);
  EXPECT_TRUE(IsAliveIn(placed->map, members, "a"));
  EXPECT_FALSE(PlanNext(placed->map, members, seqs.Fn()).has_value());
}

TEST(ControllerPlanTest, ExtraNodeInAFullClusterStaysOut) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b"}), 2, "test");
  FakeSeqs seqs;
  EXPECT_FALSE(PlanNext(map, Members({"a", "b", "z"}), seqs.Fn()).has_value());
}

TEST(ControllerPlanTest, ADownShardStaysDownAndKeepsItsLastInSyncSet) {
  MemberSet members = Members({"a", "b", "c"});
  members["a"].set_process_id("pa");
  v1::ClusterMap map = MakeFirstMap(members, 1, "test");
  FakeSeqs seqs;
  auto down = PlanNext(map, Members({"b", "c"}), seqs.Fn());
  ASSERT_TRUE(down.has_value());
  ExpectValid(down->map);
  EXPECT_THAT(Replicas(down->map, 0), IsEmpty());
  EXPECT_THAT(down->what, HasSubstr("shard 0 down"));
  ASSERT_EQ(down->map.shards(0).last_in_sync_size(), 1);
  EXPECT_EQ(down->map.shards(0).last_in_sync(0).node_id(), "a");
  EXPECT_EQ(down->map.shards(0).last_in_sync(0).incarnation(), 1u);
  EXPECT_EQ(down->map.shards(0).last_in_sync(0).process_id(), "pa");
  EXPECT_FALSE(PlanNext(down->map, Members({"b", "c"}), seqs.Fn()).has_value());
  // A new, empty member does not take the shard over: its data would be
  // gone without anyone having said so.
  EXPECT_FALSE(PlanNext(down->map, Members({"b", "c", "d"}), seqs.Fn()).has_value());
  // Nor does a restarted a (a new process: it lost its memory).
  MemberSet restarted = Members({"b", "c"});
  restarted["a"] = Node("a", 2);
  restarted["a"].set_process_id("pa2");
  EXPECT_FALSE(PlanNext(down->map, restarted, seqs.Fn()).has_value());
}

// Two ordinary faults: the backup leaves the in-sync set, then the primary
// dies while a replacement is still copying. The copying node has nothing
// to give; the shard waits, DOWN.
TEST(ControllerPlanTest, AShardWhosePrimaryDiesWhileItsReplacementCopiesStaysDown) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 2, "test");
  map.mutable_shards(0)->clear_replicas();
  map.mutable_shards(0)->add_replicas("a");
  map.mutable_shards(0)->add_syncing("c");
  FakeSeqs seqs;
  seqs.seqs[{"c", 0}] = 3;
  // d: a spare member, in no shard.
  const MemberSet members = Members({"b", "c", "d"});
  auto down = PlanNext(map, members, seqs.Fn());
  ASSERT_TRUE(down.has_value());
  EXPECT_THAT(Replicas(down->map, 0), IsEmpty());
  EXPECT_THAT(Syncing(down->map, 0), IsEmpty());
  std::optional<PlanStep> next = PlanNext(down->map, members, seqs.Fn());
  for (int i = 0; i < 5 && next.has_value(); ++i) {
    EXPECT_THAT(Replicas(next->map, 0), IsEmpty()) << next->what;
    next = PlanNext(next->map, members, seqs.Fn());
  }
}

// Every lease lapsed at once (etcd paused longer than the TTL): every node
// registered again, same processes, holding their copies. Each shard goes
// to the copy with the highest applied seq; the other copy rejoins.
TEST(ControllerPlanTest, NodesBackFromALeaseLapseGetTheirShardsBack) {
  MemberSet before = Members({"a", "b", "c"});
  for (auto& [id, n] : before) n.set_process_id("p-" + id);
  v1::ClusterMap map = MakeFirstMap(before, 2, "test");
  MemberSet after = before;
  for (auto& [id, n] : after) {
    n.set_incarnation(2);
    for (const v1::Shard& shard : map.shards()) {
      for (int i = 0; i < shard.replicas_size(); ++i) {
        if (shard.replicas(i) != id) continue;
        v1::ShardCopy* copy = n.add_copies();
        copy->set_shard_id(shard.shard_id());
        copy->set_shard_epoch(shard.shard_epoch());
        copy->set_applied_seq(i == 0 ? 10 : 7);  // the primary is ahead
      }
    }
  }
  // b's copy of shard 0 is the newer one (a's seq was lower).
  for (v1::ShardCopy& c : *after["a"].mutable_copies()) {
    if (c.shard_id() == 0) c.set_applied_seq(5);
  }
  FakeSeqs seqs;
  // Every lease lapsed and the controller took every node out (every shard
  // DOWN) before the nodes registered again.
  auto down = PlanNext(map, MemberSet{}, seqs.Fn());
  ASSERT_TRUE(down.has_value());
  for (const v1::Shard& shard : down->map.shards()) EXPECT_THAT(shard.replicas(), IsEmpty());
  v1::ClusterMap m = down->map;
  for (int i = 0; i < 10; ++i) {
    auto step = PlanNext(m, after, seqs.Fn());
    if (!step.has_value()) break;
    ExpectValid(step->map);
    m = step->map;
  }
  EXPECT_THAT(Replicas(m, 0), ElementsAre("b"));
  EXPECT_THAT(Syncing(m, 0), ElementsAre("a"));
  EXPECT_THAT(Replicas(m, 1), ElementsAre("b"));
  EXPECT_THAT(Syncing(m, 1), ElementsAre("c"));
  EXPECT_THAT(Replicas(m, 2), ElementsAre("c"));
  EXPECT_THAT(Syncing(m, 2), ElementsAre("a"));
  for (const v1::Shard& shard : m.shards()) EXPECT_EQ(shard.last_in_sync_size(), 0);
  for (const std::string& id : {"a", "b", "c"}) EXPECT_TRUE(IsAliveIn(m, after, id)) << id;
}

// A node that registered again after its lease lapsed, memory intact (same
// process_id, new incarnation), keeps every role: its record takes the new
// incarnation and the shard it leads a new shard epoch. No failover, no
// copy.
TEST(ControllerPlanTest, ANodeBackWithItsMemoryKeepsItsRoles) {
  MemberSet before = Members({"a", "b", "c"});
  for (auto& [id, n] : before) n.set_process_id("p-" + id);
  const v1::ClusterMap map = MakeFirstMap(before, 2, "test");
  MemberSet after = before;
  after["b"].set_incarnation(2);
  FakeSeqs seqs;
  auto step = PlanNext(map, after, seqs.Fn());
  ASSERT_TRUE(step.has_value());
  EXPECT_THAT(step->what, HasSubstr("registered again"));
  ExpectValid(step->map);
  for (int s = 0; s < map.shards_size(); ++s) {
    EXPECT_EQ(Replicas(step->map, s), Replicas(map, s)) << s;
    const bool b_leads = map.shards(s).replicas(0) == "b";
    EXPECT_EQ(step->map.shards(s).shard_epoch(), map.shards(s).shard_epoch() + (b_leads ? 1 : 0));
  }
  for (const std::string& id : {"a", "b", "c"}) EXPECT_TRUE(IsAliveIn(step->map, after, id)) << id;
  EXPECT_FALSE(PlanNext(step->map, after, seqs.Fn()).has_value());
  // Another process under b's name restarted empty: its roles end.
  after["b"].set_process_id("p-b2");
  step = PlanNext(map, after, seqs.Fn());
  ASSERT_TRUE(step.has_value());
  EXPECT_THAT(step->what, HasSubstr("failed"));
}

// Only a process of the last in-sync set counts: a backup dropped from the
// in-sync set before the shard went down holds an older copy.
TEST(ControllerPlanTest, ACopyOutsideTheLastInSyncSetDoesNotRecoverTheShard) {
  MemberSet before = Members({"a", "b", "c"});
  for (auto& [id, n] : before) n.set_process_id("p-" + id);
  v1::ClusterMap map = MakeFirstMap(before, 2, "test");
  map.mutable_shards(0)->clear_replicas();
  map.mutable_shards(0)->add_replicas("a");  // b was dropped
  MemberSet without_a = before;
  without_a.erase("a");
  FakeSeqs seqs;
  seqs.seqs[{"c", 1}] = 1;
  seqs.seqs[{"c", 2}] = 1;
  auto down = PlanNext(map, without_a, seqs.Fn());
  ASSERT_TRUE(down.has_value());
  EXPECT_THAT(Replicas(down->map, 0), IsEmpty());
  MemberSet back = without_a;
  back["b"].set_incarnation(2);
  v1::ShardCopy* copy = back["b"].add_copies();
  copy->set_shard_id(0);
  copy->set_applied_seq(99);
  v1::ClusterMap m = down->map;
  for (int i = 0; i < 10; ++i) {
    auto step = PlanNext(m, back, seqs.Fn());
    if (!step.has_value()) break;
    m = step->map;
  }
  EXPECT_THAT(Replicas(m, 0), IsEmpty());
  ASSERT_EQ(m.shards(0).last_in_sync_size(), 1);
  EXPECT_EQ(m.shards(0).last_in_sync(0).node_id(), "a");
}

TEST(ControllerPlanTest, AcceptLossGivesTheDownShardAnEmptyPrimary) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 1, "test");
  FakeSeqs seqs;
  auto down = PlanNext(map, Members({"b", "c"}), seqs.Fn());
  ASSERT_TRUE(down.has_value());
  MemberSet members = Members({"b", "c", "d"});
  EXPECT_EQ(PlanAcceptLoss(down->map, members, 9).status().code(), absl::StatusCode::kNotFound);
  absl::Status not_down = PlanAcceptLoss(down->map, members, 1).status();
  EXPECT_EQ(not_down.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(not_down.message(), HasSubstr("not down"));
  auto accepted = PlanAcceptLoss(down->map, members, 0);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  ExpectValid(*accepted);
  EXPECT_EQ(accepted->epoch(), down->map.epoch() + 1);
  EXPECT_THAT(Replicas(*accepted, 0), ElementsAre("d"));  // the fewest roles
  EXPECT_EQ(accepted->shards(0).last_in_sync_size(), 0);
  EXPECT_EQ(accepted->shards(0).shard_epoch(), down->map.shards(0).shard_epoch() + 1);
  EXPECT_TRUE(IsAliveIn(*accepted, members, "d"));
  EXPECT_EQ(PlanAcceptLoss(down->map, {}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ControllerPlanTest, AddressChangeRefreshesRecord) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b"}), 2, "test");
  MemberSet members = Members({"a", "b"});
  members["b"].set_resp_address("b:6400");
  FakeSeqs seqs;
  auto step = PlanNext(map, members, seqs.Fn());
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->map.epoch(), 2u);
  EXPECT_EQ(step->map.nodes(1).resp_address(), "b:6400");
  EXPECT_EQ(step->map.shards(0).shard_epoch(), 1u);
}

TEST(ControllerPlanTest, FailoverToTargetKeepsOldPrimaryAsBackup) {
  MemberSet members = Members({"a", "b", "c"});
  v1::ClusterMap map = MakeFirstMap(members, 3, "test");
  FakeSeqs seqs;
  auto next = PlanFailover(map, members, 0, "c", seqs.Fn());
  ASSERT_TRUE(next.ok()) << next.status();
  ExpectValid(*next);
  EXPECT_THAT(Replicas(*next, 0), ElementsAre("c", "a", "b"));
  EXPECT_EQ(next->shards(0).shard_epoch(), 2u);
  EXPECT_EQ(next->shards(1).shard_epoch(), 1u);
  EXPECT_EQ(next->epoch(), 2u);
  EXPECT_TRUE(seqs.asked.empty());
}

TEST(ControllerPlanTest, FailoverRefusals) {
  MemberSet members = Members({"a", "b", "c"});
  v1::ClusterMap map = MakeFirstMap(members, 2, "test");
  FakeSeqs seqs;
  EXPECT_EQ(PlanFailover(map, members, 9, "", seqs.Fn()).status().code(),
            absl::StatusCode::kNotFound);
  // c is not in shard 0 ([a, b]).
  EXPECT_EQ(PlanFailover(map, members, 0, "c", seqs.Fn()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // b's member key is gone.
  EXPECT_EQ(PlanFailover(map, Members({"a", "c"}), 0, "b", seqs.Fn()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Nobody answers ReplicaStatus.
  EXPECT_EQ(PlanFailover(map, members, 0, "", seqs.Fn()).status().code(),
            absl::StatusCode::kUnavailable);
  // Already the primary: unchanged.
  auto same = PlanFailover(map, members, 0, "a", seqs.Fn());
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->epoch(), 1u);
}

TEST(ControllerPlanTest, FailoverWithoutTargetTakesHighestSeq) {
  MemberSet members = Members({"a", "b", "c"});
  v1::ClusterMap map = MakeFirstMap(members, 3, "test");
  FakeSeqs seqs;
  seqs.seqs[{"b", 0}] = 3;
  seqs.seqs[{"c", 0}] = 8;
  auto next = PlanFailover(map, members, 0, "", seqs.Fn());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(Replicas(*next, 0), ElementsAre("c", "a", "b"));
}

// 3 nodes, R=2: after c dies, shards 1 and 2 keep one replica; the
// refill puts the node serving fewest shards (never one already in the
// shard) into each as syncing, in one map change.
TEST(ControllerPlanTest, RefillFromNodesAlreadyServing) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 2, "test");
  MemberSet members = Members({"a", "b"});
  FakeSeqs seqs;
  auto removed = PlanNext(map, members, seqs.Fn());
  ASSERT_TRUE(removed.has_value());
  EXPECT_THAT(Replicas(removed->map, 1), ElementsAre("b"));
  EXPECT_THAT(Replicas(removed->map, 2), ElementsAre("a"));
  auto refill = PlanNext(removed->map, members, seqs.Fn());
  ASSERT_TRUE(refill.has_value());
  ExpectValid(refill->map);
  EXPECT_THAT(Syncing(refill->map, 0), IsEmpty());
  EXPECT_THAT(Syncing(refill->map, 1), ElementsAre("a"));
  EXPECT_THAT(Syncing(refill->map, 2), ElementsAre("b"));
  EXPECT_EQ(refill->map.shards(0).shard_epoch(), removed->map.shards(0).shard_epoch());
  EXPECT_EQ(refill->map.shards(1).shard_epoch(), removed->map.shards(1).shard_epoch() + 1);
  EXPECT_EQ(refill->map.nodes_size(), 2);
  EXPECT_FALSE(PlanNext(refill->map, members, seqs.Fn()).has_value());
}

TEST(ControllerPlanTest, RefillPrefersFewestRoles) {
  // 4 nodes, R=2, d died: shards 2 and 3 (c,d / d,a) lose d. b serves 2
  // shards, c 2, a 2: ties go by node id, and the second pick sees the
  // first's new role.
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c", "d"}), 2, "test");
  MemberSet members = Members({"a", "b", "c"});
  FakeSeqs seqs;
  auto removed = PlanNext(map, members, seqs.Fn());
  ASSERT_TRUE(removed.has_value());
  auto refill = PlanNext(removed->map, members, seqs.Fn());
  ASSERT_TRUE(refill.has_value());
  ExpectValid(refill->map);
  EXPECT_THAT(Replicas(refill->map, 2), ElementsAre("c"));
  EXPECT_THAT(Syncing(refill->map, 2), ElementsAre("a"));
  EXPECT_THAT(Replicas(refill->map, 3), ElementsAre("a"));
  EXPECT_THAT(Syncing(refill->map, 3), ElementsAre("b"));
  // An unplaced member (0 roles) goes before every serving one.
  MemberSet with_e = Members({"a", "b", "c", "e"});
  auto placed = PlanNext(removed->map, with_e, seqs.Fn());
  ASSERT_TRUE(placed.has_value());
  EXPECT_THAT(Syncing(placed->map, 2), ElementsAre("e"));
  EXPECT_THAT(Syncing(placed->map, 3), ElementsAre("e"));
}

TEST(ControllerPlanTest, RefillPlacesAMemberHoldingACopyOfTheShardFirst) {
  // As above with an unplaced e, but b registered again holding a copy of
  // shard 2 (dropped from it after a lease lapse): b resyncs what changed
  // instead of e copying the shard in full.
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c", "d"}), 2, "test");
  FakeSeqs seqs;
  auto removed = PlanNext(map, Members({"a", "b", "c"}), seqs.Fn());
  ASSERT_TRUE(removed.has_value());
  MemberSet members = Members({"a", "b", "c", "e"});
  members["b"].add_copies()->set_shard_id(2);
  auto placed = PlanNext(removed->map, members, seqs.Fn());
  ASSERT_TRUE(placed.has_value());
  ExpectValid(placed->map);
  EXPECT_THAT(Syncing(placed->map, 2), ElementsAre("b"));
  EXPECT_THAT(Syncing(placed->map, 3), ElementsAre("e"));
}

// What MapStore's "mark in sync" does: syncing -> last backup.
v1::ClusterMap MarkInSync(v1::ClusterMap map, uint32_t shard, const std::string& id) {
  v1::Shard* s = map.mutable_shards(shard);
  std::vector<std::string> rest;
  for (const std::string& x : s->syncing()) {
    if (x != id) rest.push_back(x);
  }
  s->clear_syncing();
  for (const std::string& x : rest) s->add_syncing(x);
  s->add_replicas(id);
  return map;
}

// The compose VM test found this: a node killed and restarted after the
// refill had given its roles to the others came back to no shard at all.
TEST(ControllerPlanTest, ARestartedNodeGetsItsShareOfBackupsBack) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 2, "test");
  FakeSeqs seqs;
  MemberSet without_a = Members({"b", "c"});
  auto removed = PlanNext(map, without_a, seqs.Fn());
  ASSERT_TRUE(removed.has_value());
  auto refill = PlanNext(removed->map, without_a, seqs.Fn());
  ASSERT_TRUE(refill.has_value());
  v1::ClusterMap settled = MarkInSync(MarkInSync(refill->map, 0, "c"), 2, "b");
  EXPECT_THAT(Replicas(settled, 0), ElementsAre("b", "c"));
  EXPECT_THAT(Replicas(settled, 1), ElementsAre("b", "c"));
  EXPECT_THAT(Replicas(settled, 2), ElementsAre("c", "b"));
  EXPECT_FALSE(PlanNext(settled, without_a, seqs.Fn()).has_value());

  MemberSet members = Members({"b", "c"});
  members["a"] = Node("a", 2);  // back, a new incarnation
  // b and c hold 3 roles each, the share is 2: a syncs a shard where the
  // busiest (b, by id) is a backup; primaries stay.
  auto first = PlanNext(settled, members, seqs.Fn());
  ASSERT_TRUE(first.has_value());
  ExpectValid(first->map);
  EXPECT_THAT(first->what, HasSubstr("balanced"));
  EXPECT_THAT(Syncing(first->map, 2), ElementsAre("a"));
  EXPECT_THAT(Replicas(first->map, 2), ElementsAre("c", "b"));
  EXPECT_EQ(first->map.shards(2).shard_epoch(), settled.shards(2).shard_epoch() + 1);
  EXPECT_TRUE(IsAliveIn(first->map, members, "a"));
  // Nothing more while a copies.
  EXPECT_FALSE(PlanNext(first->map, members, seqs.Fn()).has_value());
  // In sync: the shard has 3 replicas for R=2, and b (the busier backup) leaves.
  auto trimmed = PlanNext(MarkInSync(first->map, 2, "a"), members, seqs.Fn());
  ASSERT_TRUE(trimmed.has_value());
  ExpectValid(trimmed->map);
  EXPECT_THAT(trimmed->what, HasSubstr("trimmed"));
  EXPECT_THAT(Replicas(trimmed->map, 2), ElementsAre("c", "a"));
  // c still holds 3: a takes over its backup role of shard 0.
  auto second = PlanNext(trimmed->map, members, seqs.Fn());
  ASSERT_TRUE(second.has_value());
  EXPECT_THAT(Syncing(second->map, 0), ElementsAre("a"));
  auto done = PlanNext(MarkInSync(second->map, 0, "a"), members, seqs.Fn());
  ASSERT_TRUE(done.has_value());
  EXPECT_THAT(Replicas(done->map, 0), ElementsAre("b", "a"));
  EXPECT_THAT(Replicas(done->map, 1), ElementsAre("b", "c"));
  EXPECT_THAT(Replicas(done->map, 2), ElementsAre("c", "a"));
  EXPECT_FALSE(PlanNext(done->map, members, seqs.Fn()).has_value());
}

// A spare member (registered for add-node) stays spare while the roles fit
// the share without it: 6 roles over 4 members is a share of 2.
TEST(ControllerPlanTest, ASpareMemberIsNotTakenForBalance) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 2, "test");
  FakeSeqs seqs;
  EXPECT_FALSE(PlanNext(map, Members({"a", "b", "c", "d"}), seqs.Fn()).has_value());
}

// remove-node keeps a live demoted primary as an extra backup until it has
// confirmed the new map; the trim must leave that shard alone.
TEST(ControllerPlanTest, TrimLeavesAShardWithADrainingNode) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 2, "test");
  MemberSet members = Members({"a", "b", "c"});
  FakeSeqs seqs;
  seqs.seqs[{"b", 0}] = 1;
  auto demoted = PlanRemoveNode(map, members, "a", seqs.Fn());
  ASSERT_TRUE(demoted.ok()) << demoted.status();
  v1::ClusterMap extra = MarkInSync(*demoted, 0, "c");  // 3 in sync, a draining
  EXPECT_FALSE(TrimReplicas(extra, members).has_value());
}

TEST(ControllerPlanTest, RemoveNodePromotesNewestBackupAndMarksDraining) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 3, "test");
  MemberSet members = Members({"a", "b", "c"});
  FakeSeqs seqs;
  seqs.seqs[{"b", 0}] = 3;
  seqs.seqs[{"c", 0}] = 8;
  auto demoted = PlanRemoveNode(map, members, "a", seqs.Fn());
  ASSERT_TRUE(demoted.ok()) << demoted.status();
  ExpectValid(*demoted);
  EXPECT_EQ(demoted->epoch(), 2u);
  // a led shard 0: demoted to its last backup, not yet gone (readers on
  // map 1 may still read it); it left the shards it only backed up.
  EXPECT_THAT(Replicas(*demoted, 0), ElementsAre("c", "b", "a"));
  EXPECT_THAT(Replicas(*demoted, 1), ElementsAre("b", "c"));
  EXPECT_THAT(Replicas(*demoted, 2), ElementsAre("c", "b"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(demoted->shards(i).shard_epoch(), 2u);
  ASSERT_EQ(demoted->draining_size(), 1);
  EXPECT_TRUE(ServesAnyShard(*demoted, "a"));
  // Second pass (once a applied map 2): it leaves shard 0 too.
  auto next = PlanRemoveNode(*demoted, members, "a", seqs.Fn());
  ASSERT_TRUE(next.ok()) << next.status();
  ExpectValid(*next);
  EXPECT_EQ(next->epoch(), 3u);
  EXPECT_THAT(Replicas(*next, 0), ElementsAre("c", "b"));
  EXPECT_EQ(next->shards(0).shard_epoch(), 3u);
  EXPECT_EQ(next->shards(1).shard_epoch(), 2u);
  EXPECT_FALSE(ServesAnyShard(*next, "a"));
  EXPECT_EQ(next->nodes_size(), 2);
  ASSERT_EQ(next->draining_size(), 1);
  EXPECT_EQ(next->draining(0).node_id(), "a");
  EXPECT_EQ(next->draining(0).incarnation(), 1u);
  // Not placed again while this incarnation lives (R=3 > 2 nodes left).
  EXPECT_FALSE(PlanNext(*next, members, seqs.Fn()).has_value());
  // Removing it again changes nothing.
  auto again = PlanRemoveNode(*next, members, "a", seqs.Fn());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->epoch(), next->epoch());
  // Restarted (new incarnation): placed again, then the mark is dropped.
  members["a"] = Node("a", 2);
  auto placed = PlanNext(*next, members, seqs.Fn());
  ASSERT_TRUE(placed.has_value());
  EXPECT_THAT(Syncing(placed->map, 0), ElementsAre("a"));
  auto pruned = PlanNext(placed->map, members, seqs.Fn());
  ASSERT_TRUE(pruned.has_value());
  EXPECT_EQ(pruned->map.draining_size(), 0);
  EXPECT_THAT(pruned->what, HasSubstr("draining"));
  EXPECT_FALSE(PlanNext(pruned->map, members, seqs.Fn()).has_value());
}

TEST(ControllerPlanTest, RemoveNodeThenRefillPlacesOthers) {
  // 3 nodes, R=2: removing a leaves shards 0 (a,b) and 2 (c,a) with one
  // replica; the refill uses b and c, never a.
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 2, "test");
  MemberSet members = Members({"a", "b", "c"});
  FakeSeqs seqs;
  seqs.seqs[{"b", 0}] = 1;
  auto demoted = PlanRemoveNode(map, members, "a", seqs.Fn());
  ASSERT_TRUE(demoted.ok()) << demoted.status();
  EXPECT_THAT(Replicas(*demoted, 0), ElementsAre("b", "a"));
  auto next = PlanRemoveNode(*demoted, members, "a", seqs.Fn());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(Replicas(*next, 0), ElementsAre("b"));
  EXPECT_THAT(Replicas(*next, 2), ElementsAre("c"));
  auto refill = PlanNext(*next, members, seqs.Fn());
  ASSERT_TRUE(refill.has_value());
  ExpectValid(refill->map);
  EXPECT_THAT(Syncing(refill->map, 0), ElementsAre("c"));
  EXPECT_THAT(Syncing(refill->map, 2), ElementsAre("b"));
  EXPECT_EQ(refill->map.draining_size(), 1);
  // Once a stops (its key goes), nothing fails over: the mark is dropped.
  members.erase("a");
  auto gone = PlanNext(refill->map, members, seqs.Fn());
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->map.draining_size(), 0);
  EXPECT_EQ(gone->map.shards(0).shard_epoch(), refill->map.shards(0).shard_epoch());
}

// A primary whose lease is gone is fenced already: one write drops it.
TEST(ControllerPlanTest, RemoveNodeDropsADeadPrimaryAtOnce) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 2, "test");
  FakeSeqs seqs;
  seqs.seqs[{"b", 0}] = 1;
  auto next = PlanRemoveNode(map, Members({"b", "c"}), "a", seqs.Fn());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(Replicas(*next, 0), ElementsAre("b"));
  EXPECT_FALSE(ServesAnyShard(*next, "a"));
}

TEST(ControllerPlanTest, RemoveNodeRefusals) {
  FakeSeqs seqs;
  // R=1: a is the only in-sync replica of shard 0.
  v1::ClusterMap solo = MakeFirstMap(Members({"a", "b"}), 1, "test");
  auto refused = PlanRemoveNode(solo, Members({"a", "b"}), "a", seqs.Fn());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("without an in-sync replica"));
  // A syncing backup is not in sync.
  v1::ClusterMap syncing = solo;
  syncing.mutable_shards(0)->add_syncing("b");
  refused = PlanRemoveNode(syncing, Members({"a", "b"}), "a", seqs.Fn());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("wait until"));
  // The only backup is dead.
  v1::ClusterMap two = MakeFirstMap(Members({"a", "b"}), 2, "test");
  refused = PlanRemoveNode(two, Members({"a"}), "a", seqs.Fn());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  // No backup answered.
  EXPECT_EQ(PlanRemoveNode(two, Members({"a", "b"}), "a", seqs.Fn()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(PlanRemoveNode(two, Members({"a", "b"}), "zz", seqs.Fn()).status().code(),
            absl::StatusCode::kNotFound);
  // Removing a backup only needs no answer.
  auto backup = PlanRemoveNode(two, Members({"a", "b"}), "b", FakeSeqs{}.Fn());
  EXPECT_FALSE(backup.ok());  // b leads shard 1 and a did not answer
  seqs.seqs[{"a", 1}] = 2;
  backup = PlanRemoveNode(two, Members({"a", "b"}), "b", seqs.Fn());
  ASSERT_TRUE(backup.ok()) << backup.status();
  EXPECT_THAT(Replicas(*backup, 0), ElementsAre("a"));
  EXPECT_THAT(Replicas(*backup, 1), ElementsAre("a", "b"));  // demoted first
}

}  // namespace
}  // namespace server
}  // namespace kvstore
