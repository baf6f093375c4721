// Copyright 2026 The kvstore Authors.
//
// Slot migration's data path (architecture §19.9) end to end, in one
// process: real KvStores behind real Replicators, SlotImporters,
// MigrationDrivers and KvCluster services on real gRPC servers; only the
// etcd map is a fake (replication_test_util.h; the etcd-backed editor's
// BeginHandoff/CompleteMigration are map_store_test's).
//
// MigrationEtcdTest runs the driver against the etcd-backed map (MapStore)
// on an in-memory etcd (FakeEtcd), each node installing every stored map
// from a watch, as Membership would.
//
// Layout: shard 0 owns slots 0-8191, shard 1 owns 8192-16383; migration 1
// moves slots 0-2047 from shard 0 to shard 1.

#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"
#include "common/failpoint/failpoint_testing.h"
#include "common/metrics/testing.h"
#include "common/testing/eventually.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/cluster/membership/etcd/fake_etcd_client.h"
#include "server/cluster/membership/etcd_keys.h"
#include "server/cluster/membership/map_store.h"
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
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint32_t kMigrationId = 1;
constexpr uint32_t kLastMovedSlot = 2047;

// `n` distinct keys whose slots are in [lo, hi], from `prefix`.
std::vector<std::string> KeysIn(uint32_t lo, uint32_t hi, int n, absl::string_view prefix) {
  std::vector<std::string> keys;
  for (int i = 0; static_cast<int>(keys.size()) < n; ++i) {
    std::string k = absl::StrCat(prefix, i);
    const uint32_t slot = cluster::KeySlot(k);
    if (slot >= lo && slot <= hi) keys.push_back(std::move(k));
  }
  return keys;
}

class MigrationTest : public ::testing::Test {
 public:
  void Start(int n, NodeOptions options = {}) {
    for (int i = 0; i < n; ++i) {
      nodes_.push_back(std::make_unique<Node>(absl::StrCat("n", i), &maps_, options));
    }
  }
  Node& node(int i) { return *nodes_[i]; }

  v1::ClusterMap TwoShards(std::vector<int> s0, std::vector<int> s1, v1::MigrationState state) {
    std::vector<Node*> all;
    for (auto& n : nodes_) all.push_back(n.get());
    return testing::TwoShardMap(all, s0, s1, state, kLastMovedSlot);
  }

  // A write as a cluster-aware client makes it: start at node `first`,
  // follow kMoved / kAsk, retry kTryAgain and kClusterDown — refusals of no
  // effect only — (1 ms apart, for as long as Eventually's generous bound:
  // a loaded machine makes a handoff longer, not wrong); OK once
  // acknowledged.
  absl::Status ClientPut(int first, const std::string& key, const std::string& value) {
    using cluster::RefusalKind;
    int at = first;
    absl::Status s;
    auto done = [&] {
      s = node(at).Put(key, value);
      if (s.ok()) return true;
      const std::optional<cluster::Refusal> r = cluster::FromStatus(s);
      if (!r.has_value() || r->effect != cluster::Effect::kNone) return true;
      if (r->kind == RefusalKind::kMoved || r->kind == RefusalKind::kAsk) {
        int port = 0;
        CHECK(absl::SimpleAtoi(r->address.substr(r->address.rfind(':') + 1), &port));
        at = port - 7000;  // OneShardMap's resp addresses
        return false;
      }
      return r->kind != RefusalKind::kTryAgain && r->kind != RefusalKind::kClusterDown;
    };
    if (!Eventually(done, ::kvstore::testing::kEventuallyBound, absl::Milliseconds(1))) {
      return absl::DeadlineExceededError(absl::StrCat("still refused: ", s.ToString()));
    }
    return s;
  }

  FakeMapStore maps_;  // outlives the nodes, which it points to
  std::vector<std::unique_ptr<Node>> nodes_;
};

