// Copyright 2026 The kvstore Authors.
//
// In-sync replicas that differ on writes nobody acknowledged: a new primary
// makes every other in-sync replica equal to itself before it acknowledges
// a write, and a primary repairs a key whose write ended unknown on a
// backup it keeps before it acknowledges the shard's next write. Scripted
// with the Replicate seams of the in-process cluster (replication_test_util.h).

#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"
#include "common/failpoint/failpoint_testing.h"
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
using ::kvstore::server::testing::HookGate;
using ::kvstore::server::testing::Node;
using ::kvstore::server::testing::NodeOptions;
using ::kvstore::server::testing::OneShardMap;
using ::kvstore::server::testing::TwoShardMap;
using ::kvstore::testing::Eventually;
using ::kvstore::testing::IsOk;
using ::testing::ElementsAre;

constexpr char kAbsent[] = "<NOT_FOUND>";

class ReconcileTest : public ::testing::Test {
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
  // A write on `n` from a writer of its own, so that several are in flight
  // at once (Node::Put serialises one node's writes).
  static absl::Status PutVia(Node& n, const std::string& key, const std::string& value) {
    auto writer = n.store().NewWriter();
    return n.store().Put(writer.get(), key, value);
  }

  FakeMapStore maps_;  // outlives the nodes, which it points to
  std::vector<std::unique_ptr<Node>> nodes_;
};

// The primary dies with two writes of different keys in flight. Each
// backup's stream delivers them in seq order (a, then b), so the backups
// hold different prefixes: n1 installed a and waits on b; n2 waits on a,
// with b behind it. The backup promoted (n2) serves its own state, and its
// first acknowledged write comes after the other backup matches it: a
// reader of the new primary sees nothing that a second failover takes back.
TEST_F(ReconcileTest, APromotedBackupMakesTheOtherEqualBeforeItAcknowledges) {
  Start(3);
  maps_.Set(OneShardMap(nodes(), {0, 1, 2}, {}));
  ASSERT_THAT(node(0).Put("a", "a0"), IsOk());
  ASSERT_THAT(node(0).Put("b", "b0"), IsOk());
  HookGate release, n1_has_b, n2_has_a;
  // Both answers come after the crash.
  node(1).service().set_before([=](const v1::ReplicateRequest& r) {
    if (r.key() != "b") return absl::OkStatus();
    n1_has_b.Open();
    release.Wait();
    return absl::UnavailableError("cut off");
  });
  node(2).service().set_before([=](const v1::ReplicateRequest& r) {
    if (r.key() != "a") return absl::OkStatus();
    n2_has_a.Open();
    release.Wait();
    return absl::UnavailableError("cut off");
  });
  absl::Status put_a, put_b;
  std::thread wa([&] { put_a = PutVia(node(0), "a", "a1"); });
  ASSERT_TRUE(Eventually([&] { return node(1).Value("a") == "a1"; }));
  n2_has_a.Wait();
  std::thread wb([&] { put_b = PutVia(node(0), "b", "b1"); });
  n1_has_b.Wait();
  node(0).Kill();
  maps_.Set(OneShardMap(nodes(), {2, 1}, {}, /*shard_epoch=*/2));  // n0 crashed: n2 leads
  release.Open();
  wa.join();
  wb.join();
  EXPECT_FALSE(cluster::CertainlyNoEffect(put_a)) << put_a;
  EXPECT_FALSE(cluster::CertainlyNoEffect(put_b)) << put_b;
  node(1).service().set_before(nullptr);
  node(2).service().set_before(nullptr);

  ASSERT_THAT(node(2).Put("c", "c1"), IsOk());
  // Acknowledged: n1 holds exactly what n2 holds, a1 taken back.
  for (const char* key : {"a", "b", "c"}) EXPECT_EQ(node(1).Value(key), node(2).Value(key)) << key;
  EXPECT_EQ(node(2).Value("a"), "a0");
  // b: b0, or b1 if n2's stream still delivered it after the crash.
  const std::string seen = node(2).Value("b");  // a reader of the new primary
  node(2).Kill();
  maps_.Set(OneShardMap(nodes(), {1}, {}, /*shard_epoch=*/3));  // and n2 crashed: n1 leads
  EXPECT_EQ(node(1).Value("b"), seen);
  EXPECT_EQ(node(1).Value("a"), "a0");
  EXPECT_EQ(node(1).Value("c"), "c1");
}

