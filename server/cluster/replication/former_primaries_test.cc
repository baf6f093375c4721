// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/former_primaries.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/storage/manual_clock.h"

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

constexpr absl::Duration kNothing = -absl::InfiniteDuration();

TEST(FormerPrimariesTest, DroppingTheDemotedPrimaryHoldsWritesForOneLease) {
  ManualClock clock;
  FormerPrimaries f("a", absl::Seconds(3), &clock);
  f.Observe(Map(1, {"b", "a"}));        // b leads
  f.Observe(Map(2, {"a", "b"}));        // manual failover: a leads, b demoted
  EXPECT_EQ(f.HoldUntil(0), kNothing);  // b still gets every write
  clock.Advance(absl::Seconds(1));
  f.Dropped(0, Node("b"));
  const absl::Duration until = f.HoldUntil(0);
  EXPECT_EQ(until, clock.Steady() + absl::Seconds(3));
  // A second drop (a concurrent write that also saw b fail) does not
  // extend it.
  clock.Advance(absl::Seconds(1));
  f.Dropped(0, Node("b"));
  EXPECT_EQ(f.HoldUntil(0), until);
}

// Two failovers within one lease TTL (b -> c -> a): b may be frozen with
// the oldest map and still trusted by one-sided readers of that map, so
// dropping b holds writes too, not only dropping c.
TEST(FormerPrimariesTest, EveryPrimaryOfTheLastLeaseIsRemembered) {
  ManualClock clock;
  FormerPrimaries f("a", absl::Seconds(3), &clock);
  f.Observe(Map(1, {"b", "c", "a"}));  // b leads
  f.Observe(Map(2, {"c", "b", "a"}));  // c leads
  clock.Advance(absl::Seconds(1));
  f.Observe(Map(3, {"a", "c", "b"}));  // a leads
  f.Dropped(0, Node("b"));
  EXPECT_EQ(f.HoldUntil(0), clock.Steady() + absl::Seconds(3));
}

// One lease TTL after this node saw b replaced, b's own lease deadline has
// passed: dropping it then holds nothing.
TEST(FormerPrimariesTest, APrimaryReplacedMoreThanALeaseAgoHoldsNothing) {
  ManualClock clock;
  FormerPrimaries f("a", absl::Seconds(3), &clock);
  f.Observe(Map(1, {"b", "a"}));
  f.Observe(Map(2, {"a", "b"}));
  clock.Advance(absl::Seconds(3));
  f.Dropped(0, Node("b"));
  EXPECT_EQ(f.HoldUntil(0), kNothing);
  EXPECT_FALSE(f.AwaitHold(0));
}

// The hold is on the steady clock: a step of the wall clock (NTP, an
// operator) does not end it early.
TEST(FormerPrimariesTest, AWallClockStepDoesNotShortenTheHold) {
  ManualClock clock;
  FormerPrimaries f("a", absl::Seconds(3), &clock);
  f.Observe(Map(1, {"b", "a"}));
  f.Observe(Map(2, {"a", "b"}));
  f.Dropped(0, Node("b"));
  const absl::Duration until = f.HoldUntil(0);
  clock.StepWall(absl::Hours(1));
  EXPECT_EQ(f.HoldUntil(0), until);
  EXPECT_GT(until, clock.Steady());
}

TEST(FormerPrimariesTest, OtherDropsAndRestartsHoldNothing) {
  ManualClock clock;
  FormerPrimaries f("a", absl::Seconds(3), &clock);
  f.Observe(Map(1, {"b", "a", "c"}));
  f.Observe(Map(2, {"a", "b", "c"}));
  f.Dropped(0, Node("c"));  // c never led the shard
  EXPECT_EQ(f.HoldUntil(0), kNothing);
  f.Dropped(0, Node("b", 7));  // b restarted since: a new, empty incarnation
  EXPECT_EQ(f.HoldUntil(0), kNothing);
  f.Dropped(1, Node("b"));  // no such shard
  EXPECT_EQ(f.HoldUntil(1), kNothing);
}

TEST(FormerPrimariesTest, FirstMapAndLosingTheShardRememberNothing) {
  ManualClock clock;
  FormerPrimaries f("a", absl::Seconds(3), &clock);
  f.Observe(Map(5, {"a", "b"}));  // first map seen: nobody was replaced
  f.Dropped(0, Node("b"));
  EXPECT_EQ(f.HoldUntil(0), kNothing);

  FormerPrimaries g("a", absl::Seconds(3), &clock);
  g.Observe(Map(1, {"b", "a"}));
  g.Observe(Map(2, {"a", "b"}));
  g.Observe(Map(3, {"b", "a"}));  // b leads again: a holds nothing for it
  g.Dropped(0, Node("b"));
  EXPECT_EQ(g.HoldUntil(0), kNothing);
  // An older map than the newest seen is ignored.
  g.Observe(Map(2, {"a", "b"}));
  g.Dropped(0, Node("b"));
  EXPECT_EQ(g.HoldUntil(0), kNothing);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