// n0 leads shard 0 (n1 backs it), n2 leads shard 1 (n3 backs it).
TEST_F(MigrationTest, ForwardedWritesReachTheTargetAndItsBackup) {
  Start(4);
  maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_COPYING));
  const std::vector<std::string> moved = KeysIn(0, kLastMovedSlot, 20, "m");
  const std::vector<std::string> staying = KeysIn(kLastMovedSlot + 1, 8191, 5, "s");
  for (const std::string& k : moved) ASSERT_TRUE(node(0).Put(k, "v-" + k).ok()) << k;
  for (const std::string& k : staying) ASSERT_TRUE(node(0).Put(k, "v-" + k).ok()) << k;
  for (const std::string& k : moved) {
    for (int i : {0, 1, 2, 3}) EXPECT_EQ(node(i).Value(k), "v-" + k) << k << " on n" << i;
  }
  for (const std::string& k : staying) {
    EXPECT_EQ(node(1).Value(k), "v-" + k);
    EXPECT_EQ(node(2).Value(k), "<NOT_FOUND>") << k << " is not migrating";
  }
  ASSERT_TRUE(node(0).Delete(moved[0]).ok());
  EXPECT_EQ(node(2).Value(moved[0]), "<NOT_FOUND>");
  EXPECT_EQ(node(3).Value(moved[0]), "<NOT_FOUND>");
  EXPECT_EQ(Value(node(0).registry(), "kvstore_migration_forwarded_writes_total"), 21u);
  EXPECT_EQ(Value(node(2).registry(), "kvstore_import_writes_total"), 21u);
}

TEST_F(MigrationTest, AWriteTheTargetRefusesIsNotPublished) {
  // The killed target refuses connections at once; the timeout only has
  // to be long enough for n1's install on a loaded machine (300 ms was not,
  // under ASan: n1 was dropped from the in-sync set).
  NodeOptions o;
  o.replication_timeout = absl::Seconds(20);
  Start(4, o);
  maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_COPYING));
  const std::string k = KeysIn(0, kLastMovedSlot, 1, "m")[0];
  node(2).Kill();
  absl::Status s = node(0).Put(k, "v");
  // n1, the source's backup, installed it before the forward failed: not
  // published, but not certainly absent, so its outcome is unknown.
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown) << s;
  EXPECT_THAT(std::string(s.message()), StartsWith("outcome unknown: TRYAGAIN Hash slot "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("migration target n2 unavailable"));
  EXPECT_TRUE(cluster::IsRefusal(s, cluster::RefusalKind::kTryAgain));
  EXPECT_FALSE(cluster::CertainlyNoEffect(s));
  EXPECT_EQ(node(0).Value(k), "<NOT_FOUND>");
  EXPECT_EQ(node(1).Value(k), "v");
  // The target stays in every set: nothing was dropped.
  EXPECT_EQ(maps_.Current().shards(1).replicas_size(), 2);
  EXPECT_EQ(maps_.Current().shards(0).replicas_size(), 2);
  EXPECT_EQ(Value(node(0).registry(), "kvstore_migration_forward_failures_total"), 1u);
}

TEST_F(MigrationTest, ImportRefusesASenderThatDoesNotLeadTheSource) {
  Start(4);
  maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_COPYING));
  auto stub = node(2).NewStub();
  v1::BeginImportRequest req;
  req.set_migration_id(kMigrationId);
  req.set_map_epoch(maps_.Current().epoch());
  req.set_source_node_id("n1");  // a backup, not the source primary
  req.set_source_incarnation(101);
  v1::BeginImportResponse resp;
  grpc::ClientContext c1;
  EXPECT_EQ(stub->BeginImport(&c1, req, &resp).error_code(), grpc::FAILED_PRECONDITION);
  req.set_source_node_id("n0");
  req.set_source_incarnation(999);  // not the map's incarnation
  grpc::ClientContext c2;
  EXPECT_EQ(stub->BeginImport(&c2, req, &resp).error_code(), grpc::FAILED_PRECONDITION);
  req.set_source_incarnation(100);
  req.set_map_epoch(maps_.Current().epoch() + 1);
  grpc::ClientContext c3;
  grpc::Status behind = stub->BeginImport(&c3, req, &resp);
  EXPECT_EQ(behind.error_code(), grpc::UNAVAILABLE);
  EXPECT_THAT(behind.error_message(), StartsWith("map behind"));
  // n3 does not lead the target shard.
  req.set_map_epoch(maps_.Current().epoch());
  grpc::ClientContext c4;
  EXPECT_EQ(node(3).NewStub()->BeginImport(&c4, req, &resp).error_code(),
            grpc::FAILED_PRECONDITION);
}