// A manual failover while a write is in flight: the backup still on the
// old map installed it, the other (already on the new map) refused it, and
// the old primary published nothing. The first backup leads now; before
// its first acknowledgement both others hold the write too.
TEST_F(ReconcileTest, AManualFailoverSpreadsAWriteOnlyTheNewPrimaryInstalled) {
  Start(3);
  maps_.Set(OneShardMap(nodes(), {0, 1, 2}, {}));
  HookGate asked, release;
  node(2).service().set_before([=](const v1::ReplicateRequest& r) {
    if (r.key() == "k") {
      asked.Open();
      release.Wait();
    }
    return absl::OkStatus();
  });
  absl::Status put;
  std::thread writer([&] { put = node(0).Put("k", "v"); });
  asked.Wait();
  ASSERT_TRUE(Eventually([&] { return node(1).Value("k") == "v"; }));
  maps_.Set(OneShardMap(nodes(), {1, 0, 2}, {}, /*shard_epoch=*/2));  // failover to n1
  release.Open();
  writer.join();
  node(2).service().set_before(nullptr);
  EXPECT_FALSE(put.ok());
  EXPECT_FALSE(cluster::CertainlyNoEffect(put)) << put;
  ASSERT_THAT(node(1).Put("x", "1"), IsOk());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(node(i).Value("k"), "v") << i;
  EXPECT_THAT(replicas(), ElementsAre("n1", "n0", "n2"));
}

// R=2 with an in-sync floor of 2: the backup installed a write whose answer
// was lost. The primary keeps it (the floor), publishes nothing and answers
// "unknown". Before it acknowledges the shard's next write it gives the
// backup its own state of that key again (a value, or a delete), so the
// copies agree without waiting for the key to be written again. While that
// repair fails, later writes are refused before they go anywhere.
TEST_F(ReconcileTest, AKeyWhoseWriteEndedUnknownIsRepairedBeforeTheNextAck) {
  NodeOptions options;
  options.settle_idle = false;  // only the next write repairs here
  options.min_insync_replicas = 2;
  options.replication_timeout = absl::Milliseconds(500);
  Start(2, options);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  ASSERT_THAT(node(0).Put("k", "old"), IsOk());
  ASSERT_THAT(node(0).Put("gone", "old"), IsOk());
  struct Case {
    const char* key;
    const char* value;  // nullptr: a delete
    const char* before;
  };
  const Case cases[] = {{"k", "new", "old"}, {"gone", nullptr, "old"}, {"fresh", "1", kAbsent}};
  int acks = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    node(1).service().set_after(
        [](const v1::ReplicateRequest&) { return absl::UnavailableError("answer lost"); });
    absl::Status s = c.value != nullptr ? node(0).Put(c.key, c.value) : node(0).Delete(c.key);
    EXPECT_FALSE(cluster::CertainlyNoEffect(s)) << s;
    EXPECT_EQ(node(0).Value(c.key), c.before);
    EXPECT_EQ(node(1).Value(c.key), c.value != nullptr ? c.value : kAbsent);
    node(1).service().set_after(nullptr);
    ASSERT_THAT(node(0).Put(absl::StrCat("ack", acks), "1"), IsOk());
    ++acks;
    EXPECT_EQ(node(1).Value(c.key), c.before);
  }
  // A repair that fails refuses the next write with no effect.
  node(1).service().set_after(
      [](const v1::ReplicateRequest&) { return absl::UnavailableError("answer lost"); });
  EXPECT_FALSE(cluster::CertainlyNoEffect(node(0).Put("k", "newer")));
  absl::Status refused = node(0).Put("other", "1");
  EXPECT_TRUE(cluster::IsRefusal(refused, cluster::RefusalKind::kClusterDown)) << refused;
  EXPECT_TRUE(cluster::CertainlyNoEffect(refused)) << refused;
  EXPECT_EQ(node(1).Value("other"), kAbsent);
  node(1).service().set_after(nullptr);
  ASSERT_THAT(node(0).Put("other", "1"), IsOk());
  EXPECT_EQ(node(1).Value("k"), "old");
  EXPECT_THAT(replicas(), ElementsAre("n0", "n1"));
}

