// Copyright 2026 The kvstore Authors.
//
// Replicator::StartWrite end to end, through KvStore::StartCommit as the
// RESP loop calls it: real stores, replicators, installers and services on
// real gRPC servers (replication_test_util.h). The write must keep
// Write()'s contract: every in-sync backup holds it before the primary
// publishes or answers it, and a round that fails ends as Write() ends it.

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
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
using ::kvstore::testing::Eventually;
using ::kvstore::testing::IsOk;
using ::testing::ElementsAre;

// The status a started write ended with, once it has.
class Outcome {
 public:
  std::function<void(absl::Status)> Callback() {
    return [this](absl::Status s) {
      absl::MutexLock lock(&mu_);
      status_ = std::move(s);
      done_ = true;
    };
  }
  bool done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  absl::Status Await() {
    EXPECT_TRUE(Eventually([&] { return done(); }));
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// The parameter: the replication streams run on peer sockets (true) or on
// gRPC ReplicateStream (false).
class ReplicatorAsyncTest : public ::testing::TestWithParam<bool> {
 protected:
  void Start(int n, NodeOptions options = {}) {
    options.peer_socket = GetParam();
    for (int i = 0; i < n; ++i) {
      nodes_.push_back(std::make_unique<Node>(absl::StrCat("n", i), &maps_, options));
    }
    std::vector<Node*> all;
    for (auto& node : nodes_) all.push_back(node.get());
    std::vector<int> replicas;
    for (int i = 0; i < n; ++i) replicas.push_back(i);
    maps_.Set(OneShardMap(all, replicas, {}));
  }
  Node& node(int i) { return *nodes_[i]; }
  std::vector<std::string> replicas() {
    auto r = maps_.Current().shards(0).replicas();
    return {r.begin(), r.end()};
  }
  uint64_t Started() {
    return Value(node(0).registry(), "kvstore_replication_started_writes_total");
  }
  uint64_t SlowEnds() {
    return Value(node(0).registry(), "kvstore_replication_started_slow_ends_total");
  }

  FakeMapStore maps_;  // outlives the nodes, which it points to
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_P(ReplicatorAsyncTest, EveryBackupHoldsAStartedWriteBeforeItIsPublishedOrAnswered) {
  Start(3);
  HookGate n2_has_it, release;
  node(2).service().set_before([=](const v1::ReplicateRequest&) {
    n2_has_it.Open();
    release.Wait();
    return absl::OkStatus();
  });
  Outcome put;
  ASSERT_TRUE(node(0).StartPut("k", "v", put.Callback()));
  EXPECT_EQ(Started(), 1u);
  n2_has_it.Wait();
  // n1 may have installed it; n2 has not answered: nothing is published or
  // answered, and no thread of the caller's waits for it.
  EXPECT_FALSE(put.done());
  EXPECT_EQ(node(0).Value("k"), "<NOT_FOUND>");
  release.Open();
  EXPECT_THAT(put.Await(), IsOk());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(node(i).Value("k"), "v") << i;
  EXPECT_EQ(SlowEnds(), 0u);
  // Its locks were released: the same key starts again.
  Outcome again;
  node(2).service().set_before(nullptr);
  ASSERT_TRUE(node(0).StartPut("k", "w", again.Callback()));
  EXPECT_THAT(again.Await(), IsOk());
  EXPECT_EQ(node(1).Value("k"), "w");
  // Each backup was sent its writes on the transport under test.
  for (int i = 1; i < 3; ++i) {
    if (GetParam()) {
      EXPECT_GT(Value(node(i).registry(), "kvstore_peer_socket_accepted_total"), 0u) << i;
    } else {
      EXPECT_EQ(node(i).replication_address(), "") << i;
    }
  }
}

// StartWrite remembers, per thread, a shard's backups for the map it looked
// them up in. A new map (a backup replaced) is looked up afresh on the same
// thread: the next write goes to the new backup only, on the fast path.
TEST_P(ReplicatorAsyncTest, ANewMapSendsWritesToItsBackupsNotTheRememberedOnes) {
  Start(3);
  Outcome first;
  ASSERT_TRUE(node(0).StartPut("a", "1", first.Callback()));
  EXPECT_THAT(first.Await(), IsOk());
  maps_.Set(OneShardMap({&node(0), &node(1), &node(2)}, {0, 2}, {}, /*shard_epoch=*/2));
  Outcome second;
  ASSERT_TRUE(node(0).StartPut("b", "2", second.Callback()));
  EXPECT_THAT(second.Await(), IsOk());
  EXPECT_EQ(node(2).Value("b"), "2");
  EXPECT_EQ(node(1).Value("b"), "<NOT_FOUND>");
  maps_.Set(OneShardMap({&node(0), &node(1), &node(2)}, {0, 1}, {}, /*shard_epoch=*/3));
  Outcome third;
  ASSERT_TRUE(node(0).StartPut("c", "3", third.Callback()));
  EXPECT_THAT(third.Await(), IsOk());
  EXPECT_EQ(node(1).Value("c"), "3");
  EXPECT_EQ(node(2).Value("c"), "<NOT_FOUND>");
  EXPECT_EQ(SlowEnds(), 0u);
}

TEST_P(ReplicatorAsyncTest, AWriteOfAKeyInFlightGoesTheWaitingWay) {
  Start(2);
  HookGate n1_has_it, release;
  node(1).service().set_before([=](const v1::ReplicateRequest&) {
    n1_has_it.Open();
    release.Wait();
    return absl::OkStatus();
  });
  Outcome first;
  ASSERT_TRUE(node(0).StartPut("k", "1", first.Callback()));
  n1_has_it.Wait();
  // The key's lock is held until the first write ends: the store declines
  // rather than make this thread wait.
  Outcome second;
  EXPECT_FALSE(node(0).StartPut("k", "2", second.Callback()));
  EXPECT_FALSE(second.done());
  release.Open();
  EXPECT_THAT(first.Await(), IsOk());
}

TEST_P(ReplicatorAsyncTest, AnArmedFailpointSendsWritesTheWaitingWay) {
  Start(2);
  failpoint::ScopedFailpoint armed("replicator/before-round", [] { return absl::OkStatus(); });
  Outcome put;
  EXPECT_FALSE(node(0).StartPut("k", "v", put.Callback()));
  EXPECT_EQ(Started(), 0u);
  EXPECT_THAT(node(0).Put("k", "v"), IsOk());  // the waiting way works
}

TEST_P(ReplicatorAsyncTest, ADeadBackupIsDroppedAndTheWriteAcknowledgedAsWriteWould) {
  Start(3);
  node(2).Kill();
  Outcome put;
  ASSERT_TRUE(node(0).StartPut("k", "v", put.Callback()));
  EXPECT_THAT(put.Await(), IsOk());
  EXPECT_EQ(SlowEnds(), 1u);
  EXPECT_THAT(replicas(), ElementsAre("n0", "n1"));
  EXPECT_EQ(node(0).Value("k"), "v");
  EXPECT_EQ(node(1).Value("k"), "v");
}

TEST_P(ReplicatorAsyncTest, ABackupThatNeverAnswersIsGivenUpAtTheDeadline) {
  NodeOptions options;
  options.replication_timeout = absl::Milliseconds(300);
  Start(3, options);
  HookGate release;
  node(2).service().set_before([=](const v1::ReplicateRequest&) {
    release.Wait();
    return absl::OkStatus();
  });
  Outcome put;
  ASSERT_TRUE(node(0).StartPut("k", "v", put.Callback()));
  // Nobody waits on the write: its deadline breaks n2's stream, and the
  // slow end drops n2 as a backup that timed out.
  EXPECT_THAT(put.Await(), IsOk());
  EXPECT_EQ(SlowEnds(), 1u);
  EXPECT_THAT(replicas(), ElementsAre("n0", "n1"));
  EXPECT_EQ(node(0).Value("k"), "v");
  release.Open();
}

// A stream's deadline watch is armed by its first write and fires at that
// write's deadline; by then that write was answered, and the watch must
// follow the stream's oldest unanswered write instead of standing down.
TEST_P(ReplicatorAsyncTest, TheDeadlineWatchFollowsTheOldestUnansweredWrite) {
  NodeOptions options;
  options.replication_timeout = absl::Seconds(1);
  Start(3, options);
  Outcome first;
  ASSERT_TRUE(node(0).StartPut("k1", "v1", first.Callback()));
  EXPECT_THAT(first.Await(), IsOk());
  // Not a race: the pause only puts the second write's deadline well after
  // the first's, so that the watch, firing at the first's, finds it in the
  // future and re-arms (on a machine slow enough to fire it later still,
  // the watch breaks the stream at once: the same outcome).
  absl::SleepFor(absl::Milliseconds(300));
  HookGate release;
  node(2).service().set_before([=](const v1::ReplicateRequest&) {
    release.Wait();
    return absl::OkStatus();
  });
  Outcome second;
  ASSERT_TRUE(node(0).StartPut("k2", "v2", second.Callback()));
  EXPECT_THAT(second.Await(), IsOk());
  EXPECT_EQ(SlowEnds(), 1u);
  EXPECT_THAT(replicas(), ElementsAre("n0", "n1"));
  EXPECT_EQ(node(0).Value("k2"), "v2");
  release.Open();
}

TEST_P(ReplicatorAsyncTest, AFailedBackupTheFloorNeedsLeavesTheWriteUnknownAndUnpublished) {
  NodeOptions options;
  options.min_insync_replicas = 2;
  Start(2, options);
  node(1).service().set_after(
      [](const v1::ReplicateRequest&) { return absl::UnavailableError("answer lost"); });
  Outcome put;
  ASSERT_TRUE(node(0).StartPut("k", "v", put.Callback()));
  absl::Status s = put.Await();
  // n1 holds it but its answer was lost, and the floor keeps n1: as Write()
  // answers, the outcome is unknown and nothing is published here.
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(cluster::IsRefusal(s, cluster::RefusalKind::kClusterDown)) << s;
  EXPECT_FALSE(cluster::CertainlyNoEffect(s)) << s;
  EXPECT_EQ(node(0).Value("k"), "<NOT_FOUND>");
  EXPECT_THAT(replicas(), ElementsAre("n0", "n1"));
  // The key is unsettled: the primary sends its own state (absent) to n1,
  // and the two agree again.
  node(1).service().set_after(nullptr);
  EXPECT_TRUE(Eventually([&] { return node(1).Value("k") == "<NOT_FOUND>"; }));
  // A write of an unsettled shard waits for the repair: the waiting way.
  Outcome next;
  if (!node(0).StartPut("k2", "w", next.Callback())) {
    EXPECT_THAT(node(0).Put("k2", "w"), IsOk());
  } else {
    EXPECT_THAT(next.Await(), IsOk());
  }
  EXPECT_EQ(node(1).Value("k2"), "w");
}

INSTANTIATE_TEST_SUITE_P(Transports, ReplicatorAsyncTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "PeerSocket" : "Grpc";
                         });

}  // namespace
}  // namespace server
}  // namespace kvstore
