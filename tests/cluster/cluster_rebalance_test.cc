// Copyright 2026 The kvstore Authors.
//
// Adding a node and rebalancing under load (architecture §19.9), against a
// real cluster: etcd, three kvserver processes (R=2) holding a few thousand
// preloaded keys, and a client workload whose every operation is recorded.
// A fourth kvserver is started, given a shard with `kvctl cluster add-node`,
// and `kvctl cluster rebalance` moves a quarter of the slots to it while the
// workload runs. Afterwards: every shard holds 4096 slots, every preloaded
// key reads back with its value from its new owner, and the history has
// zero violations (acknowledged writes kept, no phantom or stale reads).
// The second test kills the source primary while its slots are being copied:
// its backup takes over and finishes the migration.
// Prints the seed (CLUSTER_TEST_SEED replays the workload's choices).

#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "client/options.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/slots.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"
#include "tests/cluster/history.h"
#include "tests/cluster/history_checker.h"
#include "tests/cluster/workload.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

uint32_t Seed() {
  uint32_t s = std::random_device{}();
  const char* env = std::getenv("CLUSTER_TEST_SEED");
  if (env != nullptr) (void)absl::SimpleAtoi(env, &s);
  std::printf("seed %u (CLUSTER_TEST_SEED=%u replays it)\n", s, s);
  return s;
}

ProcessResult Kvctl(const std::string& server, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BinaryPath("client/kvctl/kvctl"),
                                   absl::StrCat("--server=", server), "--timeout=10s"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv);
}

std::string BulkKey(int i) { return absl::StrCat("bulk:", i); }
std::string BulkValue(int i, size_t bytes) {
  std::string v = absl::StrCat("value-of-", i, "-");
  while (v.size() < bytes) v.push_back(static_cast<char>('a' + (i + v.size()) % 26));
  return v;
}

