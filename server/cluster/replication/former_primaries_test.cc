// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/former_primaries.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

// A one-shard map led by replicas[0]; nodes a, b, c at incarnation 1 (b at
// `b_incarnation`).
const cluster::ClusterMapView& Map(uint64_t epoch, const std::vector<std::string>& replicas,
                                   uint64_t b_incarnation = 1) {
  v1::ClusterMap map;
  map.set_epoch(epoch);
  map.set_replication_factor(2);
  v1::Shard* shard = map.add_shards();
  shard->set_shard_id(0);
  shard->set_shard_epoch(epoch);
  v1::SlotRange* range = shard->add_slots();
  range->set_start(0);
  range->set_end(16383);
  for (const std::string& id : replicas) shard->add_replicas(id);
  for (const char* id : {"a", "b", "c"}) {
    v1::ClusterNode* node = map.add_nodes();
    node->set_node_id(id);
    node->set_incarnation(std::string(id) == "b" ? b_incarnation : 1);
  }
  auto view = cluster::ClusterMapView::Build(map);
  EXPECT_TRUE(view.ok()) << view.status();
  // Kept alive for the test's duration: Observe takes a reference.
  static std::vector<std::shared_ptr<const cluster::ClusterMapView>> kept;
  kept.push_back(*view);
  return *kept.back();
}

v1::ClusterNode Node(const std::string& id, uint64_t incarnation = 1) {
  v1::ClusterNode n;
  n.set_node_id(id);
  n.set_incarnation(incarnation);
  return n;
}

TEST(FormerPrimariesTest, DroppingTheDemotedPrimaryHoldsWritesForOneLease) {
  FormerPrimaries f("a", absl::Seconds(3));
  f.Observe(Map(1, {"b", "a"}));                    // b leads
  f.Observe(Map(2, {"a", "b"}));                    // manual failover: a leads, b demoted
  EXPECT_EQ(f.HoldUntil(0), absl::InfinitePast());  // b still gets every write
  const absl::Time before = absl::Now();
  f.Dropped(0, Node("b"));
  const absl::Time until = f.HoldUntil(0);
  EXPECT_GE(until, before + absl::Seconds(3));
  EXPECT_LE(until, absl::Now() + absl::Seconds(3));
  // A second drop (a concurrent write that also saw b fail) does not
  // extend it.
  f.Dropped(0, Node("b"));
  EXPECT_EQ(f.HoldUntil(0), until);
}

TEST(FormerPrimariesTest, OtherDropsAndRestartsHoldNothing) {
  FormerPrimaries f("a", absl::Seconds(3));
  f.Observe(Map(1, {"b", "a", "c"}));
  f.Observe(Map(2, {"a", "b", "c"}));
  f.Dropped(0, Node("c"));  // c never led the shard
  EXPECT_EQ(f.HoldUntil(0), absl::InfinitePast());
  f.Dropped(0, Node("b", 7));  // b restarted since: a new, empty incarnation
  EXPECT_EQ(f.HoldUntil(0), absl::InfinitePast());
  f.Dropped(1, Node("b"));  // no such shard
  EXPECT_EQ(f.HoldUntil(1), absl::InfinitePast());
}

TEST(FormerPrimariesTest, FirstMapAndLosingTheShardRememberNothing) {
  FormerPrimaries f("a", absl::Seconds(3));
  f.Observe(Map(5, {"a", "b"}));  // first map seen: nobody was replaced
  f.Dropped(0, Node("b"));
  EXPECT_EQ(f.HoldUntil(0), absl::InfinitePast());

  FormerPrimaries g("a", absl::Seconds(3));
  g.Observe(Map(1, {"b", "a"}));
  g.Observe(Map(2, {"a", "b"}));
  g.Observe(Map(3, {"b", "a"}));  // b leads again: a forgets
  g.Dropped(0, Node("b"));
  EXPECT_EQ(g.HoldUntil(0), absl::InfinitePast());
  // An older map than the newest seen is ignored.
  g.Observe(Map(2, {"a", "b"}));
  g.Dropped(0, Node("b"));
  EXPECT_EQ(g.HoldUntil(0), absl::InfinitePast());
}

}  // namespace
}  // namespace server
}  // namespace kvstore
