// Copyright 2026 The kvstore Authors.

#include "common/cluster/cluster_map.h"

#include "gtest/gtest.h"

namespace kvstore {
namespace cluster {
namespace {

v1::ClusterMap ThreeShards() {
  v1::ClusterMap map;
  map.set_epoch(7);
  map.set_replication_factor(2);
  const char* ids[] = {"a", "b", "c"};
  for (const char* id : ids) {
    v1::ClusterNode* n = map.add_nodes();
    n->set_node_id(id);
    n->set_control_address(std::string("127.0.0.1:") + id);
  }
  std::vector<v1::SlotRange> ranges = EvenSlotRanges(3);
  for (uint32_t i = 0; i < 3; ++i) {
    v1::Shard* s = map.add_shards();
    s->set_shard_id(i);
    *s->add_slots() = ranges[i];
    s->add_replicas(ids[i]);
    s->add_replicas(ids[(i + 1) % 3]);
  }
  return map;
}

TEST(EvenSlotRanges, CoverEverySlotInOrderAsRedisSplitsThem) {
  std::vector<v1::SlotRange> r = EvenSlotRanges(3);
  ASSERT_EQ(r.size(), 3u);
  // redis-cli --cluster create splits 3 ways as 0-5460, 5461-10922, 10923-16383.
  EXPECT_EQ(r[0].start(), 0u);
  EXPECT_EQ(r[0].end(), 5460u);
  EXPECT_EQ(r[1].start(), 5461u);
  EXPECT_EQ(r[1].end(), 10922u);
  EXPECT_EQ(r[2].start(), 10923u);
  EXPECT_EQ(r[2].end(), 16383u);
  EXPECT_EQ(EvenSlotRanges(1)[0].end(), kSlotCount - 1);
}

TEST(ClusterMapView, RoutesKeysToTheirShardAndPrimary) {
  auto view = ClusterMapView::Build(ThreeShards());
  ASSERT_TRUE(view.ok()) << view.status();
  const v1::Shard* s = (*view)->ShardForKey("foo");  // slot 12182
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->shard_id(), 2u);
  EXPECT_EQ((*view)->Primary(*s)->node_id(), "c");
  EXPECT_EQ((*view)->ShardsLedBy("a").size(), 1u);
  EXPECT_EQ((*view)->ShardsBackedBy("a").size(), 1u);
  EXPECT_EQ((*view)->ShardsBackedBy("a")[0]->shard_id(), 2u);
  EXPECT_EQ(FormatSlotRanges(*(*view)->ShardById(1)), "5461-10922");
  EXPECT_EQ((*view)->Node("zz"), nullptr);
}

TEST(ClusterMapView, RefusesGapsOverlapsAndUnknownNodes) {
  v1::ClusterMap gap = ThreeShards();
  gap.mutable_shards(2)->mutable_slots(0)->set_end(16000);
  EXPECT_EQ(ClusterMapView::Build(gap).status().message(), "cluster map: slot 16001 has no shard");

  v1::ClusterMap overlap = ThreeShards();
  overlap.mutable_shards(1)->mutable_slots(0)->set_start(5000);
  EXPECT_EQ(ClusterMapView::Build(overlap).status().message(),
            "cluster map: slot 5000 is in two shards");

  v1::ClusterMap unknown = ThreeShards();
  unknown.mutable_shards(0)->add_syncing("ghost");
  EXPECT_EQ(ClusterMapView::Build(unknown).status().message(),
            "cluster map: shard 0 names unknown node ghost");

  v1::ClusterMap twice = ThreeShards();
  twice.mutable_shards(0)->add_syncing("b");
  EXPECT_FALSE(ClusterMapView::Build(twice).ok());

  v1::ClusterMap range = ThreeShards();
  range.mutable_shards(2)->mutable_slots(0)->set_end(kSlotCount);
  EXPECT_FALSE(ClusterMapView::Build(range).ok());
}

TEST(ClusterMapView, ADownShardHasNoPrimary) {
  v1::ClusterMap map = ThreeShards();
  map.mutable_shards(0)->clear_replicas();
  auto view = ClusterMapView::Build(map);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ((*view)->Primary(*(*view)->ShardById(0)), nullptr);
}

v1::Migration* AddMigration(v1::ClusterMap* map, uint32_t id, uint32_t start, uint32_t end,
                            uint32_t from, uint32_t to, v1::MigrationState state) {
  v1::Migration* m = map->add_migrations();
  m->set_id(id);
  m->mutable_slots()->set_start(start);
  m->mutable_slots()->set_end(end);
  m->set_source_shard(from);
  m->set_target_shard(to);
  m->set_state(state);
  return m;
}

TEST(ClusterMapView, FindsTheRunningMigrationOfASlot) {
  v1::ClusterMap map = ThreeShards();
  AddMigration(&map, 7, 100, 199, 0, 1, v1::MIGRATION_COPYING);
  AddMigration(&map, 8, 200, 299, 0, 2, v1::MIGRATION_PENDING);
  auto view = ClusterMapView::Build(map);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_NE((*view)->ActiveMigrationForSlot(150), nullptr);
  EXPECT_EQ((*view)->ActiveMigrationForSlot(150)->id(), 7u);
  EXPECT_EQ((*view)->ActiveMigrationForSlot(250), nullptr);  // pending changes nothing
  EXPECT_EQ((*view)->ActiveMigrationForSlot(99), nullptr);
  EXPECT_EQ((*view)->MigrationById(8)->target_shard(), 2u);
  // The slot still belongs to its source until the flip.
  EXPECT_EQ((*view)->ShardForSlot(150)->shard_id(), 0u);
}

TEST(ClusterMapView, RefusesBadMigrations) {
  v1::ClusterMap two_running = ThreeShards();
  AddMigration(&two_running, 1, 0, 9, 0, 1, v1::MIGRATION_COPYING);
  AddMigration(&two_running, 2, 10, 19, 0, 2, v1::MIGRATION_HANDOFF);
  EXPECT_EQ(ClusterMapView::Build(two_running).status().message(),
            "cluster map: migration 2: two migrations are running");

  v1::ClusterMap not_source = ThreeShards();
  AddMigration(&not_source, 1, 6000, 6001, 0, 2, v1::MIGRATION_PENDING);  // shard 1's slots
  EXPECT_EQ(ClusterMapView::Build(not_source).status().message(),
            "cluster map: migration 1: slot 6000 is not its source shard's");

  v1::ClusterMap overlap = ThreeShards();
  AddMigration(&overlap, 1, 0, 9, 0, 1, v1::MIGRATION_PENDING);
  AddMigration(&overlap, 2, 5, 19, 0, 2, v1::MIGRATION_PENDING);
  EXPECT_FALSE(ClusterMapView::Build(overlap).ok());

  v1::ClusterMap to_itself = ThreeShards();
  AddMigration(&to_itself, 1, 0, 9, 0, 0, v1::MIGRATION_PENDING);
  EXPECT_FALSE(ClusterMapView::Build(to_itself).ok());

  v1::ClusterMap no_state = ThreeShards();
  AddMigration(&no_state, 1, 0, 9, 0, 1, v1::MIGRATION_STATE_UNSPECIFIED);
  EXPECT_FALSE(ClusterMapView::Build(no_state).ok());
}

TEST(MoveSlots, SplitsTheSourceAndMergesTheTarget) {
  v1::Shard from;
  v1::SlotRange* r = from.add_slots();
  r->set_start(0);
  r->set_end(99);
  v1::Shard to;
  r = to.add_slots();
  r->set_start(100);
  r->set_end(199);
  v1::SlotRange middle;
  middle.set_start(40);
  middle.set_end(59);
  MoveSlots(middle, &from, &to);
  EXPECT_EQ(FormatSlotRanges(from), "0-39,60-99");
  EXPECT_EQ(FormatSlotRanges(to), "40-59,100-199");
  v1::SlotRange tail;
  tail.set_start(60);
  tail.set_end(99);
  MoveSlots(tail, &from, &to);
  EXPECT_EQ(FormatSlotRanges(from), "0-39");
  EXPECT_EQ(FormatSlotRanges(to), "40-199");
  EXPECT_EQ(SlotCountOf(to), 160u);
}

}  // namespace
}  // namespace cluster
}  // namespace kvstore
