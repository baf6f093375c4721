// Copyright 2026 The kvstore Authors.
//
// The controller's add-node, rebalance and migration-start decisions
// (controller_plan.h, architecture §19.9) on hand-made maps, without etcd.
// controller_migration_test.cc runs AddNode/Rebalance through a real etcd.

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
#include "server/cluster/controller/controller_plan.h"

namespace kvstore {
namespace server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::ClusterNode Node(const std::string& id, uint64_t incarnation = 1) {
  v1::ClusterNode n;
  n.set_node_id(id);
  n.set_incarnation(incarnation);
  n.set_control_address(absl::StrCat(id, ":7000"));
  return n;
}

MemberSet Members(const std::vector<std::string>& ids) {
  MemberSet m;
  for (const std::string& id : ids) m[id] = Node(id);
  return m;
}

std::vector<std::string> Replicas(const v1::Shard& shard) {
  return {shard.replicas().begin(), shard.replicas().end()};
}

AppliedSeqFn NoSeqs() {
  return [](const v1::ClusterNode&, uint32_t) -> absl::StatusOr<uint64_t> {
    return absl::UnavailableError("unreachable");
  };
}

void ExpectValid(const v1::ClusterMap& map) {
  EXPECT_TRUE(cluster::ClusterMapView::Build(map).ok())
      << cluster::ClusterMapView::Build(map).status();
}

// A settled map of `ids` (one shard each, R = 2) at epoch 5.
v1::ClusterMap Settled(const std::vector<std::string>& ids) {
  v1::ClusterMap map = MakeFirstMap(Members(ids), 2, "test");
  map.set_epoch(5);
  return map;
}

v1::Migration Migration(uint32_t id, uint32_t start, uint32_t end, uint32_t from, uint32_t to,
                        v1::MigrationState state = v1::MIGRATION_PENDING) {
  v1::Migration m;
  m.set_id(id);
  m.mutable_slots()->set_start(start);
  m.mutable_slots()->set_end(end);
  m.set_source_shard(from);
  m.set_target_shard(to);
  m.set_state(state);
  return m;
}

// Applies every migration's flip, as the source primaries eventually do.
v1::ClusterMap Flipped(v1::ClusterMap map) {
  for (const v1::Migration& m : map.migrations()) {
    v1::Shard *from = nullptr, *to = nullptr;
    for (v1::Shard& s : *map.mutable_shards()) {
      if (s.shard_id() == m.source_shard()) from = &s;
      if (s.shard_id() == m.target_shard()) to = &s;
    }
    cluster::MoveSlots(m.slots(), from, to);
  }
  map.clear_migrations();
  return map;
}

TEST(ControllerMigrationPlanTest, AddNodeGetsAnEmptyShardWithFewestRoleBackups) {
  v1::ClusterMap map = Settled({"a", "b", "c"});
  // c leads shard 2 and backs shard 1; give a a third role so b and c tie
  // at 2 while a has 3: the backup must be b (fewest, then node id).
  map.mutable_shards(1)->add_syncing("a");
  MemberSet members = Members({"a", "b", "c", "d"});
  absl::StatusOr<v1::ClusterMap> next = PlanAddNode(map, members, "d");
  ASSERT_TRUE(next.ok()) << next.status();
  ExpectValid(*next);
  EXPECT_EQ(next->epoch(), 6u);
  ASSERT_EQ(next->shards_size(), 4);
  const v1::Shard& added = next->shards(3);
  EXPECT_EQ(added.shard_id(), 3u);
  EXPECT_EQ(added.shard_epoch(), 1u);
  EXPECT_EQ(added.slots_size(), 0);
  EXPECT_THAT(Replicas(added), ElementsAre("d", "b"));
  EXPECT_EQ(cluster::ClusterMapView::Build(*next).value()->Node("d")->control_address(), "d:7000");
  // The other shards are untouched.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(next->shards(i).DebugString(), map.shards(i).DebugString());
}

TEST(ControllerMigrationPlanTest, AddNodeSkipsDeadAndDrainingBackupsAndMayHaveFewer) {
  v1::ClusterMap map = Settled({"a", "b"});
  map.set_replication_factor(3);
  MemberSet members = Members({"a", "b", "e"});
  members["b"].set_incarnation(9);  // b restarted: not alive for this map
  *map.add_draining() = Node("a");  // a drained
  map.mutable_shards(0)->clear_replicas();
  map.mutable_shards(0)->add_replicas("b");  // a is in no shard
  map.mutable_shards(1)->clear_replicas();
  map.mutable_shards(1)->add_replicas("b");
  absl::StatusOr<v1::ClusterMap> next = PlanAddNode(map, members, "e");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(Replicas(next->shards(2)), ElementsAre("e"));  // nobody else qualifies
  EXPECT_EQ(next->shards(2).shard_id(), 2u);
}

TEST(ControllerMigrationPlanTest, AddNodeRefusals) {
  v1::ClusterMap map = Settled({"a", "b", "c"});
  MemberSet members = Members({"a", "b", "c", "d"});
  EXPECT_TRUE(absl::IsNotFound(PlanAddNode(map, members, "zz").status()));
  absl::Status in_shard = PlanAddNode(map, members, "b").status();
  EXPECT_TRUE(absl::IsFailedPrecondition(in_shard)) << in_shard;
  EXPECT_THAT(in_shard.message(), HasSubstr("already serves shard"));
  v1::ClusterMap syncing = map;
  syncing.mutable_shards(0)->add_syncing("d");
  *syncing.add_nodes() = Node("d");
  EXPECT_TRUE(absl::IsFailedPrecondition(PlanAddNode(syncing, members, "d").status()));
  v1::ClusterMap draining = map;
  *draining.add_draining() = Node("d");
  absl::Status drained = PlanAddNode(draining, members, "d").status();
  EXPECT_TRUE(absl::IsFailedPrecondition(drained)) << drained;
  EXPECT_THAT(drained.message(), HasSubstr("draining"));
}

// Checks a rebalance plan: contiguous ranges owned by their source, taken
// from the top of the source's slots, and every shard within floor/ceil
// once all migrations flipped.
void ExpectEvenAfter(const v1::ClusterMap& before, const RebalancePlan& plan) {
  ExpectValid(plan.map);
  EXPECT_EQ(plan.map.epoch(), before.epoch() + 1);
  EXPECT_EQ(plan.map.migrations_size(), static_cast<int>(plan.planned.size()));
  uint32_t id = before.next_migration_id();
  for (const v1::Migration& m : plan.planned) {
    EXPECT_EQ(m.id(), id++);
    EXPECT_EQ(m.state(), v1::MIGRATION_PENDING);
    EXPECT_LE(m.slots().start(), m.slots().end());
  }
  EXPECT_EQ(plan.map.next_migration_id(), id);
  const v1::ClusterMap after = Flipped(plan.map);
  ExpectValid(after);
  const uint32_t n = after.shards_size();
  for (const v1::Shard& s : after.shards()) {
    const uint32_t count = cluster::SlotCountOf(s);
    EXPECT_GE(count, cluster::kSlotCount / n) << "shard " << s.shard_id();
    EXPECT_LE(count, (cluster::kSlotCount + n - 1) / n) << "shard " << s.shard_id();
  }
}

TEST(ControllerMigrationPlanTest, RebalanceThreeToFourShards) {
  v1::ClusterMap map =
      PlanAddNode(Settled({"a", "b", "c"}), Members({"a", "b", "c", "d"}), "d").value();
  map.set_next_migration_id(7);
  absl::StatusOr<RebalancePlan> plan = PlanRebalance(map);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectEvenAfter(map, *plan);
  // 0-5460, 5461-10922, 10923-16383 -> 4096 each: the top 1365, 1366 and
  // 1365 slots of each go to shard 3.
  ASSERT_EQ(plan->planned.size(), 3u);
  EXPECT_EQ(plan->planned[0].DebugString(), Migration(7, 4096, 5460, 0, 3).DebugString());
  EXPECT_EQ(plan->planned[1].DebugString(), Migration(8, 9557, 10922, 1, 3).DebugString());
  EXPECT_EQ(plan->planned[2].DebugString(), Migration(9, 15019, 16383, 2, 3).DebugString());
}

TEST(ControllerMigrationPlanTest, RebalanceOneToTwoShards) {
  v1::ClusterMap map = PlanAddNode(Settled({"a"}), Members({"a", "b"}), "b").value();
  absl::StatusOr<RebalancePlan> plan = PlanRebalance(map);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectEvenAfter(map, *plan);
  ASSERT_EQ(plan->planned.size(), 1u);
  EXPECT_EQ(plan->planned[0].DebugString(), Migration(0, 8192, 16383, 0, 1).DebugString());
}

void SetSlots(v1::Shard* shard, const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  shard->clear_slots();
  for (const auto& [a, b] : ranges) {
    v1::SlotRange* r = shard->add_slots();
    r->set_start(a);
    r->set_end(b);
  }
}

TEST(ControllerMigrationPlanTest, RebalanceCutsWhereTheSourceRangeEnds) {
  // Shard 1 has 84 + 9900 slots, 1792 too many: its top range (84 slots)
  // goes whole, the rest comes from the top of the range below it.
  v1::ClusterMap map = Settled({"a", "b"});
  SetSlots(map.mutable_shards(0), {{0, 99}, {10000, 16299}});
  SetSlots(map.mutable_shards(1), {{100, 9999}, {16300, 16383}});
  absl::StatusOr<RebalancePlan> plan = PlanRebalance(map);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectEvenAfter(map, *plan);
  ASSERT_EQ(plan->planned.size(), 2u);
  EXPECT_EQ(plan->planned[0].DebugString(), Migration(0, 8292, 9999, 1, 0).DebugString());
  EXPECT_EQ(plan->planned[1].DebugString(), Migration(1, 16300, 16383, 1, 0).DebugString());
}

TEST(ControllerMigrationPlanTest, RebalanceFillsTargetsInShardOrder) {
  v1::ClusterMap map = Settled({"a", "b"});
  SetSlots(map.mutable_shards(0), {{0, 99}, {200, 16383}});
  SetSlots(map.mutable_shards(1), {{100, 199}});
  map = PlanAddNode(map, Members({"a", "b", "c"}), "c").value();
  map = PlanAddNode(map, Members({"a", "b", "c", "d"}), "d").value();
  absl::StatusOr<RebalancePlan> plan = PlanRebalance(map);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectEvenAfter(map, *plan);
  // Shard 0's top 12188 slots: 3996 to shard 1, then 4096 to 2, 4096 to 3.
  ASSERT_EQ(plan->planned.size(), 3u);
  EXPECT_EQ(plan->planned[0].DebugString(), Migration(0, 4196, 8191, 0, 1).DebugString());
  EXPECT_EQ(plan->planned[1].DebugString(), Migration(1, 8192, 12287, 0, 2).DebugString());
  EXPECT_EQ(plan->planned[2].DebugString(), Migration(2, 12288, 16383, 0, 3).DebugString());
}

TEST(ControllerMigrationPlanTest, RebalanceEvenMapPlansNothing) {
  v1::ClusterMap map = Settled({"a", "b", "c"});  // 5461/5462/5461
  absl::StatusOr<RebalancePlan> plan = PlanRebalance(map);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->planned.empty());
  EXPECT_EQ(plan->map.epoch(), map.epoch());
  // Deterministic: the same map plans the same moves.
  v1::ClusterMap four = PlanAddNode(map, Members({"a", "b", "c", "d"}), "d").value();
  EXPECT_EQ(PlanRebalance(four)->map.DebugString(), PlanRebalance(four)->map.DebugString());
}

