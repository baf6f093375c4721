// Copyright 2026 The kvstore Authors.
//
// A lease lapse costs no data. Three in-process kvservers in cluster mode
// (R=2, the default --min_insync_replicas=2) on one in-memory etcd
// (FakeEtcd). Every member lease expires at once, as when etcd pauses for
// longer than the TTL. Before, every kvserver exited with status 3 and came
// back empty. Now each stays up, fenced, registers again under a new lease
// (a new incarnation of the same process) publishing the shard copies it
// holds, and the controller gives every DOWN shard back to the copy with
// the highest applied seq; the other copy copies again and rejoins. Every
// acknowledged key is read back and writes are accepted again.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "common/cluster/slots.h"
#include "common/metrics/exposition.h"
#include "common/testing/eventually.h"
#include "gtest/gtest.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/cluster_node.h"
#include "server/cluster/membership/etcd/fake_etcd_client.h"
#include "server/cluster/membership/etcd_keys.h"
#include "server/kv_server.h"

namespace kvstore {
namespace {

using ::kvstore::testing::Eventually;
using server::KvServer;
using server::KvServerOptions;

constexpr char kCluster[] = "lapse";
constexpr int kNodes = 3;
constexpr int kKeys = 200;
// The peers' secret (cluster mode needs one; no client holds it).
constexpr char kClusterSecret[] = "lease-lapse-test-secret";

class LeaseLapseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reader_ = etcd_.NewClient("test");
    for (int i = 0; i < kNodes; ++i) {
      auto s = KvServer::Start(Options(i));
      ASSERT_TRUE(s.ok()) << s.status();
      servers_.push_back(*std::move(s));
    }
  }
  void TearDown() override {
    for (auto& s : servers_) s->Shutdown();
  }

  KvServerOptions Options(int i) {
    KvServerOptions o;
    o.listen_address = "127.0.0.1";
    o.control_port = 0;
    o.resp_port = 0;
    o.pool_bytes = 16ull << 20;
    o.segment_bytes = 1ull << 20;
    o.transport = server::ServerTransport::kTcp;
    o.cluster.etcd_endpoints = {"127.0.0.1:1"};  // cluster mode; the fake answers
    o.cluster_secret = kClusterSecret;
    o.cluster.node_id = absl::StrCat("n", i);
    o.cluster.cluster_name = kCluster;
    o.cluster.replicas = replicas_;
    o.cluster.cluster_min_nodes = kNodes;
    o.etcd_client_for_test = [this, i] { return etcd_.NewClient(absl::StrCat("n", i)); };
    o.on_lease_lost = [this] { ++lost_; };
    return o;
  }

  v1::ClusterMap Map() {
    auto kv = reader_->Get(server::etcd_keys::MapKey(kCluster));
    if (!kv.ok() || !kv->has_value()) return v1::ClusterMap();
    auto m = server::etcd_keys::DecodeMap((*kv)->value);
    return m.ok() ? *m : v1::ClusterMap();
  }
  // Every shard has two in-sync replicas and none syncing, and every node
  // applied that map.
  bool Settled() {
    v1::ClusterMap m = Map();
    if (m.shards_size() != kNodes) return false;
    for (const v1::Shard& s : m.shards()) {
      if (s.replicas_size() != replicas_ || s.syncing_size() != 0) return false;
    }
    for (auto& s : servers_) {
      if (s->cluster_state()->map_epoch() != m.epoch()) return false;
    }
    return true;
  }
  // Node i's member record in etcd (empty when it has none).
  v1::ClusterNode Member(int i) {
    auto kv = reader_->Get(server::etcd_keys::MemberKey(kCluster, absl::StrCat("n", i)));
    if (!kv.ok() || !kv->has_value()) return v1::ClusterNode();
    auto n = server::etcd_keys::DecodeNode((*kv)->value);
    return n.ok() ? *n : v1::ClusterNode();
  }
  std::unique_ptr<client::KvClient> Client() {
    client::Options o;
    for (auto& s : servers_) o.servers.push_back(absl::StrCat("127.0.0.1:", s->control_port()));
    o.transport = client::TransportMode::kTcp;
    auto c = client::KvClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  int replicas_ = 2;
  server::etcd::FakeEtcd etcd_;
  std::unique_ptr<server::etcd::EtcdClient> reader_;
  std::vector<std::unique_ptr<KvServer>> servers_;
  std::atomic<int> lost_{0};
};

TEST_F(LeaseLapseTest, EveryLeaseLapsesAndEveryShardComesBackWithItsData) {
  ASSERT_TRUE(Eventually([&] { return Settled(); }));
  auto before = Client();
  ASSERT_NE(before, nullptr);
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(before->Put(absl::StrCat("k", i), absl::StrCat("v", i)).ok()) << i;
  }
  std::vector<v1::ClusterNode> members;
  for (int i = 0; i < kNodes; ++i) members.push_back(Member(i));
  // etcd pauses longer than the TTL: every lease is gone at once.
  for (auto& s : servers_) ASSERT_TRUE(etcd_.ExpireLease(s->cluster_node()->incarnation()).ok());

