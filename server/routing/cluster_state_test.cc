// Copyright 2026 The kvstore Authors.

#include "server/routing/cluster_state.h"

#include <string>
#include <vector>

#include "common/cluster/refusal.h"
#include "gtest/gtest.h"
#include "server/routing/fence_page.h"

namespace kvstore {
namespace server {
namespace {

std::shared_ptr<const cluster::ClusterMapView> TwoShards(uint64_t epoch, uint64_t incarnation = 1) {
  v1::ClusterMap map;
  map.set_epoch(epoch);
  for (const char* id : {"a", "b"}) {
    v1::ClusterNode* n = map.add_nodes();
    n->set_node_id(id);
    n->set_incarnation(incarnation);
    n->set_resp_address(std::string("host-") + id + ":6380");
  }
  auto ranges = cluster::EvenSlotRanges(2);
  for (uint32_t i = 0; i < 2; ++i) {
    v1::Shard* s = map.add_shards();
    s->set_shard_id(i);
    *s->add_slots() = ranges[i];
    s->add_replicas(i == 0 ? "a" : "b");
    s->add_replicas(i == 0 ? "b" : "a");
  }
  return *cluster::ClusterMapView::Build(map);
}

// Shard 1 led by `shard1_primary` ("a" or "b"), the other its backup.
std::shared_ptr<const cluster::ClusterMapView> Shard1LedBy(uint64_t epoch,
                                                           const std::string& shard1_primary) {
  v1::ClusterMap map = TwoShards(epoch)->proto();
  map.mutable_shards(1)->set_replicas(0, shard1_primary);
  map.mutable_shards(1)->set_replicas(1, shard1_primary == "a" ? "b" : "a");
  return *cluster::ClusterMapView::Build(map);
}

// A shard this node starts to lead is held from the install itself: the
// map's listeners (and any request routed on the map) already see the hold,
// and the fence epoch is 0 until the hold is released.
TEST(ClusterState, AHoldOfANewLeadBeginsWithItsInstall) {
  ClusterState state("a");
  state.HoldNewLeads();
  int released = 0;
  state.AddHoldListener([&] { ++released; });
  std::vector<Route::Kind> seen;  // "foo" (shard 1), as each listener routes it
  std::vector<uint64_t> fence;
  state.AddListener([&](const cluster::ClusterMapView&) {
    seen.push_back(state.RouteKey("foo").kind);
    fence.push_back(state.FenceEpoch());
  });
  ASSERT_TRUE(state.Update(Shard1LedBy(1, "a")));  // the first map holds nothing
  EXPECT_EQ(state.RouteKey("foo").kind, Route::Kind::kServe);
  ASSERT_TRUE(state.Update(Shard1LedBy(2, "b")));
  ASSERT_TRUE(state.Update(Shard1LedBy(3, "a")));  // a leads shard 1 again
  EXPECT_EQ(seen, (std::vector<Route::Kind>{Route::Kind::kServe, Route::Kind::kMoved,
                                            Route::Kind::kReconciling}));
  EXPECT_EQ(fence, (std::vector<uint64_t>{1, 2, 0}));
  const Route held = state.RouteKey("foo");
  EXPECT_EQ(held.shard->shard_id(), 1u);
  const cluster::Refusal refusal = RouteRefusal(held, RefusalAddress::kResp);
  EXPECT_EQ(refusal.kind, cluster::RefusalKind::kTryAgain);
  EXPECT_EQ(refusal.effect, cluster::Effect::kNone);
  EXPECT_EQ(state.RouteKey("bar").kind, Route::Kind::kServe);  // shard 0: led all along
  // A backup's reads (dirty by contract) are not held.
  ClusterState backup("b");
  backup.HoldNewLeads();
  ASSERT_TRUE(backup.Update(Shard1LedBy(1, "a")));
  ASSERT_TRUE(backup.Update(Shard1LedBy(2, "b")));  // b newly leads shard 1, backs up shard 0
  EXPECT_EQ(backup.RouteKey("bar", /*replica_ok=*/true).kind, Route::Kind::kServe);
  EXPECT_EQ(backup.RouteKey("foo", /*replica_ok=*/true).kind, Route::Kind::kReconciling);

  ASSERT_TRUE(state.Update(Shard1LedBy(4, "a")));  // the same lead goes on: still held
  EXPECT_EQ(state.RouteKey("foo").kind, Route::Kind::kReconciling);
  state.ReleaseHold(1, 2);  // reconciled on a map before this lead began: not this lead
  EXPECT_EQ(state.RouteKey("foo").kind, Route::Kind::kReconciling);
  EXPECT_EQ(released, 0);
  state.ReleaseHold(1, 3);
  EXPECT_EQ(state.RouteKey("foo").kind, Route::Kind::kServe);
  EXPECT_EQ(state.FenceEpoch(), 4u);
  EXPECT_EQ(released, 1);
  ASSERT_TRUE(state.Update(Shard1LedBy(5, "a")));
  EXPECT_EQ(state.RouteKey("foo").kind, Route::Kind::kServe);
}

// Without HoldNewLeads (no reconciler runs) nothing is held.
TEST(ClusterState, NoHoldsUnlessAsked) {
  ClusterState state("a");
  ASSERT_TRUE(state.Update(Shard1LedBy(1, "b")));
  ASSERT_TRUE(state.Update(Shard1LedBy(2, "a")));
  EXPECT_EQ(state.RouteKey("foo").kind, Route::Kind::kServe);
  EXPECT_EQ(state.FenceEpoch(), 2u);
}

TEST(ClusterState, RoutesToThePrimaryAndRedirectsTheRest) {
  ClusterState state("a");
  EXPECT_EQ(state.RouteKey("foo").kind, Route::Kind::kNotReady);
  ASSERT_TRUE(state.Update(TwoShards(3)));
  EXPECT_EQ(state.RouteKey("bar").kind, Route::Kind::kServe);  // slot 5061: shard 0
  Route moved = state.RouteKey("foo");                         // slot 12182: shard 1
  EXPECT_EQ(moved.kind, Route::Kind::kMoved);
  EXPECT_EQ(moved.slot, 12182u);
  EXPECT_EQ(moved.node->resp_address(), "host-b:6380");
  EXPECT_EQ(state.RouteKey("foo", /*replica_ok=*/true).kind, Route::Kind::kServe);
}

TEST(ClusterState, KeepsTheNewestMapAndTellsListeners) {
  ClusterState state("a");
  uint64_t seen = 0;
  state.AddListener([&](const cluster::ClusterMapView& m) { seen = m.epoch(); });
  EXPECT_TRUE(state.Update(TwoShards(5)));
  EXPECT_FALSE(state.Update(TwoShards(4)));
  EXPECT_FALSE(state.Update(TwoShards(5)));
  EXPECT_EQ(seen, 5u);
  EXPECT_EQ(state.map_epoch(), 5u);
}

TEST(ClusterState, AFencedNodeServesNothing) {
  ClusterState state("a");
  state.Update(TwoShards(1));
  state.set_fenced(true);
  EXPECT_EQ(state.RouteKey("bar").kind, Route::Kind::kNotReady);
  state.set_fenced(false);
  EXPECT_EQ(state.RouteKey("bar").kind, Route::Kind::kServe);
  state.set_lease_deadline(std::chrono::steady_clock::now() - std::chrono::milliseconds(1));
  EXPECT_FALSE(state.Serving());
  EXPECT_EQ(state.RouteKey("bar").kind, Route::Kind::kNotReady);
}

// Restarted before its old lease expired: the map still names the earlier,
// now lost, life of "a"; this empty process must serve none of its shards
// (it did: reads of acknowledged keys answered "not found").
TEST(ClusterState, ARestartedNodeDoesNotServeItsEarlierLife) {
  ClusterState state("a");
  state.set_incarnation(7);
  ASSERT_TRUE(state.Update(TwoShards(1, /*incarnation=*/6)));
  EXPECT_TRUE(state.NamesEarlierSelf(*state.map()));
  EXPECT_EQ(state.RouteKey("bar").kind, Route::Kind::kNotReady);  // led by a
  EXPECT_EQ(state.RouteKey("foo", /*replica_ok=*/true).kind, Route::Kind::kNotReady);
  EXPECT_EQ(state.RouteKey("foo").kind, Route::Kind::kMoved);  // b's: still redirected
  // Once the map names this incarnation, it serves.
  ASSERT_TRUE(state.Update(TwoShards(2, /*incarnation=*/7)));
  EXPECT_FALSE(state.NamesEarlierSelf(*state.map()));
  EXPECT_EQ(state.RouteKey("bar").kind, Route::Kind::kServe);
}

// Registered again after a lease lapse, the same process: the earlier
// incarnation's copies are its memory (NamesOtherProcess false) though it
// serves none of them until the map names this incarnation. Another
// process, or one whose id is unknown, is a restart.
TEST(ClusterState, AnEarlierIncarnationOfTheSameProcessIsNotAnotherProcess) {
  ClusterState state("a");
  state.set_incarnation(7);
  state.set_process_id("p");
  auto with_process = [](uint64_t epoch, const std::string& process) {
    v1::ClusterMap map = TwoShards(epoch, /*incarnation=*/6)->proto();
    map.mutable_nodes(0)->set_process_id(process);
    return *cluster::ClusterMapView::Build(map);
  };
  ASSERT_TRUE(state.Update(with_process(1, "p")));
  EXPECT_TRUE(state.NamesEarlierSelf(*state.map()));
  EXPECT_FALSE(state.NamesOtherProcess(*state.map()));
  EXPECT_EQ(state.RouteKey("bar").kind, Route::Kind::kNotReady);
  ASSERT_TRUE(state.Update(with_process(2, "q")));
  EXPECT_TRUE(state.NamesOtherProcess(*state.map()));
  ASSERT_TRUE(state.Update(with_process(3, "")));
  EXPECT_TRUE(state.NamesOtherProcess(*state.map()));
}

// A migration in HANDOFF whose target shard lost every replica: the target
// may have acknowledged writes of the slots after it accepted the handoff,
// so the source (which holds the slots' data as of the handoff) must not
// serve them again, nor send clients after a target that is not there.
TEST(ClusterState, AHandoffWhoseTargetIsDownRoutesClusterDown) {
  v1::ClusterMap map = TwoShards(1)->proto();
  map.mutable_shards(1)->clear_replicas();  // the target is down
  v1::Migration* m = map.add_migrations();
  m->set_id(1);
  m->mutable_slots()->set_start(0);
  m->mutable_slots()->set_end(100);
  m->set_source_shard(0);
  m->set_target_shard(1);
  m->set_state(v1::MIGRATION_HANDOFF);
  map.set_next_migration_id(2);
  auto view = cluster::ClusterMapView::Build(map);
  ASSERT_TRUE(view.ok()) << view.status();
  ClusterState state("a");  // the source primary
  ASSERT_TRUE(state.Update(*view));
  EXPECT_EQ(state.RouteSlot(5).kind, Route::Kind::kDown);
  state.MarkHandedOff(1);
  EXPECT_EQ(state.RouteSlot(5).kind, Route::Kind::kDown);
  EXPECT_EQ(state.RouteSlot(101).kind, Route::Kind::kServe);  // not migrating
}

TEST(FencePage, StartsUnexpiringAndFences) {
  FencePage page;
  EXPECT_EQ(page.words().valid_until_ms, fence::kNoExpiry);
  page.set_map_epoch(9);
  page.set_valid_until_ms(1234);
  fence::FenceWords w = fence::Decode(page.data());
  EXPECT_EQ(w.map_epoch, 9u);
  EXPECT_EQ(w.valid_until_ms, 1234u);
  page.Fence();
  EXPECT_EQ(fence::Decode(page.data()).valid_until_ms, 0u);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