// A backup the new primary cannot reach is dropped from the in-sync set,
// as one that failed a write would be, when the floor allows; otherwise the
// shard acknowledges nothing (a refusal of no effect) until it answers.
TEST_F(ReconcileTest, ABackupThatCannotBeReconciledIsDroppedOrTheShardWaits) {
  NodeOptions options;
  options.replication_timeout = absl::Milliseconds(300);
  options.lease_ttl = absl::Milliseconds(10);  // the dropped n2 never led: no hold anyway
  options.min_insync_replicas = 3;
  Start(3, options);
  v1::ClusterMap map = OneShardMap(nodes(), {0, 1, 2}, {});
  maps_.Set(map);
  ASSERT_THAT(node(0).Put("a", "1"), IsOk());
  node(2).Kill();
  maps_.Set(OneShardMap(nodes(), {1, 0, 2}, {}, /*shard_epoch=*/2));  // failover to n1
  absl::Status refused = node(1).Put("b", "2");
  EXPECT_TRUE(cluster::IsRefusal(refused, cluster::RefusalKind::kTryAgain)) << refused;
  EXPECT_TRUE(cluster::CertainlyNoEffect(refused)) << refused;
  EXPECT_EQ(node(1).Value("b"), kAbsent);
  EXPECT_EQ(node(0).Value("b"), kAbsent);
  EXPECT_THAT(replicas(), ElementsAre("n1", "n0", "n2"));
  // An operator lowers the floor (R=2 now): the reconciler drops n2.
  v1::ClusterMap r2 = OneShardMap(nodes(), {1, 0, 2}, {}, /*shard_epoch=*/3);
  r2.set_replication_factor(2);
  maps_.Set(r2);
  ASSERT_TRUE(Eventually([&] { return node(1).Put("b", "2").ok(); }));
  EXPECT_THAT(replicas(), ElementsAre("n1", "n0"));
  EXPECT_EQ(node(0).Value("b"), "2");
}

// What a promotion costs: one digest scan of the shard on the new primary
// and on each backup, and entries only for the slots that differ. Prints
// the time from the map change to the first acknowledged write.
TEST_F(ReconcileTest, APromotionSendsOnlyTheSlotsThatDiffer) {
  Start(3);
  maps_.Set(OneShardMap(nodes(), {0, 1, 2}, {}));
  constexpr int kKeys = 3000;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_THAT(node(0).Put(absl::StrCat("key", i), absl::StrCat("value", i)), IsOk());
  }
  // n2 lost three keys and kept one the others deleted: as if unacknowledged
  // writes had reached it alone.
  ASSERT_THAT(node(0).Put("extra", "x"), IsOk());
  ASSERT_THAT(node(0).store().DeleteReplica("extra"), IsOk());
  ASSERT_THAT(node(1).store().DeleteReplica("extra"), IsOk());
  std::set<uint32_t> slots = {cluster::KeySlot("extra")};
  for (int i : {7, 1200, 2999}) {
    ASSERT_THAT(node(2).store().DeleteReplica(absl::StrCat("key", i)), IsOk());
    slots.insert(cluster::KeySlot(absl::StrCat("key", i)));
  }
  uint64_t entries = 0;  // n1's entries of those slots
  for (int i = 0; i < kKeys; ++i) entries += slots.count(cluster::KeySlot(absl::StrCat("key", i)));
  const absl::Time start = absl::Now();
  maps_.Set(OneShardMap(nodes(), {1, 0, 2}, {}, /*shard_epoch=*/2));  // failover to n1
  ASSERT_THAT(node(1).Put("first", "1"), IsOk());
  const absl::Duration took = absl::Now() - start;
  std::cout << "reconcile of " << kKeys << " keys on 2 backups: first ack " << took
            << " after the map change\n";
  for (int i : {7, 1200, 2999}) {
    EXPECT_EQ(node(2).Value(absl::StrCat("key", i)), absl::StrCat("value", i));
  }
  EXPECT_EQ(Value(node(1).registry(), "kvstore_reconcile_shards_total"), 1u);
  EXPECT_EQ(node(2).Value("extra"), kAbsent);
  EXPECT_EQ(Value(node(1).registry(), "kvstore_reconcile_slots_total"), slots.size());
  EXPECT_EQ(Value(node(1).registry(), "kvstore_reconcile_entries_total"), entries);
}