TEST_F(MigrationTest, ACopyNeverUndoesAForwardedWriteAndStaleSessionsAreRefused) {
  Start(4);
  maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_COPYING));
  const std::vector<std::string> keys = KeysIn(0, kLastMovedSlot, 2, "m");
  ASSERT_TRUE(node(0).Put(keys[0], "old").ok());
  ASSERT_TRUE(node(0).Put(keys[1], "copied").ok());
  auto old_entry = node(0).store().CopyEntry(keys[0]);
  auto other_entry = node(0).store().CopyEntry(keys[1]);
  ASSERT_TRUE(old_entry.ok() && other_entry.ok());
  ASSERT_TRUE(node(2).store().DeleteReplica(keys[1]).ok());  // only the copy brings it back

  auto stub = node(2).NewStub();
  v1::BeginImportRequest begin;
  begin.set_migration_id(kMigrationId);
  begin.set_map_epoch(maps_.Current().epoch());
  begin.set_source_node_id("n0");
  begin.set_source_incarnation(100);
  v1::BeginImportResponse session;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub->BeginImport(&c1, begin, &session).ok());
  ASSERT_TRUE(node(0).Put(keys[0], "new").ok());  // forwarded: touched in the session

  v1::ImportEntriesRequest batch;
  batch.set_migration_id(kMigrationId);
  batch.set_session(session.session());
  batch.add_entries(*old_entry);
  batch.add_entries(*other_entry);
  v1::ImportEntriesResponse resp;
  grpc::ClientContext c2;
  ASSERT_TRUE(stub->ImportEntries(&c2, batch, &resp).ok());
  EXPECT_EQ(resp.skipped(), 1u);
  EXPECT_EQ(resp.installed(), 1u);
  EXPECT_EQ(node(2).Value(keys[0]), "new");
  EXPECT_EQ(node(3).Value(keys[0]), "new");
  EXPECT_EQ(node(2).Value(keys[1]), "copied");
  EXPECT_EQ(node(3).Value(keys[1]), "copied") << "a copied entry is replicated too";

  // A new session replaces the old one.
  v1::BeginImportResponse second;
  grpc::ClientContext c3;
  ASSERT_TRUE(stub->BeginImport(&c3, begin, &second).ok());
  EXPECT_NE(second.session(), session.session());
  grpc::ClientContext c4;
  grpc::Status stale = stub->ImportEntries(&c4, batch, &resp);
  EXPECT_EQ(stale.error_code(), grpc::NOT_FOUND);
  EXPECT_THAT(stale.error_message(), HasSubstr("no import session"));
  // In the new session nothing is touched yet: the copy installs.
  batch.set_session(second.session());
  grpc::ClientContext c5;
  ASSERT_TRUE(stub->ImportEntries(&c5, batch, &resp).ok());
  EXPECT_EQ(resp.installed(), 2u);
  EXPECT_EQ(node(2).Value(keys[0]), "old");
}

TEST_F(MigrationTest, AcceptHandoffNeedsHandoffInTheMap) {
  Start(4);
  maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_COPYING));
  v1::AcceptHandoffRequest req;
  req.set_migration_id(kMigrationId);
  req.set_map_epoch(maps_.Current().epoch());
  req.set_source_node_id("n0");
  req.set_source_incarnation(100);
  v1::AcceptHandoffResponse resp;
  auto stub = node(2).NewStub();
  grpc::ClientContext c1;
  EXPECT_EQ(stub->AcceptHandoff(&c1, req, &resp).error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_FALSE(node(2).state().HandoffAccepted(kMigrationId));
  maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_HANDOFF));
  req.set_map_epoch(maps_.Current().epoch());
  for (int i = 0; i < 2; ++i) {  // idempotent
    grpc::ClientContext c;
    EXPECT_TRUE(stub->AcceptHandoff(&c, req, &resp).ok());
  }
  EXPECT_TRUE(node(2).state().HandoffAccepted(kMigrationId));
}

