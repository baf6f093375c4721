// Copyright 2026 The kvstore Authors.

#include "server/cluster/controller/departures.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

v1::ClusterNode Node(const std::string& id, uint64_t incarnation) {
  v1::ClusterNode n;
  n.set_node_id(id);
  n.set_incarnation(incarnation);
  return n;
}

// Shard 0 led by a, backed by b; both at incarnation 1.
v1::ClusterMap Map() {
  v1::ClusterMap map;
  map.set_epoch(1);
  v1::Shard* shard = map.add_shards();
  shard->set_shard_id(0);
  shard->add_replicas("a");
  shard->add_replicas("b");
  *map.add_nodes() = Node("a", 1);
  *map.add_nodes() = Node("b", 1);
  return map;
}

constexpr absl::Duration kTtl = absl::Seconds(3);
const absl::Duration kT0 = absl::Seconds(100);

TEST(DeparturesTest, AGoneNodeStaysAliveForOneTtlFromWhenItWasSeenGone) {
  Departures d(kTtl);
  MemberSet members{{"a", Node("a", 1)}, {"b", Node("b", 1)}};
  EXPECT_EQ(d.Settle(Map(), members, kT0).size(), 2u);
  EXPECT_EQ(d.NextDue(kT0), absl::InfiniteDuration());
  members.erase("a");
  MemberSet settled = d.Settle(Map(), members, kT0 + absl::Seconds(1));
  EXPECT_TRUE(IsAliveIn(Map(), settled, "a"));
  EXPECT_EQ(d.NextDue(kT0 + absl::Seconds(1)), kT0 + absl::Seconds(4));
  // Seen gone at kT0 + 1s: not the first look that counts, but that one.
  settled = d.Settle(Map(), members, kT0 + absl::Seconds(3));
  EXPECT_TRUE(IsAliveIn(Map(), settled, "a"));
  settled = d.Settle(Map(), members, kT0 + absl::Seconds(4));
  EXPECT_FALSE(IsAliveIn(Map(), settled, "a"));
  EXPECT_EQ(d.NextDue(kT0 + absl::Seconds(4)), absl::InfiniteDuration());
}

TEST(DeparturesTest, ANewIncarnationCountsAsADepartureOfTheOldOne) {
  Departures d(kTtl);
  MemberSet members{{"a", Node("a", 1)}, {"b", Node("b", 7)}};
  MemberSet settled = d.Settle(Map(), members, kT0);
  EXPECT_TRUE(IsAliveIn(Map(), settled, "b"));
  EXPECT_EQ(settled.at("b").incarnation(), 1u);
  settled = d.Settle(Map(), members, kT0 + kTtl);
  EXPECT_FALSE(IsAliveIn(Map(), settled, "b"));
  EXPECT_EQ(settled.at("b").incarnation(), 7u);
}

// The same process registered again after its lease lapsed (its member key
// has a new incarnation, its process_id the map's): no departure, no timer.
// The controller rewrites its record (PlanNext step 0); a timer started for
// the old incarnation would otherwise fire against the new one and take
// every role from a node that never lost its memory.
TEST(DeparturesTest, TheSameProcessBackFromALeaseLapseIsNoDeparture) {
  Departures d(kTtl);
  v1::ClusterMap map = Map();
  map.mutable_nodes(1)->set_process_id("pb");
  v1::ClusterNode back = Node("b", 7);
  back.set_process_id("pb");
  MemberSet members{{"a", Node("a", 1)}, {"b", back}};
  MemberSet settled = d.Settle(map, members, kT0);
  EXPECT_EQ(settled.at("b").incarnation(), 7u);
  EXPECT_TRUE(IsRejoin(map, settled, "b"));
  EXPECT_EQ(d.NextDue(kT0), absl::InfiniteDuration());
  // Another process (restarted, empty) is a departure as before.
  members["b"].set_process_id("other");
  settled = d.Settle(map, members, kT0 + absl::Seconds(1));
  EXPECT_EQ(settled.at("b").incarnation(), 1u);
  EXPECT_EQ(d.NextDue(kT0 + absl::Seconds(1)), kT0 + absl::Seconds(4));
}

TEST(DeparturesTest, ANodeNoLongerNamedIsForgotten) {
  Departures d(kTtl);
  MemberSet members{{"b", Node("b", 1)}};
  d.Settle(Map(), members, kT0);
  v1::ClusterMap without_a = Map();
  without_a.mutable_shards(0)->clear_replicas();
  without_a.mutable_shards(0)->add_replicas("b");
  without_a.mutable_nodes()->DeleteSubrange(0, 1);
  d.Settle(without_a, members, kT0 + absl::Seconds(1));
  EXPECT_EQ(d.NextDue(kT0 + absl::Seconds(1)), absl::InfiniteDuration());
}

}  // namespace
}  // namespace server
}  // namespace kvstore