TEST(ControllerMigrationPlanTest, RebalanceRefusedWhileMigratingOrAShardIsDown) {
  v1::ClusterMap map = PlanAddNode(Settled({"a", "b"}), Members({"a", "b", "c"}), "c").value();
  v1::ClusterMap queued = map;
  *queued.add_migrations() = Migration(0, 0, 9, 0, 2);
  absl::Status s = PlanRebalance(queued).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("queued or running"));
  v1::ClusterMap down = map;
  down.mutable_shards(1)->clear_replicas();
  s = PlanRebalance(down).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("down"));
}

TEST(ControllerMigrationPlanTest, PlanNextStartsOnlyTheFirstPendingWhenNothingRuns) {
  v1::ClusterMap map =
      PlanAddNode(Settled({"a", "b", "c"}), Members({"a", "b", "c", "d"}), "d").value();
  MemberSet members = Members({"a", "b", "c", "d"});
  RebalancePlan plan = PlanRebalance(map).value();
  ASSERT_EQ(plan.planned.size(), 3u);
  std::optional<PlanStep> step = PlanNext(plan.map, members, NoSeqs());
  ASSERT_TRUE(step.has_value());
  ExpectValid(step->map);
  EXPECT_EQ(step->map.epoch(), plan.map.epoch() + 1);
  EXPECT_EQ(step->map.migrations(0).state(), v1::MIGRATION_COPYING);
  EXPECT_EQ(step->map.migrations(1).state(), v1::MIGRATION_PENDING);
  EXPECT_EQ(step->map.migrations(2).state(), v1::MIGRATION_PENDING);
  EXPECT_THAT(step->what, HasSubstr("started migration 0"));
  // Running (COPYING, then HANDOFF as the source writes it): nothing more.
  EXPECT_FALSE(PlanNext(step->map, members, NoSeqs()).has_value());
  step->map.mutable_migrations(0)->set_state(v1::MIGRATION_HANDOFF);
  EXPECT_FALSE(PlanNext(step->map, members, NoSeqs()).has_value());
  // The flip removed migration 0: the next one starts.
  v1::ClusterMap flipped = step->map;
  flipped.mutable_migrations()->erase(flipped.mutable_migrations()->begin());
  std::optional<PlanStep> second = PlanNext(flipped, members, NoSeqs());
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->map.migrations(0).id(), 1u);
  EXPECT_EQ(second->map.migrations(0).state(), v1::MIGRATION_COPYING);
}

