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
