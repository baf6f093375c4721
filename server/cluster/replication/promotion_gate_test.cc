// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/promotion_gate.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

// One shard (id 0, every slot) led by `primary`, at map epoch `epoch`.
std::shared_ptr<const cluster::ClusterMapView> Map(uint64_t epoch, const std::string& primary) {
  v1::ClusterMap m;
  m.set_epoch(epoch);
  m.set_replication_factor(2);
  for (const char* id : {"a", "b"}) m.add_nodes()->set_node_id(id);
  v1::Shard* s = m.add_shards();
  s->set_shard_id(0);
  s->set_shard_epoch(epoch);
  s->add_replicas(primary);
  s->add_replicas(primary == "a" ? "b" : "a");
  v1::SlotRange* r = s->add_slots();
  r->set_start(0);
  r->set_end(16383);
  auto view = cluster::ClusterMapView::Build(m);
  EXPECT_TRUE(view.ok()) << view.status();
  return *view;
}

TEST(PromotionGateTest, ALeadWaitsFromTheMapThatGivesItUntilReconciled) {
  PromotionGate gate("a");
  gate.Enable();
  // The first map this process sees: it started empty, nothing to reconcile.
  EXPECT_TRUE(gate.Ready(*Map(1, "a"), 0));
  EXPECT_TRUE(gate.AwaitWaiting(absl::ZeroDuration()).empty());
  gate.Observe(*Map(2, "b"));
  EXPECT_TRUE(gate.Ready(*Map(2, "b"), 0));   // not ours: refused elsewhere
  EXPECT_FALSE(gate.Ready(*Map(3, "a"), 0));  // led again: waits
  EXPECT_FALSE(gate.AwaitReady(*Map(3, "a"), 0, absl::Now() + absl::Milliseconds(1)));
  std::vector<PromotionGate::Lead> waiting = gate.AwaitWaiting(absl::ZeroDuration());
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].shard_id, 0u);
  EXPECT_EQ(waiting[0].since, 3u);
  gate.Observe(*Map(4, "a"));  // the same lead goes on (a backup dropped, say)
  EXPECT_FALSE(gate.Ready(*Map(4, "a"), 0));
  // A writer still holding an older map is not let through either (Ready's
  // lock-free answer is only for nothing waiting).
  EXPECT_FALSE(gate.Ready(*Map(3, "a"), 0));
  gate.Reconciled(waiting[0]);
  EXPECT_TRUE(gate.Ready(*Map(4, "a"), 0));
  // Lost and led again: a reconcile of the earlier lead does not count.
  gate.Observe(*Map(5, "b"));
  gate.Observe(*Map(6, "a"));
  gate.Reconciled(waiting[0]);
  EXPECT_FALSE(gate.Ready(*Map(6, "a"), 0));
  // Older maps change nothing.
  gate.Observe(*Map(5, "b"));
  EXPECT_EQ(gate.AwaitWaiting(absl::ZeroDuration()).size(), 1u);
}

TEST(PromotionGateTest, WithoutAReconcilerNothingWaits) {
  PromotionGate gate("a");
  gate.Observe(*Map(1, "b"));
  EXPECT_TRUE(gate.Ready(*Map(2, "a"), 0));
  EXPECT_TRUE(gate.AwaitWaiting(absl::ZeroDuration()).empty());
}

}  // namespace
}  // namespace server
}  // namespace kvstore
