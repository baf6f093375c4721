// Copyright 2026 The kvstore Authors.
//
// The linearizability checker over writes started without a waiting thread
// (Replicator::StartWrite, as the RESP loop's SETs go), mixed with waiting
// writes and primary reads of the same few keys, while a backup dies half
// way: the started writes must keep the register contract the waiting ones
// keep (docs/consistency.md). In-process nodes on real gRPC
// (server/cluster/replication/replication_test_util.h); the seed is printed
// and can be given with KV_TEST_SEED.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/cluster/refusal.h"
#include "common/metrics/testing.h"
#include "gtest/gtest.h"
#include "server/cluster/replication/replication_test_util.h"
#include "tests/jepsen/history.h"
#include "tests/jepsen/linearizability.h"

namespace kvstore {
namespace jepsen {
namespace {

using server::testing::FakeMapStore;
using server::testing::Node;
using server::testing::NodeOptions;
using server::testing::OneShardMap;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Outcome OutcomeOf(const absl::Status& s) {
  if (s.ok()) return Outcome::kOk;
  return cluster::CertainlyNoEffect(s) ? Outcome::kFail : Outcome::kUnknown;
}

uint64_t Seed() {
  if (const char* s = std::getenv("KV_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

// The parameter: the replication streams on peer sockets (true) or gRPC.
class StartedWrites : public ::testing::TestWithParam<bool> {};

TEST_P(StartedWrites, StayLinearizableWhileABackupDies) {
  const uint64_t seed = Seed();
  std::cout << "seed " << seed << " (KV_TEST_SEED to repeat)\n";
  FakeMapStore maps;
  std::vector<std::unique_ptr<Node>> nodes;
  NodeOptions options;
  options.peer_socket = GetParam();
  options.replication_timeout = absl::Seconds(5);
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<Node>(absl::StrCat("n", i), &maps, options));
  }
  maps.Set(OneShardMap({nodes[0].get(), nodes[1].get(), nodes[2].get()}, {0, 1, 2}, {}));
  Node& primary = *nodes[0];

  absl::Mutex mu;
  std::vector<Op> history;
  std::atomic<uint64_t> next_id{0};
  auto record = [&](Op op) {
    absl::MutexLock lock(&mu);
    history.push_back(std::move(op));
  };
  constexpr int kKeys = 4;
  constexpr int kWriters = 4;
  constexpr int kOpsPerWriter = 120;
  std::atomic<int> writes_done{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kWriters; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(seed + c);
      for (int i = 0; i < kOpsPerWriter; ++i) {
        Op op;
        op.id = next_id++;
        op.client = c;
        op.kind = OpKind::kPut;
        op.key = absl::StrCat("k", rng() % kKeys);
        op.value = absl::StrCat("c", c, "-", i);
        op.invoke_ns = NowNs();
        absl::Status s;
        bool started = false;
        if (rng() % 4 != 0) {
          // Started: the callback's moment is the completion.
          absl::Notification done;
          int64_t completed = 0;
          started = primary.StartPut(op.key, *op.value, [&](absl::Status st) {
            completed = NowNs();
            s = std::move(st);
            done.Notify();
          });
          if (started) {
            done.WaitForNotification();
            op.complete_ns = completed;
          }
        }
        if (!started) {
          s = primary.Put(op.key, *op.value);
          op.complete_ns = NowNs();
        }
        op.outcome = OutcomeOf(s);
        op.error = s.ToString();
        record(std::move(op));
        ++writes_done;
      }
    });
  }
  std::atomic<bool> stop{false};
  threads.emplace_back([&] {
    std::mt19937_64 rng(seed ^ 0x5eed);
    // Two reads per write that completed: enough to catch a value seen
    // before its round ended, few enough for the search.
    int seen = 0;
    while (!stop.load()) {
      const int now = writes_done.load();
      if (now == seen) {
        std::this_thread::yield();
        continue;
      }
      seen = now;
      for (int r = 0; r < 2; ++r) {
        Op op;
        op.id = next_id++;
        op.client = kWriters;
        op.kind = OpKind::kGet;
        op.key = absl::StrCat("k", rng() % kKeys);
        op.invoke_ns = NowNs();
        absl::StatusOr<server::PinnedValue> v = primary.store().Get(op.key);
        op.complete_ns = NowNs();
        if (v.ok()) {
          op.value = std::string(v->value());
          op.outcome = Outcome::kOk;
        } else if (absl::IsNotFound(v.status())) {
          op.outcome = Outcome::kOk;  // absent
        } else {
          op.outcome = Outcome::kFail;
        }
        record(std::move(op));
      }
    }
  });
  // Half way, a backup dies: the rounds in flight to it fail, and the
  // started ones end on the replicator's workers.
  while (writes_done.load() < kWriters * kOpsPerWriter / 2) std::this_thread::yield();
  nodes[2]->Kill();
  for (int c = 0; c < kWriters; ++c) threads[c].join();
  stop = true;
  threads.back().join();

  const uint64_t started =
      metrics::testing::Value(primary.registry(), "kvstore_replication_started_writes_total");
  std::cout << history.size() << " ops, " << started << " writes started without a waiting thread, "
            << metrics::testing::Value(primary.registry(),
                                       "kvstore_replication_started_slow_ends_total")
            << " of them ended on a worker\n";
  EXPECT_GT(started, 0u);  // the path under test was taken
  LinearizabilityReport report = CheckLinearizable(history, LinearizabilityOptions{});
  for (const KeyVerdict& v : report.violations) {
    ADD_FAILURE() << "key " << v.key << ": " << v.reason;
    for (const Op& op : v.explanation) std::cout << "  " << op.Describe() << "\n";
  }
  EXPECT_TRUE(report.unknown.empty());
  EXPECT_EQ(report.keys, static_cast<size_t>(kKeys));
}

INSTANTIATE_TEST_SUITE_P(Transports, StartedWrites, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "PeerSocket" : "Grpc";
                         });

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