// Between writes too: a key whose write ended unknown is repaired on the
// backup once it answers again, although the shard sees no further write.
TEST_F(ReconcileTest, AKeyWhoseWriteEndedUnknownIsRepairedWithoutAnotherWrite) {
  NodeOptions options;
  options.min_insync_replicas = 2;
  Start(2, options);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  ASSERT_THAT(node(0).Put("k", "old"), IsOk());
  HookGate lost;
  node(1).service().set_after([=](const v1::ReplicateRequest&) {
    if (lost.IsOpen()) return absl::OkStatus();  // the repair's answer arrives
    lost.Open();
    return absl::UnavailableError("answer lost");
  });
  absl::Status put = node(0).Put("k", "new");
  EXPECT_FALSE(cluster::CertainlyNoEffect(put)) << put;
  EXPECT_EQ(node(0).Value("k"), "old");
  // (The count follows the backup's install: wait for both.)
  EXPECT_TRUE(Eventually([&] {
    return node(1).Value("k") == "old" &&
           Value(node(0).registry(), "kvstore_replication_unsettled_repairs_total") >= 1;
  }));
  EXPECT_THAT(replicas(), ElementsAre("n0", "n1"));
}

// A Replicate that reaches the backup after its deadline (held up in the
// network while a cut lasted, say) must not be installed: the primary has
// already counted it failed and may have sent the key's state again since,
// which the late one would undo.
TEST_F(ReconcileTest, AReplicateArrivingAfterItsDeadlineIsNotInstalled) {
  NodeOptions options;
  options.min_insync_replicas = 2;
  options.replication_timeout = absl::Milliseconds(300);
  Start(2, options);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  ASSERT_THAT(node(0).Put("k", "old"), IsOk());
  HookGate answered;
  node(1).service().set_before([=](const v1::ReplicateRequest& r) {
    if (r.entry().find("late") != std::string::npos) answered.Wait();
    return absl::OkStatus();
  });
  absl::Status put = node(0).Put("k", "late");
  EXPECT_FALSE(cluster::CertainlyNoEffect(put)) << put;
  // The primary gave up on it; the repair of k follows (between writes).
  ASSERT_TRUE(Eventually([&] {
    return Value(node(0).registry(), "kvstore_replication_unsettled_repairs_total") >= 1;
  }));
  auto handled = [&] {
    return Value(node(1).registry(), "kvstore_replica_installs_total") +
           Value(node(1).registry(), "kvstore_replica_refused_total");
  };
  const uint64_t before = handled();
  answered.Open();  // the late request now reaches the backup's store
  ASSERT_TRUE(Eventually([&] { return handled() > before; }));
  EXPECT_EQ(node(1).Value("k"), "old");
  node(1).service().set_before(nullptr);
  ASSERT_THAT(node(0).Put("x", "1"), IsOk());
  EXPECT_EQ(node(0).Value("k"), "old");
  EXPECT_EQ(node(1).Value("k"), "old");
}

// The same write held up on the wire instead (a cut that healed): it
// reaches the backup after the repair with a fresh gRPC deadline. Its seq is
// below the repair's, which the backup recorded: dropped.
TEST_F(ReconcileTest, AWriteDeliveredAfterItsRepairIsDropped) {
  NodeOptions options;
  options.min_insync_replicas = 2;
  options.replication_timeout = absl::Milliseconds(300);
  Start(2, options);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  ASSERT_THAT(node(0).Put("k", "old"), IsOk());
  absl::Mutex mu;
  v1::ReplicateRequest held;  // the request the cut held up
  node(1).service().set_before([&](const v1::ReplicateRequest& r) {
    absl::MutexLock lock(&mu);
    if (held.key().empty()) {
      held = r;
      return absl::UnavailableError("cut off");
    }
    return absl::OkStatus();
  });
  absl::Status put = node(0).Put("k", "late");
  EXPECT_FALSE(cluster::CertainlyNoEffect(put)) << put;
  ASSERT_TRUE(Eventually([&] {
    return Value(node(0).registry(), "kvstore_replication_unsettled_repairs_total") >= 1;
  }));
  absl::MutexLock lock(&mu);
  ASSERT_EQ(held.key(), "k");
  EXPECT_THAT(node(1).installer().Replicate(held).status(), IsOk());  // delivered now
  EXPECT_EQ(node(1).Value("k"), "old");
  EXPECT_EQ(node(0).Value("k"), "old");
}

