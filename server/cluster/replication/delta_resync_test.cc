// Copyright 2026 The kvstore Authors.
//
// Delta resync: a replica placed in a shard again while it still holds an
// earlier copy (back from a lease lapse, dropped and placed again) sends
// its per-slot digests with SyncShard, and the primary streams only the
// slots that differ. Real stores, replicators, installers and KvCluster
// services on real gRPC servers; the etcd map is a fake.

#include <atomic>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/slots.h"
#include "common/metrics/testing.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/replication/replication_test_util.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::metrics::testing::Value;
using ::kvstore::server::testing::FakeMapStore;
using ::kvstore::server::testing::Node;
using ::kvstore::server::testing::NodeOptions;
using ::kvstore::server::testing::OneShardMap;
using ::kvstore::testing::Eventually;
using ::kvstore::testing::IsOk;

class DeltaResyncTest : public ::testing::Test {
 protected:
  void Start(int n, NodeOptions options = {}) {
    for (int i = 0; i < n; ++i) {
      nodes_.push_back(std::make_unique<Node>(absl::StrCat("n", i), &maps_, options));
    }
  }
  std::vector<Node*> nodes() {
    std::vector<Node*> v;
    for (auto& n : nodes_) v.push_back(n.get());
    return v;
  }
  Node& node(int i) { return *nodes_[i]; }
  std::vector<std::string> replicas() {
    auto r = maps_.Current().shards(0).replicas();
    return {r.begin(), r.end()};
  }
  // Every key of `keys` reads the same on `a` and `b`.
  void ExpectSame(Node& a, Node& b, const std::vector<std::string>& keys, uint32_t seed) {
    for (const std::string& key : keys) {
      EXPECT_EQ(b.Value(key), a.Value(key)) << key << " seed " << seed;
    }
    EXPECT_EQ(b.store().size(), a.store().size()) << "seed " << seed;
  }

  FakeMapStore maps_;  // outlives the nodes, which it points to
  std::vector<std::unique_ptr<Node>> nodes_;
};

std::vector<std::string> Keys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat("k", i));
  return keys;
}

TEST_F(DeltaResyncTest, AJoinerStillHoldingTheShardCopiesOnlyTheSlotsThatChanged) {
  NodeOptions options;
  options.sync_thread = false;  // the test drives the copy
  Start(2, options);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  std::vector<std::string> keys = Keys(300);
  for (const std::string& k : keys) ASSERT_THAT(node(0).Put(k, "v1-" + k), IsOk());
  // n1 leaves the shard with its copy; n0 changes three keys meanwhile.
  maps_.Set(OneShardMap(nodes(), {0}, {}));
  ASSERT_THAT(node(0).Put("k5", "v2"), IsOk());
  ASSERT_THAT(node(0).Delete("k7"), IsOk());
  ASSERT_THAT(node(0).Put("fresh", "v1"), IsOk());
  keys.push_back("fresh");
  EXPECT_EQ(node(1).Value("k7"), "v1-k7");  // still in n1's memory

  maps_.Set(OneShardMap(nodes(), {0}, {1}));
  ASSERT_THAT(node(1).installer().SyncShardNow(0), IsOk());
  ExpectSame(node(0), node(1), keys, 0);
  EXPECT_EQ(node(1).Value("k7"), "<NOT_FOUND>");
  // Only the keys of the three changed slots travelled.
  std::vector<uint32_t> changed = {cluster::KeySlot("k5"), cluster::KeySlot("k7"),
                                   cluster::KeySlot("fresh")};
  uint64_t in_changed = 0;
  for (const std::string& k : keys) {
    const uint32_t slot = cluster::KeySlot(k);
    if (node(0).Value(k) != "<NOT_FOUND>" &&
        std::find(changed.begin(), changed.end(), slot) != changed.end()) {
      ++in_changed;
    }
  }
  EXPECT_EQ(Value(node(1).registry(), "kvstore_sync_entries_total"), in_changed);
  EXPECT_GT(Value(node(1).registry(), "kvstore_sync_slots_equal_total"), 100u);
  EXPECT_EQ(replicas(), (std::vector<std::string>{"n0", "n1"}));
}