// The driver moves the slots while a client keeps writing; every
// acknowledged write ends up on the target shard's primary and backup.
// `set_map` publishes a map (with the next epoch).
void RunMigrationUnderWrites(MigrationTest& t, const std::function<void(v1::ClusterMap)>& set_map,
                             const std::function<v1::ClusterMap()>& current) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  set_map(t.TwoShards({0, 1}, {2, 3}, v1::MIGRATION_STATE_UNSPECIFIED));
  std::vector<std::string> keys = KeysIn(0, kLastMovedSlot, 400, "m");
  const std::vector<std::string> staying = KeysIn(kLastMovedSlot + 1, 8191, 50, "s");
  keys.insert(keys.end(), staying.begin(), staying.end());
  std::map<std::string, std::string> acked;
  for (const std::string& k : keys) {
    const std::string v = absl::StrCat("first-", k, std::string(rng() % 2000, 'x'));
    ASSERT_TRUE(t.ClientPut(0, k, v).ok()) << k;
    acked[k] = v;
  }
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::map<std::string, std::string> acked_later;
  // Keys whose last write's outcome is unknown: a write that straddles the
  // handoff may have reached the target (which serves the slot next)
  // although the source could not publish it. It is not sent again, and
  // either value may be the key's.
  std::set<std::string> unsettled;
  int unknown = 0;
  std::thread writer([&] {
    std::mt19937 wrng(seed + 1);
    while (!stop.load()) {
      const std::string& k = keys[wrng() % keys.size()];
      const std::string v = absl::StrCat("w", writes.load(), "-", wrng());
      absl::Status s = t.ClientPut(0, k, v);
      const std::optional<cluster::Refusal> r = cluster::FromStatus(s);
      ASSERT_TRUE(s.ok() || (r.has_value() && r->effect == cluster::Effect::kUnknown))
          << k << ": " << s;
      if (s.ok()) {
        acked_later[k] = v;
        unsettled.erase(k);
      } else {
        ++unknown;
        unsettled.insert(k);
      }
      ++writes;
    }
  });
  const absl::Time start = absl::Now();
  set_map(t.TwoShards({0, 1}, {2, 3}, v1::MIGRATION_COPYING));
  EXPECT_TRUE(Eventually([&] { return current().migrations_size() == 0; }));
  const int at_flip = writes.load();
  EXPECT_TRUE(Eventually([&] { return writes.load() > at_flip + 50; }));
  stop = true;
  writer.join();
  std::printf("migration took %.3f s; %d writes during it, %d of unknown outcome\n",
              absl::ToDoubleSeconds(absl::Now() - start), writes.load(), unknown);
  EXPECT_GT(at_flip, 0) << "writes went on during the migration";
  for (auto& [k, v] : acked_later) acked[k] = v;

  const v1::ClusterMap map = current();
  ASSERT_EQ(map.shards(1).slots_size(), 2);
  EXPECT_EQ(map.shards(1).slots(0).start(), 0u);
  EXPECT_EQ(map.shards(1).slots(0).end(), kLastMovedSlot);
  EXPECT_EQ(map.shards(0).slots(0).start(), kLastMovedSlot + 1);
  for (const auto& [k, v] : acked) {
    if (unsettled.count(k) > 0) continue;
    const bool moved = cluster::KeySlot(k) <= kLastMovedSlot;
    for (int i : moved ? std::vector<int>{2, 3} : std::vector<int>{0, 1}) {
      ASSERT_EQ(t.node(i).Value(k), v) << k << " on n" << i;
    }
  }
  EXPECT_EQ(Value(t.node(0).registry(), "kvstore_migration_handoffs_total"), 1u);
  EXPECT_GE(Value(t.node(0).registry(), "kvstore_migration_entries_copied_total"), 400u);
}

TEST_F(MigrationTest, TheDriverRunsAWholeMigrationUnderWrites) {
  NodeOptions o;
  o.migration_thread = true;
  Start(4, o);
  RunMigrationUnderWrites(
      *this, [&](v1::ClusterMap m) { maps_.Set(std::move(m)); }, [&] { return maps_.Current(); });
}

constexpr char kCluster[] = "migtest";

