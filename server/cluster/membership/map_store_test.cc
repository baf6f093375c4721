// Copyright 2026 The kvstore Authors.
//
// MapStore on an in-memory etcd (FakeEtcd): the primary's in-sync-set
// edits as transactions, their refusals, the retry on a lost race and the
// lease compare.

#include "server/cluster/membership/map_store.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd/fake_etcd_client.h"
#include "server/cluster/membership/etcd_keys.h"

namespace kvstore {
namespace server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kCluster[] = "maptest";

// Shard 0: n1 primary, n2 backup, n3 syncing. Shard 1: n2 primary, n1 backup.
v1::ClusterMap FirstMap() {
  v1::ClusterMap map;
  map.set_epoch(1);
  map.set_replication_factor(2);
  map.set_cluster_name(kCluster);
  map.set_controller("n2");
  for (const char* id : {"n1", "n2", "n3"}) {
    v1::ClusterNode* n = map.add_nodes();
    n->set_node_id(id);
    n->set_control_address(std::string(id) + ":7300");
  }
  auto ranges = cluster::EvenSlotRanges(2);
  v1::Shard* s0 = map.add_shards();
  s0->set_shard_id(0);
  s0->set_shard_epoch(1);
  *s0->add_slots() = ranges[0];
  s0->add_replicas("n1");
  s0->add_replicas("n2");
  s0->add_syncing("n3");
  v1::Shard* s1 = map.add_shards();
  s1->set_shard_id(1);
  s1->set_shard_epoch(1);
  *s1->add_slots() = ranges[1];
  s1->add_replicas("n2");
  s1->add_replicas("n1");
  return map;
}

class MapStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = etcd_.NewClient("n1");
    // n1's member key under its lease, as Membership would write it.
    auto lease = client_->GrantLease(absl::Seconds(30));
    ASSERT_TRUE(lease.ok()) << lease.status();
    lease_ = *lease;
    ASSERT_TRUE(client_->Put(etcd_keys::MemberKey(kCluster, "n1"), "{}", lease_).ok());
    ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(FirstMap())).ok());
    MapStoreOptions o;
    o.cluster_name = kCluster;
    o.node_id = "n1";
    o.lease = lease_;
    o.before_txn = [this] {
      ++txns_;
      if (before_txn_) before_txn_();
    };
    store_ = std::make_unique<MapStore>(client_.get(), &state_, o);
  }

  v1::ClusterMap Stored() {
    auto m = store_->Read();
    EXPECT_TRUE(m.ok() && m->has_value()) << m.status();
    return m.ok() && m->has_value() ? (*m)->map : v1::ClusterMap();
  }

  etcd::FakeEtcd etcd_;
  std::unique_ptr<etcd::EtcdClient> client_;
  int64_t lease_ = 0;
  ClusterState state_{"n1"};
  std::unique_ptr<MapStore> store_;
  int txns_ = 0;
  std::function<void()> before_txn_;
};

TEST_F(MapStoreTest, RemoveReplicaAndMarkInSyncCommitAndInstall) {
  ASSERT_TRUE(store_->RemoveReplica(0, "n2").ok());
  v1::ClusterMap m = Stored();
  EXPECT_EQ(m.epoch(), 2u);
  EXPECT_EQ(m.shards(0).shard_epoch(), 2u);
  EXPECT_THAT(m.shards(0).replicas(), ElementsAre("n1"));
  EXPECT_EQ(m.shards(1).shard_epoch(), 1u);  // the other shard is untouched
  EXPECT_EQ(m.controller(), "n2");
  // Installed before the call returned: no need to wait for a watch.
  EXPECT_EQ(state_.map_epoch(), 2u);

  ASSERT_TRUE(store_->MarkInSync(0, "n3", 0, 0).ok());
  m = Stored();
  EXPECT_EQ(m.epoch(), 3u);
  EXPECT_EQ(m.shards(0).shard_epoch(), 3u);
  EXPECT_THAT(m.shards(0).replicas(), ElementsAre("n1", "n3"));
  EXPECT_THAT(m.shards(0).syncing(), IsEmpty());
  EXPECT_EQ(state_.map_epoch(), 3u);

  // Repeats change nothing (a retry after a lost reply).
  EXPECT_TRUE(store_->RemoveReplica(0, "n2").ok());
  EXPECT_TRUE(store_->MarkInSync(0, "n3", 0, 0).ok());
  EXPECT_EQ(Stored().epoch(), 3u);
  EXPECT_EQ(txns_, 2);
}