// A node may be a replica of both shards of a migration: one store then
// holds the source's keys of the moving slots and the target's import of
// them. A new primary of the target, whose import is not complete, must not
// delete the source's keys there: it reconciles only the slots its shard
// owns outside running migrations.
TEST_F(ReconcileTest, ANewTargetPrimaryLeavesTheSlotsOfARunningMigrationAlone) {
  Start(4);
  // shard 0 = [n0, n2] owns 0-8191, shard 1 = [n1, n2, n3] owns the rest.
  maps_.Set(TwoShardMap(nodes(), {0, 2}, {1, 2, 3}, v1::MIGRATION_STATE_UNSPECIFIED, 0));
  std::string moving, staying;
  for (int i = 0; moving.empty() || staying.empty(); ++i) {
    const std::string key = absl::StrCat("key", i);
    (cluster::KeySlot(key) < 8192 ? moving : staying) = key;
  }
  ASSERT_THAT(node(0).Put(moving, "source"), IsOk());
  // Shard 0's slots start moving to shard 1; nothing is copied yet.
  maps_.Set(TwoShardMap(nodes(), {0, 2}, {1, 2, 3}, v1::MIGRATION_COPYING, 8191));
  // Shard 1 fails over to n3, which has imported nothing.
  v1::ClusterMap failover = TwoShardMap(nodes(), {0, 2}, {3, 1, 2}, v1::MIGRATION_COPYING, 8191);
  failover.mutable_shards(1)->set_shard_epoch(2);
  maps_.Set(failover);
  ASSERT_THAT(node(3).Put(staying, "1"), IsOk());
  EXPECT_EQ(node(2).Value(staying), "1");
  EXPECT_EQ(node(2).Value(moving), "source");  // shard 0's acknowledged write
  EXPECT_EQ(node(3).Value(moving), kAbsent);
}

// The primary dies with a write in flight that reached one backup only; that
// backup is promoted. Until it has made the other backup equal to itself it
// serves no read of the shard (a read of the write only it holds would be
// taken back by a second failover to the other backup): a refusal of no
// effect. Once reconciled it serves the write, which the other holds too.
TEST_F(ReconcileTest, ANewPrimaryServesNoReadUntilReconciled) {
  Start(3);
  maps_.Set(OneShardMap(nodes(), {0, 1, 2}, {}));
  ASSERT_THAT(node(0).Put("a", "a0"), IsOk());
  HookGate release;
  node(1).service().set_before([=](const v1::ReplicateRequest& r) {
    if (r.key() != "b") return absl::OkStatus();
    release.Wait();
    return absl::UnavailableError("cut off");
  });
  absl::Status put_b;
  std::thread wb([&] { put_b = PutVia(node(0), "b", "b1"); });
  ASSERT_TRUE(Eventually([&] { return node(2).Value("b") == "b1"; }));
  failpoint::Pause before_reconcile("reconciler/before-reconcile");
  node(0).Kill();
  maps_.Set(OneShardMap(nodes(), {2, 1}, {}, /*shard_epoch=*/2));  // n0 crashed: n2 leads
  release.Open();
  wb.join();
  node(1).service().set_before(nullptr);
  EXPECT_EQ(node(1).Value("b"), kAbsent);

  // Held from the install on, reads and writes alike, whatever the key.
  for (const char* key : {"b", "a"}) {
    const Route route = node(2).state().RouteKey(key);
    ASSERT_NE(route.kind, Route::Kind::kServe) << key;
    const absl::Status refused = RouteStatus(route, RefusalAddress::kResp);
    EXPECT_TRUE(cluster::IsRefusal(refused, cluster::RefusalKind::kTryAgain)) << refused;
    EXPECT_TRUE(cluster::CertainlyNoEffect(refused)) << refused;
  }
  // One-sided readers refuse this node's data meanwhile (epoch 0 matches
  // no reader's map).
  EXPECT_EQ(node(2).state().FenceEpoch(), 0u);
  ASSERT_TRUE(before_reconcile.WaitUntilReached());
  EXPECT_NE(node(2).state().RouteKey("b").kind, Route::Kind::kServe);
  before_reconcile.Release();

  ASSERT_TRUE(
      Eventually([&] { return node(2).state().RouteKey("b").kind == Route::Kind::kServe; }));
  EXPECT_EQ(node(1).Value("b"), "b1");  // served only once the backup holds it too
  EXPECT_EQ(node(2).state().FenceEpoch(), node(2).state().map_epoch());
  EXPECT_EQ(node(1).state().RouteKey("b", /*replica_ok=*/true).kind, Route::Kind::kServe);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