class MigrationEtcdTest : public MigrationTest {
 protected:
  void SetUp() override {
    client_ = etcd_.NewClient();
    auto lease = client_->GrantLease(absl::Seconds(30));
    ASSERT_TRUE(lease.ok()) << lease.status();
    lease_ = *lease;
  }
  void TearDown() override { mirror_.reset(); }
  // Nodes whose editor is a MapStore on etcd, and a watch installing every
  // stored map in every node (as Membership's would).
  void StartOnEtcd(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(
          client_->Put(etcd_keys::MemberKey(kCluster, absl::StrCat("n", i)), "{}", lease_).ok());
    }
    NodeOptions o;
    o.migration_thread = true;
    o.make_editor = [this](ClusterState* state) -> std::unique_ptr<ShardMapEditor> {
      MapStoreOptions mo;
      mo.cluster_name = kCluster;
      mo.node_id = state->self();
      mo.lease = lease_;
      return std::make_unique<MapStore>(client_.get(), state, mo);
    };
    Start(n, o);
    int64_t revision = 0;
    ASSERT_TRUE(client_->GetPrefix(etcd_keys::MapKey(kCluster), &revision).ok());
    auto watch = client_->Watch(etcd_keys::MapKey(kCluster), revision + 1,
                                [this](absl::StatusOr<std::vector<etcd::WatchEvent>> events) {
                                  ASSERT_TRUE(events.ok()) << events.status();
                                  for (const etcd::WatchEvent& e : *events) {
                                    if (e.type != etcd::WatchEvent::Type::kPut) continue;
                                    auto m = etcd_keys::DecodeMap(e.kv.value);
                                    ASSERT_TRUE(m.ok()) << m.status();
                                    auto view = cluster::ClusterMapView::Build(*m);
                                    ASSERT_TRUE(view.ok()) << view.status();
                                    for (auto& node : nodes_) node->state().Update(*view);
                                  }
                                });
    ASSERT_TRUE(watch.ok()) << watch.status();
    mirror_ = *std::move(watch);
  }
  v1::ClusterMap Stored() {
    auto kv = client_->Get(etcd_keys::MapKey(kCluster));
    if (!kv.ok() || !kv->has_value()) return v1::ClusterMap();
    auto m = etcd_keys::DecodeMap((*kv)->value);
    return m.ok() ? *m : v1::ClusterMap();
  }
  void Publish(v1::ClusterMap m) {
    m.set_cluster_name(kCluster);
    // Every node's member key is held under lease_: the map names those
    // incarnations (a MapStore refuses edits by another incarnation).
    for (v1::ClusterNode& n : *m.mutable_nodes()) n.set_incarnation(static_cast<uint64_t>(lease_));
    m.set_epoch(Stored().epoch() + 1);
    ASSERT_TRUE(client_->Put(etcd_keys::MapKey(kCluster), etcd_keys::EncodeMap(m)).ok());
  }

  etcd::FakeEtcd etcd_;
  std::unique_ptr<etcd::EtcdClient> client_;
  int64_t lease_ = 0;
  std::unique_ptr<etcd::WatchHandle> mirror_;
};

TEST_F(MigrationEtcdTest, TheDriverRunsAWholeMigrationOnTheEtcdMap) {
  StartOnEtcd(4);
  RunMigrationUnderWrites(
      *this, [&](v1::ClusterMap m) { Publish(std::move(m)); }, [&] { return Stored(); });
}

// A target that fails mid-copy: the step fails, the source copies again
// to the target's successor (its backup, promoted), which ends up with
// every entry.
TEST_F(MigrationTest, TheDriverCopiesAgainToAFailedOverTarget) {
  NodeOptions o;
  o.replication_timeout =
      absl::Seconds(20);  // a killed node refuses at once; live ones may be slow
  Start(4, o);
  maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_STATE_UNSPECIFIED));
  const std::vector<std::string> keys = KeysIn(0, kLastMovedSlot, 100, "m");
  for (const std::string& k : keys) ASSERT_TRUE(node(0).Put(k, "v-" + k).ok());
  maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_COPYING));
  node(2).Kill();
  absl::Status failed = node(0).driver().Step();
  EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_EQ(maps_.Current().migrations(0).state(), v1::MIGRATION_COPYING);
  // The controller's failover: n3 leads shard 1 now.
  maps_.Set(TwoShards({0, 1}, {3}, v1::MIGRATION_COPYING));
  ASSERT_TRUE(node(0).driver().Step().ok());
  ASSERT_TRUE(node(0).driver().Step().ok());
  EXPECT_EQ(maps_.Current().migrations_size(), 0);
  for (const std::string& k : keys) EXPECT_EQ(node(3).Value(k), "v-" + k) << k;
  EXPECT_EQ(Value(node(3).registry(), "kvstore_import_entries_total"), keys.size());
}

