// Copyright 2026 The kvstore Authors.
//
// SlotJanitor against a real KvStore and ClusterState: keys of slots moved
// away are deleted; keys of served slots, of slots the node backs or syncs,
// and of a slot it is importing are kept.

#include "server/cluster/migration/slot_janitor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster/slots.h"
#include "common/failpoint/failpoint_testing.h"
#include "common/metrics/exposition.h"
#include "gtest/gtest.h"
#include "server/storage/memory_pool.h"

namespace kvstore {
namespace server {
namespace {

v1::SlotRange Range(uint32_t start, uint32_t end) {
  v1::SlotRange r;
  r.set_start(start);
  r.set_end(end);
  return r;
}

// n1 leads shard 1, n2 leads shard 2 (n1 syncing into it when
// `n1_syncing_2`), n3 leads shard 3; `ranges[i]` are shard i+1's slots.
v1::ClusterMap Map(uint64_t epoch, std::vector<std::vector<v1::SlotRange>> ranges,
                   bool n1_syncing_2 = false) {
  v1::ClusterMap m;
  m.set_epoch(epoch);
  m.set_replication_factor(1);
  for (int i = 1; i <= 3; ++i) {
    v1::ClusterNode* n = m.add_nodes();
    n->set_node_id(absl::StrCat("n", i));
    n->set_incarnation(1);
    n->set_control_address(absl::StrCat("127.0.0.1:", 7000 + i));
    v1::Shard* s = m.add_shards();
    s->set_shard_id(i);
    s->add_replicas(absl::StrCat("n", i));
    for (const v1::SlotRange& r : ranges[i - 1]) *s->add_slots() = r;
  }
  if (n1_syncing_2) m.mutable_shards(1)->add_syncing("n1");
  m.set_next_migration_id(1);
  return m;
}

std::shared_ptr<const cluster::ClusterMapView> View(v1::ClusterMap m) {
  auto view = cluster::ClusterMapView::Build(std::move(m));
  EXPECT_TRUE(view.ok()) << view.status();
  return view.ok() ? *view : nullptr;
}

class SlotJanitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryPoolOptions po;
    po.data_bytes = 16 << 20;
    po.index_bytes = 1 << 20;
    auto pool = MemoryPool::Create(po);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.registry = &registry_;
    auto store = KvStore::Create(pool_.get(), so);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    writer_ = store_->NewWriter();
    // Four keys in each of the slot ranges the test uses.
    for (int i = 0; i < 200000 && Missing() > 0; ++i) {
      const std::string key = absl::StrCat("key:", i);
      const uint32_t slot = cluster::KeySlot(key);
      for (auto& [name, range] : groups_) {
        if (slot >= range.first && slot <= range.second && keys_[name].size() < 4) {
          keys_[name].push_back(key);
          ASSERT_TRUE(store_->Put(writer_.get(), key, "v:" + key).ok());
        }
      }
    }
    ASSERT_EQ(Missing(), 0);
  }
  void TearDown() override {
    janitor_.reset();
    writer_.reset();
    store_.reset();
  }

  int Missing() {
    int missing = 0;
    for (const auto& [name, range] : groups_) missing += keys_[name].size() < 4 ? 1 : 0;
    return missing;
  }
  // How many keys of group `name` the store still holds.
  int Present(const std::string& name) {
    int n = 0;
    for (const std::string& key : keys_[name]) n += store_->Get(key).ok() ? 1 : 0;
    return n;
  }
  void Install(v1::ClusterMap m) {
    ASSERT_TRUE(state_.Update(View(std::move(m))));
    ASSERT_TRUE(janitor_->WaitIdle(absl::Seconds(10)));
  }