  // Every node registers again: a new incarnation of the same process.
  ASSERT_TRUE(Eventually([&] {
    for (int i = 0; i < kNodes; ++i) {
      const uint64_t now = Member(i).incarnation();
      if (now == 0 || now == members[i].incarnation()) return false;
    }
    return true;
  }));
  EXPECT_EQ(lost_.load(), kNodes);
  for (int i = 0; i < kNodes; ++i) {
    EXPECT_FALSE(members[i].process_id().empty()) << i;
    EXPECT_EQ(Member(i).process_id(), members[i].process_id()) << i;
  }
  // Settled on a map that gives the new incarnations their roles (the old
  // map looks settled too, but names the lapsed ones).
  ASSERT_TRUE(Eventually([&] {
    if (!Settled()) return false;
    const v1::ClusterMap m = Map();
    for (int i = 0; i < kNodes; ++i) {
      for (const v1::ClusterNode& n : m.nodes()) {
        if (n.node_id() == absl::StrCat("n", i) && n.incarnation() != Member(i).incarnation()) {
          return false;
        }
      }
    }
    return m.nodes_size() == kNodes;
  }));
  const v1::ClusterMap settled = Map();
  for (const v1::Shard& s : settled.shards()) EXPECT_EQ(s.last_in_sync_size(), 0) << s.shard_id();
  auto after = Client();
  ASSERT_NE(after, nullptr);
  for (int i = 0; i < kKeys; ++i) {
    absl::StatusOr<std::string> v = after->Get(absl::StrCat("k", i));
    ASSERT_TRUE(v.ok()) << "k" << i << ": " << v.status();
    EXPECT_EQ(*v, absl::StrCat("v", i));
  }
  // Writes are accepted again.
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(after->Put(absl::StrCat("new", i), "x").ok()) << i;
  }
}

// One node's lease lapses while its process runs and the others' leases
// hold (its keepalives were lost). It registers again as a new incarnation
// of the same process and keeps what its memory holds: the controller
// gives its roles to the new incarnation (no departure, no failover), its
// primaries keep it in their in-sync sets through the writes that arrive
// meanwhile, and it receives no copy. Before, its backups refused it as
// "restarted, empty", the departure timer of its old incarnation took its
// roles, and its memory was dropped and copied again in full.
TEST_F(LeaseLapseTest, ANodeWhoseLeaseLapsedKeepsItsRolesAndItsCopy) {
  ASSERT_TRUE(Eventually([&] { return Settled(); }));
  auto c = Client();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(c->Put(absl::StrCat("k", i), absl::StrCat("v", i)).ok()) << i;
  }
  const v1::ClusterMap before = Map();
  const v1::ClusterNode lapsed = Member(1);
  const uint64_t keys_before = servers_[1]->store()->size();
  ASSERT_GT(keys_before, 0u);
  ASSERT_TRUE(etcd_.ExpireLease(servers_[1]->cluster_node()->incarnation()).ok());
  ASSERT_TRUE(Eventually([&] {
    const uint64_t now = Member(1).incarnation();
    return now != 0 && now != lapsed.incarnation();
  }));
  // Writes while the map still names the earlier incarnation.
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(c->Put(absl::StrCat("k", i), absl::StrCat("w", i)).ok()) << i;
  }
  ASSERT_TRUE(Eventually([&] {
    const v1::ClusterMap m = Map();
    for (const v1::ClusterNode& n : m.nodes()) {
      if (n.node_id() == "n1") return n.incarnation() == Member(1).incarnation();
    }
    return false;
  }));
  const v1::ClusterMap after = Map();
  for (int s = 0; s < before.shards_size(); ++s) {
    EXPECT_EQ(std::vector<std::string>(after.shards(s).replicas().begin(),
                                       after.shards(s).replicas().end()),
              std::vector<std::string>(before.shards(s).replicas().begin(),
                                       before.shards(s).replicas().end()))
        << "shard " << before.shards(s).shard_id();
  }
  auto counters = metrics::FlattenSnapshot(servers_[1]->registry().TakeSnapshot());
  EXPECT_EQ(counters["kvstore_syncs_completed_total"], 0u);
  EXPECT_EQ(counters["kvstore_slot_janitor_deleted_total"], 0u);
  EXPECT_GE(servers_[1]->store()->size(), keys_before);
  for (int i = 0; i < kKeys; ++i) {
    absl::StatusOr<std::string> v = c->Get(absl::StrCat("k", i));
    ASSERT_TRUE(v.ok()) << "k" << i << ": " << v.status();
    EXPECT_EQ(*v, absl::StrCat("w", i));
  }
}