std::unique_ptr<client::KvClient> Connect(ClusterHarness& cluster) {
  client::Options o;
  o.servers = cluster.ControlAddresses();
  o.transport = client::TransportMode::kTcp;
  o.op_timeout = absl::Seconds(10);
  auto c = client::KvClient::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

void Preload(ClusterHarness& cluster, int keys, size_t value_bytes) {
  std::unique_ptr<client::KvClient> c = Connect(cluster);
  ASSERT_NE(c, nullptr);
  const absl::Time start = absl::Now();
  for (int i = 0; i < keys; i += 200) {
    std::vector<std::pair<std::string, std::string>> batch;
    for (int j = i; j < std::min(keys, i + 200); ++j) {
      batch.emplace_back(BulkKey(j), BulkValue(j, value_bytes));
    }
    absl::Status s = c->MultiPut(batch);
    ASSERT_TRUE(s.ok()) << s;
  }
  std::printf("preloaded %d keys of %zu bytes in %.2f s\n", keys, value_bytes,
              absl::ToDoubleSeconds(absl::Now() - start));
}

// Every preloaded key reads back with its value.
void CheckPreloaded(ClusterHarness& cluster, int keys, size_t value_bytes) {
  std::unique_ptr<client::KvClient> c = Connect(cluster);
  ASSERT_NE(c, nullptr);
  int wrong = 0;
  for (int i = 0; i < keys; i += 200) {
    std::vector<std::string> batch;
    for (int j = i; j < std::min(keys, i + 200); ++j) batch.push_back(BulkKey(j));
    auto got = c->MultiGet(batch);
    ASSERT_TRUE(got.ok()) << got.status();
    for (size_t k = 0; k < batch.size(); ++k) {
      const int j = i + static_cast<int>(k);
      if (!(*got)[k].ok() || *(*got)[k] != BulkValue(j, value_bytes)) {
        if (++wrong <= 5) {
          ADD_FAILURE() << BulkKey(j) << " (slot " << cluster::KeySlot(BulkKey(j)) << "): "
                        << ((*got)[k].ok() ? "wrong value" : (*got)[k].status().ToString());
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << keys << " preloaded keys";
}

// Starts node n4, waits for it to register, gives it a shard.
int AddFourthNode(ClusterHarness& cluster, const std::string& via) {
  absl::StatusOr<int> added = cluster.AddNode();
  EXPECT_TRUE(added.ok()) << added.status();
  if (!added.ok()) return -1;
  const std::string id = ClusterHarness::NodeId(*added);
  ProcessResult r;
  // Its member key appears within a moment of its start.
  for (absl::Time end = absl::Now() + absl::Seconds(10); absl::Now() < end;) {
    r = Kvctl(via, {"cluster", "add-node", id});
    if (r.exit_code == 0) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\n" << cluster.Logs();
  std::printf("add-node %s:\n%s", id.c_str(), r.out.c_str());
  return *added;
}

// The slots whose shard differs between two maps.
std::set<uint32_t> MovedSlots(const v1::ClusterMap& before, const v1::ClusterMap& after) {
  auto a = cluster::ClusterMapView::Build(before);
  auto b = cluster::ClusterMapView::Build(after);
  std::set<uint32_t> moved;
  if (!a.ok() || !b.ok()) return moved;
  for (uint32_t s = 0; s < cluster::kSlotCount; ++s) {
    if ((*a)->ShardForSlot(s)->shard_id() != (*b)->ShardForSlot(s)->shard_id()) moved.insert(s);
  }
  return moved;
}

void ExpectEvenSlots(const v1::ClusterMap& map, const std::string& new_node) {
  ASSERT_EQ(map.shards_size(), 4);
  for (const v1::Shard& shard : map.shards()) {
    EXPECT_EQ(cluster::SlotCountOf(shard), 4096u)
        << "shard " << shard.shard_id() << ": " << cluster::FormatSlotRanges(shard);
    ASSERT_FALSE(shard.replicas().empty());
    if (shard.replicas(0) == new_node) {
      EXPECT_EQ(cluster::SlotCountOf(shard), 4096u);
    }
  }
}

struct RebalanceRun {
  EtcdProcess etcd;
  std::unique_ptr<ClusterHarness> cluster;
  History history;
  std::unique_ptr<Workload> load;
};

void StartRun(RebalanceRun* run, int preload_keys, size_t preload_bytes) {
  ASSERT_TRUE(run->etcd.Start().ok());
  ClusterOptions o;
  o.etcd_endpoint = run->etcd.endpoint();
  o.nodes = 3;
  o.replicas = 2;
  auto started = ClusterHarness::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  run->cluster = std::move(*started);
  absl::Status healthy = run->cluster->WaitHealthy(absl::Seconds(30));
  ASSERT_TRUE(healthy.ok()) << healthy << "\n" << run->cluster->Logs();
  Preload(*run->cluster, preload_keys, preload_bytes);

  WorkloadOptions w;
  w.servers = run->cluster->ControlAddresses();
  w.seed = Seed();
  w.keys = 128;  // spread over the slots, so some are in every moved range
  run->load = std::make_unique<Workload>(w, &run->history);
  run->load->Start();
  for (absl::Time end = absl::Now() + absl::Seconds(10);
       run->load->acknowledged_writes() < 20 && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GT(run->load->acknowledged_writes(), 0u) << run->cluster->Logs();
}

void FinishRun(RebalanceRun* run, const std::set<uint32_t>& moved) {
  absl::SleepFor(absl::Milliseconds(500));  // load on the rebalanced cluster
  run->load->Stop();
  absl::Status read = run->load->FinalReads(absl::Seconds(20));
  EXPECT_TRUE(read.ok()) << read << "\n" << run->cluster->Logs();
  CheckOptions check;
  check.require_final_reads = true;
  const CheckResult result = CheckHistory(run->history.Snapshot(), check);
  int moved_keys = 0;
  for (const std::string& key : run->load->keys()) moved_keys += moved.count(cluster::KeySlot(key));
  std::printf("%s\n%llu operations; %d of %zu workload keys in moved slots\n",
              result.Report(0).c_str(), static_cast<unsigned long long>(run->load->operations()),
              moved_keys, run->load->keys().size());
  EXPECT_TRUE(result.ok()) << result.Report() << "\n" << run->cluster->Logs();
  EXPECT_GT(result.acknowledged_writes, 50u);
  EXPECT_GT(moved_keys, 0);
}

TEST(ClusterRebalanceTest, AddANodeAndRebalanceUnderLoad) {
  constexpr int kKeys = 4000;
  constexpr size_t kBytes = 256;
  RebalanceRun run;
  StartRun(&run, kKeys, kBytes);
  if (HasFatalFailure()) return;
  ClusterHarness& cluster = *run.cluster;
  const std::string via = cluster.node(0)->control_address();
  absl::StatusOr<v1::ClusterMap> before = cluster.GetMap();
  ASSERT_TRUE(before.ok()) << before.status();

  const int added = AddFourthNode(cluster, via);
  ASSERT_GE(added, 0);
  ProcessResult plan = Kvctl(via, {"cluster", "rebalance"});
  ASSERT_EQ(plan.exit_code, 0) << plan.out << plan.err << "\n" << cluster.Logs();
  std::printf("rebalance:\n%s", plan.out.c_str());
  const absl::Time start = absl::Now();
  absl::Status done = cluster.WaitMigrationsDone(absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done << "\n" << cluster.Logs();
  std::printf("rebalance done in %.2f s under load\n", absl::ToDoubleSeconds(absl::Now() - start));

  absl::StatusOr<v1::ClusterMap> after = cluster.GetMap();
  ASSERT_TRUE(after.ok()) << after.status();
  ExpectEvenSlots(*after, ClusterHarness::NodeId(added));
  const std::set<uint32_t> moved = MovedSlots(*before, *after);
  EXPECT_EQ(moved.size(), 4096u);
  FinishRun(&run, moved);
  CheckPreloaded(cluster, kKeys, kBytes);

  // Nothing left to do: a second rebalance plans no move.
  ProcessResult again = Kvctl(via, {"cluster", "rebalance", "--dry-run"});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  std::printf("second rebalance --dry-run:\n%s", again.out.c_str());
}

TEST(ClusterRebalanceTest, SourcePrimaryKilledWhileCopying) {
  constexpr int kKeys = 20000;
  constexpr size_t kBytes = 1024;
  RebalanceRun run;
  StartRun(&run, kKeys, kBytes);
  if (HasFatalFailure()) return;
  ClusterHarness& cluster = *run.cluster;
  absl::StatusOr<v1::ClusterMap> before = cluster.GetMap();
  ASSERT_TRUE(before.ok()) << before.status();
  const int added = AddFourthNode(cluster, cluster.node(0)->control_address());
  ASSERT_GE(added, 0);
  ProcessResult plan = Kvctl(cluster.node(added)->control_address(), {"cluster", "rebalance"});
  ASSERT_EQ(plan.exit_code, 0) << plan.out << plan.err << "\n" << cluster.Logs();

  // Catch the first migration copying and kill its source primary.
  std::string victim;
  std::string state_seen;
  for (absl::Time end = absl::Now() + absl::Seconds(30); victim.empty() && absl::Now() < end;) {
    absl::StatusOr<v1::ClusterMap> m = cluster.MapFrom(added);
    if (m.ok()) {
      for (const v1::Migration& mig : m->migrations()) {
        if (mig.state() == v1::MIGRATION_PENDING) continue;
        for (const v1::Shard& s : m->shards()) {
          if (s.shard_id() == mig.source_shard() && !s.replicas().empty()) victim = s.replicas(0);
        }
        state_seen = v1::MigrationState_Name(mig.state());
        break;
      }
    }
    if (victim.empty()) absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_FALSE(victim.empty()) << "no migration seen running\n" << cluster.Logs();
  const int victim_index = cluster.IndexOf(victim);
  ASSERT_GE(victim_index, 0);
  cluster.KillNode(victim_index);
  std::printf("killed %s, the source primary, with its migration %s\n", victim.c_str(),
              state_seen.c_str());

  const absl::Time start = absl::Now();
  absl::Status done = cluster.WaitMigrationsDone(absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done << "\n" << cluster.Logs();
  std::printf("migrations done %.2f s after the kill\n",
              absl::ToDoubleSeconds(absl::Now() - start));
  absl::StatusOr<v1::ClusterMap> after = cluster.GetMap();
  ASSERT_TRUE(after.ok()) << after.status();
  ExpectEvenSlots(*after, ClusterHarness::NodeId(added));
  FinishRun(&run, MovedSlots(*before, *after));
  CheckPreloaded(cluster, kKeys, kBytes);
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