TEST_F(DeltaResyncTest, AnEqualCopyTakesNoEntryAndAnEmptyOneTakesThemAll) {
  NodeOptions options;
  options.sync_thread = false;
  Start(3, options);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  const std::vector<std::string> keys = Keys(120);
  for (const std::string& k : keys) ASSERT_THAT(node(0).Put(k, "v-" + k), IsOk());
  maps_.Set(OneShardMap(nodes(), {0}, {1, 2}));
  ASSERT_THAT(node(1).installer().SyncShardNow(0), IsOk());
  ASSERT_THAT(node(2).installer().SyncShardNow(0), IsOk());
  ExpectSame(node(0), node(1), keys, 0);
  ExpectSame(node(0), node(2), keys, 0);
  EXPECT_EQ(Value(node(1).registry(), "kvstore_sync_entries_total"), 0u);
  EXPECT_EQ(Value(node(2).registry(), "kvstore_sync_entries_total"), keys.size());
}

// The copy a joiner keeps meets writes that go on while it resyncs: every
// replica ends equal, whichever slots were found equal.
TEST_F(DeltaResyncTest, AResyncUnderConcurrentWritesEndsEqual) {
  Start(3);
  maps_.Set(OneShardMap(nodes(), {0, 1, 2}, {}));
  const uint32_t seed = static_cast<uint32_t>(absl::ToUnixNanos(absl::Now()));
  std::cout << "seed " << seed << std::endl;
  std::mt19937 rng(seed);
  constexpr int kKeys = 600;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_THAT(node(0).Put(absl::StrCat("k", i), std::string(10 + rng() % 500, 'a')), IsOk());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    std::mt19937 wrng(seed + 1);
    while (!stop.load()) {
      // A quarter of the keys change: most slots stay equal.
      std::string key = absl::StrCat("k", wrng() % (kKeys / 4));
      if (wrng() % 4 == 0) {
        absl::Status s = node(0).Delete(key);
        EXPECT_TRUE(s.ok() || absl::IsNotFound(s)) << s;
      } else {
        EXPECT_THAT(node(0).Put(key, absl::StrCat("w", writes.load(), "-", wrng())), IsOk());
      }
      ++writes;
    }
  });
  // n2 leaves while writes go on, then is placed again holding its copy.
  ASSERT_TRUE(Eventually([&] { return writes.load() >= 20; }));
  ASSERT_TRUE(maps_
                  .Edit([&](v1::ClusterMap& m) {
                    m.mutable_shards(0)->mutable_replicas()->RemoveLast();
                    m.mutable_shards(0)->set_shard_epoch(2);
                    return absl::OkStatus();
                  })
                  .ok());
  const int at_leave = writes.load();
  ASSERT_TRUE(Eventually([&] { return writes.load() >= at_leave + 50; }));
  ASSERT_TRUE(maps_
                  .Edit([&](v1::ClusterMap& m) {
                    m.mutable_shards(0)->add_syncing("n2");
                    m.mutable_shards(0)->set_shard_epoch(3);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_TRUE(Eventually([&] { return replicas().size() == 3; }));
  const int at_join = writes.load();
  EXPECT_TRUE(Eventually([&] { return writes.load() >= at_join + 20; }));
  stop = true;
  writer.join();
  const std::vector<std::string> keys = Keys(kKeys);
  ExpectSame(node(0), node(1), keys, seed);
  ExpectSame(node(0), node(2), keys, seed);
  EXPECT_EQ(Value(node(2).registry(), "kvstore_syncs_completed_total"), 1u);
  EXPECT_GT(Value(node(2).registry(), "kvstore_sync_slots_equal_total"), 0u) << "seed " << seed;
}

}  // namespace
}  // namespace server
}  // namespace kvstore