// A node cut from etcd for longer than the TTL is dropped by the controller
// (R=3 on three nodes: nobody can take its place, so its shards run on two
// in-sync replicas and its slot janitor keeps its copy). When it reaches
// etcd again it registers as the same process, publishing its copies; the
// controller places it in its shards again as syncing, and its delta resync
// streams only the slots written while it was away. Before, it dropped its
// copy and every key of its shards travelled again.
class LeaseLapseR3Test : public LeaseLapseTest {
 protected:
  LeaseLapseR3Test() { replicas_ = 3; }
};

TEST_F(LeaseLapseR3Test, ANodeDroppedAfterALongLapseResyncsOnlyTheSlotsThatChanged) {
  ASSERT_TRUE(Eventually([&] { return Settled(); }));
  auto c = Client();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(c->Put(absl::StrCat("k", i), absl::StrCat("v", i)).ok()) << i;
  }
  const uint64_t lapsed = Member(1).incarnation();
  etcd_.SetClientReachable("n1", false);
  ASSERT_TRUE(etcd_.ExpireLease(lapsed).ok());
  auto names_n1 = [&] {
    const v1::ClusterMap m = Map();
    for (const v1::Shard& s : m.shards()) {
      for (const std::string& id : s.replicas()) {
        if (id == "n1") return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(Eventually([&] { return !names_n1(); }));
  // Writes while it is away: ten keys change, one goes.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(c->Put(absl::StrCat("k", i), absl::StrCat("w", i)).ok()) << i;
  }
  ASSERT_TRUE(c->Delete("k10").ok());
  etcd_.SetClientReachable("n1", true);
  ASSERT_TRUE(Eventually([&] { return names_n1() && Settled(); }));

  uint64_t in_changed = 0;
  absl::flat_hash_set<uint32_t> changed;
  for (int i = 0; i <= 10; ++i) changed.insert(cluster::KeySlot(absl::StrCat("k", i)));
  for (int i = 0; i < kKeys; ++i) {
    if (i != 10 && changed.contains(cluster::KeySlot(absl::StrCat("k", i)))) ++in_changed;
  }
  // (The last sync counts itself done when ReportInSync answers, which may
  // come after its map.)
  std::map<std::string, uint64_t> counters;
  EXPECT_TRUE(Eventually([&] {
    counters = metrics::FlattenSnapshot(servers_[1]->registry().TakeSnapshot());
    return counters["kvstore_syncs_completed_total"] == static_cast<uint64_t>(kNodes);
  }));
  EXPECT_LE(counters["kvstore_sync_entries_total"], in_changed);
  EXPECT_GT(counters["kvstore_sync_slots_equal_total"], 0u);
  EXPECT_EQ(servers_[1]->store()->size(), servers_[0]->store()->size());
  for (int i = 0; i < kKeys; ++i) {
    absl::StatusOr<std::string> v = c->Get(absl::StrCat("k", i));
    if (i == 10) {
      EXPECT_TRUE(absl::IsNotFound(v.status())) << v.status();
      continue;
    }
    ASSERT_TRUE(v.ok()) << "k" << i << ": " << v.status();
    EXPECT_EQ(*v, absl::StrCat(i < 10 ? "w" : "v", i));
  }
}

}  // namespace
}  // namespace kvstore