// Shard 0 (n1) moves slots 0-9 to shard 1. The handoff needs shard 1's
// epoch as the copy saw it: a change of its replicas since may have let in
// a node without the copy.
TEST_F(MapStoreTest, HandoffNeedsTheTargetUnchangedSinceTheCopyThenTheFlipMovesTheSlots) {
  v1::ClusterMap map = FirstMap();
  v1::Migration* m = map.add_migrations();
  m->set_id(1);
  m->mutable_slots()->set_start(0);
  m->mutable_slots()->set_end(9);
  m->set_source_shard(0);
  m->set_target_shard(1);
  m->set_state(v1::MIGRATION_COPYING);
  map.set_next_migration_id(2);
  map.set_epoch(2);
  ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(map)).ok());

  const absl::Status changed = store_->BeginHandoff(1, /*target_shard_epoch=*/0);
  EXPECT_TRUE(absl::IsFailedPrecondition(changed)) << changed;
  EXPECT_THAT(std::string(changed.message()), HasSubstr("copy again"));
  EXPECT_EQ(Stored().migrations(0).state(), v1::MIGRATION_COPYING);
  EXPECT_EQ(Stored().epoch(), 2u);

  ASSERT_TRUE(store_->BeginHandoff(1, /*target_shard_epoch=*/1).ok());
  EXPECT_EQ(Stored().migrations(0).state(), v1::MIGRATION_HANDOFF);
  EXPECT_EQ(Stored().shards(0).shard_epoch(), 2u);
  // Already in HANDOFF: a repeat is OK whatever the target's epoch.
  EXPECT_TRUE(store_->BeginHandoff(1, /*target_shard_epoch=*/0).ok());

  ASSERT_TRUE(store_->CompleteMigration(1).ok());
  v1::ClusterMap flipped = Stored();
  EXPECT_THAT(flipped.migrations(), IsEmpty());
  EXPECT_EQ(flipped.shards(0).slots(0).start(), 10u);
  EXPECT_EQ(flipped.shards(1).shard_epoch(), 2u);
  EXPECT_TRUE(store_->CompleteMigration(1).ok()) << "gone: an earlier attempt flipped it";
}

TEST_F(MapStoreTest, DropsASyncingReplica) {
  ASSERT_TRUE(store_->RemoveReplica(0, "n3").ok());
  v1::ClusterMap m = Stored();
  EXPECT_EQ(m.epoch(), 2u);
  EXPECT_THAT(m.shards(0).replicas(), ElementsAre("n1", "n2"));
  EXPECT_THAT(m.shards(0).syncing(), IsEmpty());
}

TEST_F(MapStoreTest, RefusesWhatThePrimaryMayNotDo) {
  // n1 is a backup of shard 1, not its primary.
  absl::Status s = store_->RemoveReplica(1, "n2");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("not the primary of shard 1"));
  s = store_->MarkInSync(1, "n1", 0, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(store_->RemoveReplica(0, "n1").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->RemoveReplica(7, "n2").code(), absl::StatusCode::kFailedPrecondition);
  // A node that is not syncing cannot be marked in sync.
  EXPECT_EQ(store_->MarkInSync(0, "n9", 0, 0).code(), absl::StatusCode::kFailedPrecondition);
  state_.set_fenced(true);
  EXPECT_EQ(store_->RemoveReplica(0, "n2").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Stored().epoch(), 1u);
  EXPECT_EQ(txns_, 0);
}

