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

}  // namespace
}  // namespace cluster
}  // namespace kvstore
