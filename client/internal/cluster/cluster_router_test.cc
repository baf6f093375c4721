// Copyright 2026 The kvstore Authors.
//
// The routing helpers of a slot migration: which slots are read through the
// server's CPU (HANDOFF only), and which node an ASK sends a request to.

#include "client/internal/cluster/cluster_router.h"

#include <memory>

#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

v1::ClusterNode* AddNode(v1::ClusterMap* m, const std::string& id, int port) {
  v1::ClusterNode* n = m->add_nodes();
  n->set_node_id(id);
  n->set_incarnation(1);
  n->set_control_address("127.0.0.1:" + std::to_string(port));
  n->set_resp_address("127.0.0.1:" + std::to_string(port + 1000));
  return n;
}

// Shard 1 (a, b) owns 0-8191, shard 2 (c) 8192-16383; slots 100-199 move
// from shard 1 to shard 2 in state `state`, slots 300-399 are PENDING.
std::shared_ptr<const cluster::ClusterMapView> MigratingMap(v1::MigrationState state) {
  v1::ClusterMap m;
  m.set_epoch(7);
  m.set_replication_factor(2);
  AddNode(&m, "a", 7001);
  AddNode(&m, "b", 7002);
  AddNode(&m, "c", 7003);
  v1::Shard* s1 = m.add_shards();
  s1->set_shard_id(1);
  s1->add_replicas("a");
  s1->add_replicas("b");
  v1::SlotRange* r = s1->add_slots();
  r->set_start(0);
  r->set_end(8191);
  v1::Shard* s2 = m.add_shards();
  s2->set_shard_id(2);
  s2->add_replicas("c");
  r = s2->add_slots();
  r->set_start(8192);
  r->set_end(16383);
  v1::Migration* mig = m.add_migrations();
  mig->set_id(1);
  mig->mutable_slots()->set_start(100);
  mig->mutable_slots()->set_end(199);
  mig->set_source_shard(1);
  mig->set_target_shard(2);
  mig->set_state(state);
  v1::Migration* pending = m.add_migrations();
  pending->set_id(2);
  pending->mutable_slots()->set_start(300);
  pending->mutable_slots()->set_end(399);
  pending->set_source_shard(1);
  pending->set_target_shard(2);
  pending->set_state(v1::MIGRATION_PENDING);
  m.set_next_migration_id(3);
  absl::StatusOr<std::shared_ptr<const cluster::ClusterMapView>> view =
      cluster::ClusterMapView::Build(std::move(m));
  EXPECT_TRUE(view.ok()) << view.status();
  return view.ok() ? *view : nullptr;
}

TEST(ClusterRouterTest, HandoffSlotsAreReadThroughTheServer) {
  std::shared_ptr<const cluster::ClusterMapView> map = MigratingMap(v1::MIGRATION_HANDOFF);
  ASSERT_NE(map, nullptr);
  EXPECT_TRUE(ReadsNeedSlowPath(*map, 100));
  EXPECT_TRUE(ReadsNeedSlowPath(*map, 150));
  EXPECT_TRUE(ReadsNeedSlowPath(*map, 199));
  EXPECT_FALSE(ReadsNeedSlowPath(*map, 99));
  EXPECT_FALSE(ReadsNeedSlowPath(*map, 200));
  EXPECT_FALSE(ReadsNeedSlowPath(*map, 9000));
  // A PENDING migration changes nothing yet.
  EXPECT_FALSE(ReadsNeedSlowPath(*map, 350));
}

TEST(ClusterRouterTest, CopyingSlotsAreReadAsEver) {
  std::shared_ptr<const cluster::ClusterMapView> map = MigratingMap(v1::MIGRATION_COPYING);
  ASSERT_NE(map, nullptr);
  EXPECT_FALSE(ReadsNeedSlowPath(*map, 100));
  EXPECT_FALSE(ReadsNeedSlowPath(*map, 150));
}

TEST(ClusterRouterTest, AskedNodeByIdThenAddressThenByMigration) {
  std::shared_ptr<const cluster::ClusterMapView> map = MigratingMap(v1::MIGRATION_HANDOFF);
  ASSERT_NE(map, nullptr);
  // By control address (gRPC) and by RESP address (TCP).
  const v1::ClusterNode* n = AskedNode(*map, 150, "", "127.0.0.1:7003");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->node_id(), "c");
  n = AskedNode(*map, 150, "", "127.0.0.1:8002");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->node_id(), "b");
  // An address the map does not list: the migration's target primary.
  n = AskedNode(*map, 150, "", "10.9.9.9:1");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->node_id(), "c");
  n = AskedNode(*map, 150, "", "");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->node_id(), "c");
  // By node id (gRPC and RDMA name it), before any address.
  n = AskedNode(*map, 150, "b", "127.0.0.1:7003");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->node_id(), "b");
  n = AskedNode(*map, 150, "gone", "127.0.0.1:8002");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->node_id(), "b");
  // Neither: the caller refreshes.
  EXPECT_EQ(AskedNode(*map, 5000, "", "10.9.9.9:1"), nullptr);
  EXPECT_EQ(AskedNode(*map, 350, "", ""), nullptr);  // PENDING
  EXPECT_EQ(AskedNode(*map, 99999, "", ""), nullptr);
}

}  // namespace
}  // namespace client
}  // namespace kvstore