TEST(ControllerMigrationPlanTest, PlanNextDropsAMigrationWithADownShard) {
  // R = 1, so killing a shard's only node takes it down.
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 1, "test");
  *map.add_migrations() = Migration(0, 0, 9, 0, 1, v1::MIGRATION_COPYING);
  *map.add_migrations() = Migration(1, 5461, 5470, 1, 2);
  *map.add_migrations() = Migration(2, 16000, 16383, 2, 0);
  map.set_next_migration_id(3);
  MemberSet members = Members({"a", "c", "x"});  // b (shard 1) died
  std::optional<PlanStep> down = PlanNext(map, members, NoSeqs());
  ASSERT_TRUE(down.has_value());
  EXPECT_TRUE(down->map.shards(1).replicas().empty());
  EXPECT_EQ(down->map.migrations_size(), 3);  // step 1 only takes b out
  std::optional<PlanStep> drop = PlanNext(down->map, members, NoSeqs());
  ASSERT_TRUE(drop.has_value());
  ExpectValid(drop->map);
  ASSERT_EQ(drop->map.migrations_size(), 1);
  EXPECT_EQ(drop->map.migrations(0).id(), 2u);
  EXPECT_EQ(drop->map.next_migration_id(), 3u);
  EXPECT_THAT(drop->what, HasSubstr("0 1"));
  // The down shard stays down (never refilled empty: x stays spare), and
  // migration 2, between two live shards, starts: nothing else runs.
  std::optional<PlanStep> start = PlanNext(drop->map, members, NoSeqs());
  ASSERT_TRUE(start.has_value());
  EXPECT_TRUE(start->map.shards(1).replicas().empty());
  EXPECT_EQ(start->map.migrations(0).state(), v1::MIGRATION_COPYING);
}