// One node leads both shards: its forward is a local call under the locks
// it holds, and the driver still completes.
TEST_F(MigrationTest, SourceAndTargetOnOneNodeDoNotDeadlock) {
  Start(2);
  maps_.Set(TwoShards({0, 1}, {0, 1}, v1::MIGRATION_COPYING));
  const std::vector<std::string> keys = KeysIn(0, kLastMovedSlot, 50, "m");
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (size_t i = t; i < keys.size(); i += 4) {
        EXPECT_TRUE(node(0).Put(keys[i], "v-" + keys[i]).ok()) << keys[i];
      }
    });
  }
  for (std::thread& w : writers) w.join();
  for (const std::string& k : keys) EXPECT_EQ(node(1).Value(k), "v-" + k);
  EXPECT_EQ(Value(node(0).registry(), "kvstore_import_writes_total"), keys.size());
  // COPYING -> HANDOFF, then HANDOFF -> flip.
  ASSERT_TRUE(node(0).driver().Step().ok());
  EXPECT_EQ(maps_.Current().migrations(0).state(), v1::MIGRATION_HANDOFF);
  const absl::Status handing = node(0).Put(keys[0], "x");
  EXPECT_TRUE(cluster::IsRefusal(handing, cluster::RefusalKind::kTryAgain)) << handing;
  EXPECT_TRUE(cluster::CertainlyNoEffect(handing)) << handing;
  ASSERT_TRUE(node(0).driver().Step().ok());
  EXPECT_EQ(maps_.Current().migrations_size(), 0);
  ASSERT_TRUE(node(0).Put(keys[0], "after").ok());
  EXPECT_EQ(node(1).Value(keys[0]), "after");
}

// A target shard whose backup is replaced by a joiner while a migration
// into it runs: n0 leads the source (n1 backs it), n2 leads the target, n3
// backs it until the joiner n4 takes its place. After the flip n2 is lost
// and n4 promoted: every acknowledged write of the moved slots must be on
// n4.
class MigrationJoinerTest : public MigrationTest {
 protected:
  void SetUp() override {
    Start(5);
    maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_STATE_UNSPECIFIED));
    keys_ = KeysIn(0, kLastMovedSlot, 200, "m");
    for (const std::string& k : keys_) ASSERT_TRUE(node(0).Put(k, "v-" + k).ok()) << k;
    maps_.Set(TwoShards({0, 1}, {2, 3}, v1::MIGRATION_COPYING));
  }

  // The controller's refill after n3 died: n4 syncs the target shard; then
  // n2 (its primary) marks it in sync once it copied.
  void ReplaceTargetBackupWithJoiner() {
    node(3).Kill();
    ASSERT_TRUE(maps_
                    .Edit([](v1::ClusterMap& m) {
                      v1::Shard* t = m.mutable_shards(1);
                      t->mutable_replicas()->RemoveLast();  // n3
                      t->add_syncing("n4");
                      t->set_shard_epoch(t->shard_epoch() + 1);
                      return absl::OkStatus();
                    })
                    .ok());
    ASSERT_TRUE(Eventually([&] {
      const v1::ClusterMap m = maps_.Current();
      return m.shards(1).replicas_size() == 2 && m.shards(1).replicas(1) == "n4";
    })) << maps_.Current().DebugString();
  }

  // Steps the source's driver until the migration is flipped.
  void FinishMigration() {
    ASSERT_TRUE(Eventually([&] {
      (void)node(0).driver().Step();
      return maps_.Current().migrations_size() == 0;
    })) << maps_.Current().DebugString();
  }

  // The target's primary n2 is lost; the controller promotes n4.
  void FailOverTargetToJoiner() {
    node(2).Kill();
    ASSERT_TRUE(maps_
                    .Edit([](v1::ClusterMap& m) {
                      v1::Shard* t = m.mutable_shards(1);
                      t->clear_replicas();
                      t->add_replicas("n4");
                      t->set_shard_epoch(t->shard_epoch() + 1);
                      return absl::OkStatus();
                    })
                    .ok());
  }

  void ExpectEveryMovedKeyOnTheJoiner(const std::map<std::string, std::string>& rewritten) {
    int missing = 0;
    for (const std::string& k : keys_) {
      auto it = rewritten.find(k);
      const std::string want = it != rewritten.end() ? it->second : "v-" + k;
      if (node(4).Value(k) != want) ++missing;
      EXPECT_EQ(node(4).Value(k), want) << k << " on the promoted joiner n4";
      if (missing > 5) break;
    }
    EXPECT_EQ(missing, 0);
  }

  std::vector<std::string> keys_;
};