TEST_F(MapStoreTest, ALostRaceIsRetriedOnTheNewMap) {
  // Between the edit's read and its txn another writer (the controller)
  // places n3 as syncing in shard 1.
  before_txn_ = [this] {
    if (txns_ != 1) return;
    v1::ClusterMap m = Stored();
    m.set_epoch(m.epoch() + 1);
    m.mutable_shards(1)->add_syncing("n3");
    m.mutable_shards(1)->set_shard_epoch(m.shards(1).shard_epoch() + 1);
    ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(m)).ok());
  };
  ASSERT_TRUE(store_->RemoveReplica(0, "n2").ok());
  EXPECT_EQ(txns_, 2);  // the first txn lost, the second one won
  v1::ClusterMap m = Stored();
  EXPECT_EQ(m.epoch(), 3u);
  EXPECT_THAT(m.shards(0).replicas(), ElementsAre("n1"));
  EXPECT_THAT(m.shards(1).syncing(), ElementsAre("n3"));  // the other change survived
  EXPECT_EQ(state_.map_epoch(), 3u);

  // A retry re-checks the preconditions: here the racing writer makes n2
  // the primary of shard 0, so n1 may no longer edit it.
  before_txn_ = [this] {
    v1::ClusterMap m = Stored();
    m.set_epoch(m.epoch() + 1);
    m.mutable_shards(0)->clear_replicas();
    m.mutable_shards(0)->add_replicas("n2");
    m.mutable_shards(0)->add_replicas("n1");
    m.mutable_shards(0)->clear_syncing();
    ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(m)).ok());
  };
  txns_ = 0;
  absl::Status s = store_->MarkInSync(0, "n3", 0, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(txns_, 1);
  EXPECT_EQ(state_.map_epoch(), 4u);  // the newer map was installed meanwhile
}

TEST_F(MapStoreTest, GivesUpAfterLosingEveryRace) {
  before_txn_ = [this] {
    v1::ClusterMap m = Stored();
    m.set_epoch(m.epoch() + 1);
    ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(m)).ok());
  };
  absl::Status s = store_->RemoveReplica(0, "n2");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(txns_, 5);
  EXPECT_THAT(Stored().shards(0).replicas(), ElementsAre("n1", "n2"));
}

TEST_F(MapStoreTest, ANodeWhoseLeaseIsGoneCannotChangeTheMap) {
  // etcd deletes the member key with the lease; this node still thinks it
  // serves (its ClusterState is not fenced), so only the txn stops it.
  ASSERT_TRUE(etcd_.ExpireLease(lease_).ok());
  absl::Status s = store_->RemoveReplica(0, "n2");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("no longer holds lease"));
  EXPECT_EQ(txns_, 1);
  // A new incarnation's key (another lease) does not help the old one.
  auto other = client_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(client_->Put(etcd_keys::MemberKey(kCluster, "n1"), "{}", *other).ok());
  EXPECT_EQ(store_->RemoveReplica(0, "n2").code(), absl::StatusCode::kUnavailable);
  v1::ClusterMap m = Stored();
  EXPECT_EQ(m.epoch(), 1u);
  EXPECT_THAT(m.shards(0).replicas(), ElementsAre("n1", "n2"));
}

// The map names n1's earlier life (killed, restarted before its lease
// expired): this process holds the member key under its own lease, but none
// of the shards that life led. Its edits would act as that life's primary
// (marking an empty copy in sync, dropping a backup, moving slots): refused
// until the controller records the new incarnation.
TEST_F(MapStoreTest, AProcessTheMapNamesInAnEarlierLifeCannotEditAsItsPrimary) {
  v1::ClusterMap map = FirstMap();
  for (v1::ClusterNode& n : *map.mutable_nodes()) {
    if (n.node_id() == "n1") n.set_incarnation(static_cast<uint64_t>(lease_) + 1);
  }
  ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(map)).ok());
  absl::Status s = store_->MarkInSync(0, "n3", 0, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("earlier incarnation"));
  EXPECT_EQ(store_->RemoveReplica(0, "n2").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(txns_, 0);
  EXPECT_THAT(Stored().shards(0).syncing(), ElementsAre("n3"));

  // Once the map names this incarnation, it is the primary.
  for (v1::ClusterNode& n : *map.mutable_nodes()) {
    if (n.node_id() == "n1") n.set_incarnation(static_cast<uint64_t>(lease_));
  }
  map.set_epoch(2);
  ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(map)).ok());
  ASSERT_TRUE(store_->MarkInSync(0, "n3", 0, 0).ok());
  EXPECT_THAT(Stored().shards(0).replicas(), ElementsAre("n1", "n2", "n3"));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