TEST(ControllerMigrationPlanTest, FailoverOfTheSourcePrimaryKeepsTheMigration) {
  v1::ClusterMap map = Settled({"a", "b", "c"});
  *map.add_migrations() = Migration(4, 5000, 5460, 0, 1, v1::MIGRATION_HANDOFF);
  map.set_next_migration_id(5);
  MemberSet members = Members({"b", "c"});  // a, shard 0's primary, died
  std::optional<PlanStep> step = PlanNext(map, members, NoSeqs());
  ASSERT_TRUE(step.has_value());
  ExpectValid(step->map);
  EXPECT_THAT(Replicas(step->map.shards(0)), ElementsAre("b"));
  ASSERT_EQ(step->map.migrations_size(), 1);
  EXPECT_EQ(step->map.migrations(0).DebugString(), map.migrations(0).DebugString());
  // A manual failover keeps it as well.
  absl::StatusOr<v1::ClusterMap> manual =
      PlanFailover(map, Members({"a", "b", "c"}), 0, "b", NoSeqs());
  ASSERT_TRUE(manual.ok()) << manual.status();
  ExpectValid(*manual);
  EXPECT_EQ(manual->migrations(0).DebugString(), map.migrations(0).DebugString());
}

TEST(ControllerMigrationPlanTest, PendingWithoutPrimariesIsNotStarted) {
  v1::ClusterMap map = Settled({"a", "b", "c"});
  *map.add_migrations() = Migration(0, 0, 9, 0, 1);
  *map.add_migrations() = Migration(1, 16000, 16383, 2, 0);
  map.mutable_shards(1)->clear_replicas();  // down, as a map read mid-way
  map.mutable_shards(1)->clear_syncing();
  // Dropping comes first...
  std::optional<PlanStep> step = PlanNext(map, Members({"a", "b", "c"}), NoSeqs());
  ASSERT_TRUE(step.has_value());
  ASSERT_EQ(step->map.migrations_size(), 1);
  EXPECT_EQ(step->map.migrations(0).id(), 1u);
  EXPECT_EQ(step->map.migrations(0).state(), v1::MIGRATION_PENDING);
}