// The joiner copies the target while the bulk copy is done but the
// migration is still COPYING (the scenario of a backup lost mid-rebalance).
TEST_F(MigrationJoinerTest, AJoinerDuringTheCopyHoldsTheMovedSlotsAfterTheFlip) {
  std::map<std::string, std::string> rewritten;
  {
    failpoint::Pause copied("migration/after-copy");
    absl::Status first;
    std::thread step([&] { first = node(0).driver().Step(); });
    ASSERT_TRUE(copied.WaitUntilReached());
    EXPECT_EQ(node(3).Value(keys_[0]), "v-" + keys_[0]) << "the copy reached the old backup";
    ReplaceTargetBackupWithJoiner();
    // A write of a moved slot after the joiner is in: forwarded and
    // replicated to it.
    ASSERT_TRUE(ClientPut(0, keys_[1], "after-join").ok());
    rewritten[keys_[1]] = "after-join";
    copied.Release();
    step.join();
    LOG(INFO) << "the step that copied: " << first;
  }
  FinishMigration();
  EXPECT_THAT(maps_.Current().shards(1).replicas(), Contains("n4"));
  FailOverTargetToJoiner();
  ExpectEveryMovedKeyOnTheJoiner(rewritten);
}

// The joiner comes during HANDOFF: nothing is copied from the source any
// more, so its own copy of the target shard must carry the moved slots.
TEST_F(MigrationJoinerTest, AJoinerDuringTheHandoffHoldsTheMovedSlotsAfterTheFlip) {
  ASSERT_TRUE(node(0).driver().Step().ok());
  ASSERT_EQ(maps_.Current().migrations(0).state(), v1::MIGRATION_HANDOFF);
  ReplaceTargetBackupWithJoiner();
  FinishMigration();
  FailOverTargetToJoiner();
  ExpectEveryMovedKeyOnTheJoiner({});
}

// The target shard's membership changed while the source copied: the copy
// may have missed a member that joined meanwhile, so the source does not
// hand off on it and copies again.
TEST_F(MigrationJoinerTest, ACopyUnderWhichTheTargetChangedIsRepeated) {
  failpoint::Pause copied("migration/after-copy");
  absl::Status first;
  std::thread step([&] { first = node(0).driver().Step(); });
  ASSERT_TRUE(copied.WaitUntilReached());
  ReplaceTargetBackupWithJoiner();
  copied.Release();
  step.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(first)) << first;
  EXPECT_THAT(std::string(first.message()), HasSubstr("copy again"));
  EXPECT_EQ(maps_.Current().migrations(0).state(), v1::MIGRATION_COPYING);
  const uint64_t copied_once = Value(node(0).registry(), "kvstore_migration_entries_copied_total");
  ASSERT_TRUE(node(0).driver().Step().ok());
  EXPECT_EQ(maps_.Current().migrations(0).state(), v1::MIGRATION_HANDOFF);
  EXPECT_EQ(Value(node(0).registry(), "kvstore_migration_entries_copied_total"), 2 * copied_once);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