  // Named slot ranges the keys are drawn from.
  const std::map<std::string, std::pair<uint32_t, uint32_t>> groups_ = {
      {"low", {0, 99}},           // shard 1 (n1), moved to shard 2 later
      {"mid", {100, 5000}},       // shard 1 (n1) throughout
      {"import", {6000, 6099}},   // shard 2, migrating into shard 1
      {"two", {7000, 8000}},      // shard 2 (n2): n1 syncs it in one map
      {"three", {12000, 16383}},  // shard 3 (n3)
  };
  metrics::Registry registry_;
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<KvStore::Writer> writer_;
  std::map<std::string, std::vector<std::string>> keys_;
  ClusterState state_{"n1"};
  std::unique_ptr<SlotJanitor> janitor_;
};

TEST_F(SlotJanitorTest, DeletesOnlySlotsWithoutARole) {
  SlotJanitorOptions o;
  o.registry = &registry_;
  o.page_keys = 3;  // many pages: the cursor is followed to the end
  janitor_ = std::make_unique<SlotJanitor>(store_.get(), &state_, o);

  // n1 leads 0-5999 and syncs shard 2 (6000-11999): only shard 3 goes.
  Install(Map(1, {{Range(0, 5999)}, {Range(6000, 11999)}, {Range(12000, 16383)}}, true));
  EXPECT_EQ(Present("low"), 4);
  EXPECT_EQ(Present("mid"), 4);
  EXPECT_EQ(Present("import"), 4);
  EXPECT_EQ(Present("two"), 4);
  EXPECT_EQ(Present("three"), 0);
  EXPECT_EQ(janitor_->deleted(), 4u);

  // n1 stops syncing shard 2, but 6000-6099 migrate into its shard 1
  // (COPYING): those are kept, the rest of shard 2 goes.
  v1::ClusterMap m = Map(2, {{Range(0, 5999)}, {Range(6000, 11999)}, {Range(12000, 16383)}});
  v1::Migration* mig = m.add_migrations();
  mig->set_id(1);
  *mig->mutable_slots() = Range(6000, 6099);
  mig->set_source_shard(2);
  mig->set_target_shard(1);
  mig->set_state(v1::MIGRATION_COPYING);
  m.set_next_migration_id(2);
  Install(m);
  EXPECT_EQ(Present("import"), 4);
  EXPECT_EQ(Present("two"), 0);
  EXPECT_EQ(Present("low"), 4);
  EXPECT_EQ(Present("mid"), 4);

  // HANDOFF keeps them too.
  m.set_epoch(3);
  m.mutable_migrations(0)->set_state(v1::MIGRATION_HANDOFF);
  Install(m);
  EXPECT_EQ(Present("import"), 4);

  // The flip of that migration, and 0-99 moved away to shard 2: the low
  // keys go, the imported ones are now n1's own.
  Install(Map(4, {{Range(100, 6099)}, {Range(0, 99), Range(6100, 11999)}, {Range(12000, 16383)}}));
  EXPECT_EQ(Present("low"), 0);
  EXPECT_EQ(Present("mid"), 4);
  EXPECT_EQ(Present("import"), 4);
  EXPECT_EQ(janitor_->deleted(), 12u);
  EXPECT_EQ(
      metrics::FlattenSnapshot(registry_.TakeSnapshot())["kvstore_slot_janitor_deleted_total"],
      12u);
}

TEST_F(SlotJanitorTest, PendingMigrationGivesNoRole) {
  janitor_ = std::make_unique<SlotJanitor>(store_.get(), &state_);
  v1::ClusterMap m = Map(1, {{Range(0, 5999)}, {Range(6000, 11999)}, {Range(12000, 16383)}});
  v1::Migration* mig = m.add_migrations();
  mig->set_id(1);
  *mig->mutable_slots() = Range(6000, 6099);
  mig->set_source_shard(2);
  mig->set_target_shard(1);
  mig->set_state(v1::MIGRATION_PENDING);
  m.set_next_migration_id(2);
  Install(m);
  EXPECT_EQ(Present("import"), 0);
  EXPECT_EQ(Present("two"), 0);
  EXPECT_EQ(Present("three"), 0);
  EXPECT_EQ(Present("low"), 4);
  EXPECT_EQ(Present("mid"), 4);
}

// The janitor decided on a map without a role for a key and is stopped
// right before the delete; meanwhile a newer map gives the role back and the
// key is written under it (as a refilled node's copy or a Replicate would).
// The delete must not take the new entry.
TEST_F(SlotJanitorTest, AKeyWrittenUnderARoleReturnedBeforeTheDeleteIsKept) {
  janitor_ = std::make_unique<SlotJanitor>(store_.get(), &state_);
  const std::vector<std::vector<v1::SlotRange>> ranges = {
      {Range(0, 5999)}, {Range(6000, 11999)}, {Range(12000, 16383)}};
  Install(Map(1, ranges, /*n1_syncing_2=*/true));
  ASSERT_EQ(Present("two"), 4);
  {
    failpoint::Pause before_delete("slot-janitor/before-delete");
    // n1 stops syncing shard 2: its keys lose their role.
    ASSERT_TRUE(state_.Update(View(Map(2, ranges))));
    ASSERT_TRUE(before_delete.WaitUntilReached());
    // n1 syncs shard 2 again and every key of it is written anew.
    ASSERT_TRUE(state_.Update(View(Map(3, ranges, /*n1_syncing_2=*/true))));
    for (const char* group : {"import", "two"}) {  // shard 2's keys
      for (const std::string& key : keys_[group]) {
        ASSERT_TRUE(store_->Put(writer_.get(), key, "again:" + key).ok());
      }
    }
    before_delete.Release();
    ASSERT_TRUE(janitor_->WaitIdle(absl::Seconds(60)));
  }
  for (const char* group : {"import", "two"}) {
    EXPECT_EQ(Present(group), 4) << group;
    for (const std::string& key : keys_[group]) {
      auto v = store_->Get(key);
      ASSERT_TRUE(v.ok()) << key;
      EXPECT_EQ(v->value(), "again:" + key);
    }
  }
  EXPECT_EQ(janitor_->deleted(), 4u) << "only shard 3's keys, on the first map";
}

// A backup dropped from a shard's in-sync set (its lease lapsed, a write
// to it failed) keeps its entries while the shard has fewer in-sync
// replicas than the replication factor: its copy is the one a delta resync
// would start from. They go once the shard is whole again without it, and
// at once when the node is being drained.
TEST_F(SlotJanitorTest, ACopyOfAShardBelowItsReplicationFactorIsKeptUntilTheShardIsWhole) {
  janitor_ = std::make_unique<SlotJanitor>(store_.get(), &state_);
  const std::vector<std::vector<v1::SlotRange>> ranges = {
      {Range(0, 5999)}, {Range(6000, 11999)}, {Range(12000, 16383)}};
  v1::ClusterMap m = Map(1, ranges);
  m.set_replication_factor(2);
  m.mutable_shards(0)->add_replicas("n2");
  m.mutable_shards(1)->add_replicas("n1");  // n1 backs shard 2
  m.mutable_shards(2)->add_replicas("n2");
  Install(m);
  ASSERT_EQ(Present("two"), 4);
  ASSERT_EQ(Present("three"), 0);  // shard 3 is whole without n1

  m.set_epoch(2);
  m.mutable_shards(1)->mutable_replicas()->RemoveLast();  // n1 dropped
  Install(m);
  EXPECT_EQ(Present("two"), 4);
  EXPECT_EQ(Present("import"), 4);

  m.set_epoch(3);
  m.mutable_shards(1)->add_syncing("n3");  // a replacement copies
  Install(m);
  EXPECT_EQ(Present("two"), 4);

  m.set_epoch(4);
  m.mutable_shards(1)->clear_syncing();
  m.mutable_shards(1)->add_replicas("n3");  // in sync: the shard is whole
  Install(m);
  EXPECT_EQ(Present("two"), 0);
  EXPECT_EQ(Present("import"), 0);
  EXPECT_EQ(Present("mid"), 4);
}

TEST(SlotRolesTest, ADrainingNodeKeepsNoCopyOfAShardBelowItsReplicationFactor) {
  v1::ClusterMap m = Map(1, {{Range(0, 5999)}, {Range(6000, 11999)}, {Range(12000, 16383)}});
  m.set_replication_factor(2);
  EXPECT_TRUE(SlotRoles(*View(m), "n1")[6000]);
  m.add_draining()->set_node_id("n1");
  EXPECT_FALSE(SlotRoles(*View(m), "n1")[6000]);
  EXPECT_TRUE(SlotRoles(*View(m), "n1")[0]);  // its own role stays a role
}

TEST(SlotRolesTest, ReplicaSyncingAndImportTarget) {
  v1::ClusterMap m = Map(1, {{Range(0, 5999)}, {Range(6000, 11999)}, {Range(12000, 16383)}});
  m.mutable_shards(2)->add_replicas("n1");  // n1 backs shard 3
  auto view = View(m);
  ASSERT_NE(view, nullptr);
  std::vector<bool> roles = SlotRoles(*view, "n1");
  EXPECT_TRUE(roles[0]);
  EXPECT_TRUE(roles[5999]);
  EXPECT_FALSE(roles[6000]);
  EXPECT_TRUE(roles[12000]);
  EXPECT_TRUE(roles[16383]);
  roles = SlotRoles(*view, "n9");  // a node in no shard has no role at all
  EXPECT_EQ(std::count(roles.begin(), roles.end(), true), 0);
}

// A DOWN shard's last in-sync replicas keep its slots: their copy is what
// can bring the shard back.
TEST(SlotRolesTest, TheLastInSyncReplicasOfADownShardKeepItsSlots) {
  v1::ClusterMap m = Map(1, {{Range(0, 5999)}, {Range(6000, 11999)}, {Range(12000, 16383)}});
  m.mutable_shards(1)->clear_replicas();
  m.mutable_shards(1)->add_last_in_sync()->set_node_id("n2");
  m.mutable_nodes()->erase(m.mutable_nodes()->begin() + 1);  // n2 is in no shard now
  auto view = View(m);
  ASSERT_NE(view, nullptr);
  std::vector<bool> roles = SlotRoles(*view, "n2");
  EXPECT_TRUE(roles[6000]);
  EXPECT_TRUE(roles[11999]);
  EXPECT_FALSE(roles[0]);
  EXPECT_FALSE(SlotRoles(*view, "n1")[6000]);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