// The target accepted the handoff (or may have) and acknowledged writes of
// the slots; then it lost every replica. Handing the slots back to the
// source would serve its data as of the handoff: the migration stays, so
// the slots answer CLUSTERDOWN (routing) until the target is back.
TEST(ControllerMigrationPlanTest, AHandoffWhoseTargetIsDownIsKept) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 1, "test");
  *map.add_migrations() = Migration(0, 0, 9, 0, 1, v1::MIGRATION_HANDOFF);
  map.set_next_migration_id(1);
  MemberSet members = Members({"a", "c"});  // b (shard 1, the target) died
  std::optional<PlanStep> down = PlanNext(map, members, NoSeqs());
  ASSERT_TRUE(down.has_value());
  ASSERT_TRUE(down->map.shards(1).replicas().empty());
  v1::ClusterMap current = down->map;
  for (int i = 0; i < 5; ++i) {
    std::optional<PlanStep> next = PlanNext(current, members, NoSeqs());
    if (!next.has_value()) break;
    ExpectValid(next->map);
    ASSERT_EQ(next->map.migrations_size(), 1) << next->what;
    EXPECT_EQ(next->map.migrations(0).state(), v1::MIGRATION_HANDOFF);
    EXPECT_EQ(next->map.shards(0).slots(0).start(), 0u) << "the slots stay the source's";
    current = next->map;
  }
}

// The source lost every replica during HANDOFF. The target holds every
// acknowledged write of the slots (the copy was complete and the source
// refuses the slots' writes in HANDOFF), so the controller flips.
TEST(ControllerMigrationPlanTest, AHandoffWhoseSourceIsDownIsFlipped) {
  v1::ClusterMap map = MakeFirstMap(Members({"a", "b", "c"}), 1, "test");
  *map.add_migrations() = Migration(0, 0, 9, 0, 1, v1::MIGRATION_HANDOFF);
  map.set_next_migration_id(1);
  MemberSet members = Members({"b", "c"});  // a (shard 0, the source) died
  std::optional<PlanStep> down = PlanNext(map, members, NoSeqs());
  ASSERT_TRUE(down.has_value());
  ASSERT_TRUE(down->map.shards(0).replicas().empty());
  std::optional<PlanStep> flip = PlanNext(down->map, members, NoSeqs());
  ASSERT_TRUE(flip.has_value());
  ExpectValid(flip->map);
  EXPECT_EQ(flip->map.migrations_size(), 0);
  EXPECT_EQ(flip->map.epoch(), down->map.epoch() + 1);
  EXPECT_EQ(cluster::ClusterMapView::Build(flip->map).value()->ShardForSlot(5)->shard_id(), 1u);
  EXPECT_EQ(cluster::ClusterMapView::Build(flip->map).value()->ShardForSlot(10)->shard_id(), 0u);
  EXPECT_GT(flip->map.shards(1).shard_epoch(), down->map.shards(1).shard_epoch());
  EXPECT_GT(flip->map.shards(0).shard_epoch(), down->map.shards(0).shard_epoch());
  EXPECT_THAT(flip->what, HasSubstr("flipped"));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
