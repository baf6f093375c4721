// Copyright 2026 The kvstore Authors.
//
// ReportInSync judged on the newest map: the primary's own map may lag
// behind etcd (its watch is slow), and in the newest map the reporting node
// may be another incarnation, or a later stint of the same process, that
// has not copied the shard. MarkInSync checks the reporter's incarnation
// and the shard epoch its copy began at against the map it edits, so such
// a report is refused whatever the primary's map says. Nor may a primary
// that is itself a later process than the one the map names mark anyone in
// sync: it holds none of the shard.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_map.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd/fake_etcd_client.h"
#include "server/cluster/membership/etcd_keys.h"
#include "server/cluster/membership/map_store.h"
#include "server/cluster/replication/replication_test_util.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::server::testing::FakeMapStore;
using ::kvstore::server::testing::Node;
using ::kvstore::server::testing::NodeOptions;
using ::kvstore::server::testing::OneShardMap;
using ::testing::ElementsAre;

constexpr char kCluster[] = "promote";

class PromoteSyncingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = etcd_.NewClient("n0");
    auto lease = client_->GrantLease(absl::Seconds(60));
    ASSERT_TRUE(lease.ok()) << lease.status();
    lease_ = *lease;
    ASSERT_TRUE(client_->Put(etcd_keys::MemberKey(kCluster, "n0"), "{}", lease_).ok());
    NodeOptions o;
    o.sync_thread = false;  // the test sends the report itself
    o.make_editor = [this](ClusterState* state) -> std::unique_ptr<ShardMapEditor> {
      MapStoreOptions mo;
      mo.cluster_name = kCluster;
      mo.node_id = state->self();
      mo.lease = lease_;
      return std::make_unique<MapStore>(client_.get(), state, mo);
    };
    for (int i = 0; i < 2; ++i) {
      nodes_.push_back(std::make_unique<Node>(absl::StrCat("n", i), &maps_, o));
    }
  }

  // n0 primary (the incarnation holding its member key), n1 syncing with
  // `incarnation`, at shard epoch `shard_epoch`.
  v1::ClusterMap Map(uint64_t incarnation, uint64_t shard_epoch) {
    v1::ClusterMap m = OneShardMap({nodes_[0].get(), nodes_[1].get()}, {0}, {1}, shard_epoch);
    m.set_cluster_name(kCluster);
    for (v1::ClusterNode& n : *m.mutable_nodes()) {
      n.set_incarnation(n.node_id() == "n1" ? incarnation : static_cast<uint64_t>(lease_));
    }
    cluster::StampSyncingSince(m.mutable_shards(0));
    return m;
  }
  // `m` as the newest map in etcd only: n0's state keeps its older one.
  void StoreInEtcdOnly(v1::ClusterMap m, uint64_t epoch) {
    m.set_epoch(epoch);
    ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(m)).ok());
  }
  v1::ClusterMap Stored() {
    auto kv = client_->Get(etcd_keys::MapKey(kCluster));
    if (!kv.ok() || !kv->has_value()) return v1::ClusterMap();
    auto m = etcd_keys::DecodeMap((*kv)->value);
    return m.ok() ? *m : v1::ClusterMap();
  }
  grpc::Status Report(uint64_t incarnation, uint64_t shard_epoch) {
    v1::ReportInSyncRequest req;
    req.set_shard_id(0);
    req.set_node_id("n1");
    req.set_incarnation(incarnation);
    req.set_shard_epoch(shard_epoch);
    v1::ReportInSyncResponse resp;
    grpc::ClientContext ctx;
    return nodes_[0]->NewStub()->ReportInSync(&ctx, req, &resp);
  }

  etcd::FakeEtcd etcd_;
  std::unique_ptr<etcd::EtcdClient> client_;
  int64_t lease_ = 0;
  FakeMapStore maps_;  // outlives the nodes, which it points to
  std::vector<std::unique_ptr<Node>> nodes_;
};

// n1 (incarnation 1) copied the shard and reported; meanwhile it restarted
// as incarnation 2 and was placed again. n0's map still shows incarnation 1.
TEST_F(PromoteSyncingTest, AReportOfAnEarlierIncarnationIsRefusedOnTheNewestMap) {
  maps_.Set(Map(/*incarnation=*/1, /*shard_epoch=*/1));
  StoreInEtcdOnly(Map(/*incarnation=*/2, /*shard_epoch=*/3), 10);
  grpc::Status s = Report(/*incarnation=*/1, /*shard_epoch=*/1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  v1::ClusterMap stored = Stored();
  EXPECT_THAT(stored.shards(0).replicas(), ElementsAre("n0"));
  EXPECT_THAT(stored.shards(0).syncing(), ElementsAre("n1"));
}

// The same process left the shard and was added again at shard epoch 3;
// a copy begun at epoch 1 belongs to its earlier stint.
TEST_F(PromoteSyncingTest, ACopyBegunBeforeTheNodeWasAddedAgainIsRefused) {
  maps_.Set(Map(/*incarnation=*/2, /*shard_epoch=*/1));
  StoreInEtcdOnly(Map(/*incarnation=*/2, /*shard_epoch=*/3), 10);
  grpc::Status s = Report(/*incarnation=*/2, /*shard_epoch=*/1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(Stored().shards(0).replicas(), ElementsAre("n0"));
  // A copy begun in the current stint is taken.
  s = Report(/*incarnation=*/2, /*shard_epoch=*/3);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(Stored().shards(0).replicas(), ElementsAre("n0", "n1"));
}

// n0 was killed and restarted within its lease: the new, empty process
// registered once the old lease expired and installed a map that still names
// its earlier life as the shard's primary (the controller has not dropped
// that life yet). n1, placed on the shard before the kill, copies it from
// the new process and gets nothing. Were it marked in sync, the controller
// would promote that empty copy when it drops n0's earlier life, and every
// acknowledged write of the shard would read as not found; its only in-sync
// copy died, so the shard must go down instead. Neither the copy nor a
// report reaching the new process may mark n1 in sync.
TEST_F(PromoteSyncingTest, ARestartedProcessTheMapNamesInItsEarlierLifeMarksNoOneInSync) {
  constexpr uint64_t kEarlierLife = 100;
  v1::ClusterMap m = Map(/*incarnation=*/7, /*shard_epoch=*/2);
  for (v1::ClusterNode& n : *m.mutable_nodes()) {
    if (n.node_id() == "n0") n.set_incarnation(kEarlierLife);
  }
  maps_.Set(m);
  StoreInEtcdOnly(m, maps_.Current().epoch());
  nodes_[0]->state().set_incarnation(static_cast<uint64_t>(lease_));  // the new process

  const absl::Status copy = nodes_[1]->installer().SyncShardNow(0);
  EXPECT_FALSE(copy.ok());
  EXPECT_THAT(Stored().shards(0).replicas(), ElementsAre("n0"));
  EXPECT_THAT(Stored().shards(0).syncing(), ElementsAre("n1"));

  const grpc::Status report = Report(/*incarnation=*/7, /*shard_epoch=*/2);
  EXPECT_FALSE(report.ok());
  EXPECT_THAT(Stored().shards(0).replicas(), ElementsAre("n0"));
  EXPECT_THAT(Stored().shards(0).syncing(), ElementsAre("n1"));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
