// Copyright 2026 The kvstore Authors.
//
// cluster_bench: the cluster's figures (failover time, replication cost, ...) on this
// machine, against a real etcd and real kvserver processes in cluster mode
// (tests/cluster/cluster_harness.h), driven by the real client library:
//
//   failover   kill -9 of a shard's primary under a write load -> the first
//              acknowledged write on that shard; p50/p99 over --runs runs
//              (and kill -> the map naming a new primary)
//   put R=r    PUT latency p50/p99 and throughput with R = 1, 2, 3
//   get R=r    GET latency and throughput with R = 1 and 3 (should not move)
//   shards=s   mixed 50/50 throughput with 1, 2, 3 shards (1, 2, 3 nodes)
//   resync     R=3 on 3 nodes: fill --fill_mb, kill a backup, wait until the map drops it,
//              restart it: time until it is back in sync, per GiB it holds
//
// Every load row also gives the server CPU per operation: utime+stime of all
// kvserver processes (/proc/<pid>/stat) over the measured window divided by
// the acknowledged operations in it. Clients and servers share the
// machine's cores: read throughput as "what this box does", not a ceiling.
//
//   bazel run -c opt //tests/bench:cluster_bench -- --runs=20 [--json]
//       [--only=failover,put,get,shards,resync] [--seconds=5] [--clients=4]
//       [--transport=rdma --rdma_device=rxe0 [--replication_rdma=false]]
// (in the VM, where flags cannot be passed, KV_BENCH_ONLY, KV_BENCH_CLIENTS,
// KV_BENCH_TRANSPORT and KV_BENCH_REPLICATION_RDMA set the defaults)
//
// With --transport=rdma (in the Soft-RoCE VM: tests/bench/cluster_rdma_bench.sh)
// nodes and clients use RDMA, and --replication_rdma chooses how primaries
// reach their backups; Soft-RoCE figures are for ratios only.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "nlohmann/json.hpp"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"
#include "tests/cluster/history.h"
#include "tests/cluster/node_process.h"
#include "tests/cluster/server_counters.h"
#include "tests/cluster/workload.h"

namespace {
// Flag defaults from the environment, so that tests/rxe/run-rdma-tests.sh
// (which passes KV_* variables but no arguments) can run this in the VM.
std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}
}  // namespace

ABSL_FLAG(std::string, gtest_output, "",
          "ignored: tests/rxe/run-rdma-tests.sh passes it to every binary it runs in the VM");
ABSL_FLAG(int, runs, 20, "failover runs (p50/p99 over them)");
ABSL_FLAG(double, seconds, 5, "length of each measured load window");
ABSL_FLAG(int, clients, std::atoi(EnvOr("KV_BENCH_CLIENTS", "4").c_str()),
          "client threads of each load (default $KV_BENCH_CLIENTS, else 4)");
ABSL_FLAG(int, value_bytes, 64, "value size of the load");
ABSL_FLAG(int, fill_mb, 256, "MiB written before the resync measurement");
ABSL_FLAG(std::string, only, EnvOr("KV_BENCH_ONLY", "failover,put,get,shards,resync"),
          "experiments to run (default $KV_BENCH_ONLY, else all)");
ABSL_FLAG(bool, json, false, "print one JSON document instead of the table");
ABSL_FLAG(std::string, member_ttl, "2s", "--member_ttl of the nodes");

ABSL_FLAG(std::string, transport, EnvOr("KV_BENCH_TRANSPORT", "tcp"),
          "tcp, or rdma: nodes and clients on RDMA (--rdma_device names the device); default "
          "$KV_BENCH_TRANSPORT");
ABSL_FLAG(std::string, rdma_device, EnvOr("KV_RDMA_DEVICE", ""),
          "RDMA device of nodes and clients with --transport=rdma; default $KV_RDMA_DEVICE");
ABSL_FLAG(bool, replication_rdma, EnvOr("KV_BENCH_REPLICATION_RDMA", "1") != std::string("0"),
          "with --transport=rdma: nodes replicate by RDMA WRITE + replica commit (false: gRPC); "
          "default: $KV_BENCH_REPLICATION_RDMA != 0");

namespace kvstore {
namespace testing {
namespace {

struct Row {
  std::string name;
  double ops_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  double cpu_us_per_op = 0;
  std::string note;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

bool Wanted(const std::string& what) {
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_only), ',')) {
    if (w == what) return true;
  }
  return false;
}

uint64_t ClusterCpuTicks(ClusterHarness& c) {
  uint64_t total = 0;
  for (int i = 0; i < c.size(); ++i) {
    if (c.node(i) != nullptr) total += c.node(i)->CpuTicks();
  }
  return total;
}

bool Rdma() { return absl::GetFlag(FLAGS_transport) == "rdma"; }

absl::StatusOr<std::unique_ptr<ClusterHarness>> StartCluster(const std::string& etcd, int nodes,
                                                             int replicas,
                                                             const std::string& pool = "256M") {
  ClusterOptions o;
  o.etcd_endpoint = etcd;
  o.nodes = nodes;
  o.replicas = replicas;
  o.member_ttl = absl::GetFlag(FLAGS_member_ttl);
  o.extra_flags = {"--pool_size=" + pool, "--grace_period=100ms"};
  if (Rdma()) {
    o.extra_flags.push_back("--transport=rdma");
    o.extra_flags.push_back("--rdma_device=" + absl::GetFlag(FLAGS_rdma_device));
    o.extra_flags.push_back(absl::StrCat("--replication_rdma=",
                                         absl::GetFlag(FLAGS_replication_rdma) ? "true" : "false"));
  } else {
    o.extra_flags.push_back("--transport=tcp");
  }
  auto c = ClusterHarness::Start(o);
  if (!c.ok()) return c.status();
  absl::Status s = (*c)->WaitHealthy(absl::Seconds(60));
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(s.message(), "\n", (*c)->Logs()));
  return c;
}

WorkloadOptions LoadOptions(ClusterHarness& c, double put, double del) {
  WorkloadOptions w;
  w.servers = c.ControlAddresses();
  w.clients = absl::GetFlag(FLAGS_clients);
  w.keys = 1024;
  w.put_fraction = put;
  w.delete_fraction = del;
  w.value_bytes = absl::GetFlag(FLAGS_value_bytes);
  w.seed = 7;
  w.op_timeout = absl::Seconds(5);
  w.transport = Rdma() ? client::TransportMode::kRdma : client::TransportMode::kTcp;
  return w;
}

// Runs `w` for a warm-up second plus --seconds and measures the window
// after the warm-up: acknowledged operations of `type` (any when nullopt).
// What the primaries' replication rounds did between two ServerCounters
// readings: mean round time and the share of replicated writes sent by
// RDMA ("" when nothing was replicated).
std::string ReplicationNote(const std::map<std::string, uint64_t>& before,
                            const std::map<std::string, uint64_t>& after) {
  auto delta = [&](const std::string& k) {
    auto a = after.find(k);
    auto b = before.find(k);
    return (a == after.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
  };
  const uint64_t rounds = delta("kvstore_replication_latency_seconds_count");
  const uint64_t installed =
      delta("kvstore_replica_installs_total") + delta("kvstore_replica_deletes_total");
  if (rounds == 0 || installed == 0) return "";
  std::string note =
      absl::StrFormat("round %.0f us, %.0f%% by rdma",
                      delta("kvstore_replication_latency_sum_micros") / static_cast<double>(rounds),
                      100.0 * delta("kvstore_replication_rdma_writes_total") / installed);
  // The backups' replica batch commits: writes per commit SEND.
  if (const uint64_t batches = delta("kvstore_rdma_replica_batches_total"); batches > 0) {
    absl::StrAppendFormat(
        &note, ", %.1f per rdma commit",
        delta("kvstore_rdma_replica_batch_writes_total") / static_cast<double>(batches));
  }
  return note;
}

Row MeasureLoad(ClusterHarness& c, const std::string& name, const WorkloadOptions& w,
                std::optional<OpType> type) {
  History history;
  Workload load(w, &history);
  load.Start();
  absl::SleepFor(absl::Seconds(1));
  const std::map<std::string, uint64_t> counters0 = ServerCounters(c.ControlAddresses());
  const int64_t from = NowNs();
  const uint64_t cpu0 = ClusterCpuTicks(c);
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_seconds)));
  const uint64_t cpu1 = ClusterCpuTicks(c);
  const int64_t to = NowNs();
  const std::map<std::string, uint64_t> counters1 = ServerCounters(c.ControlAddresses());
  load.Stop();
  std::vector<double> lat;
  size_t failed = 0;
  for (const Operation& op : history.Snapshot()) {
    if (op.invoke_ns < from || op.invoke_ns > to) continue;
    if (type.has_value() && op.type != *type) continue;
    if (op.outcome != Outcome::kOk) {
      ++failed;
      continue;
    }
    lat.push_back((op.complete_ns - op.invoke_ns) / 1e3);
  }
  Row r;
  r.name = name;
  r.ops_per_s = lat.size() / ((to - from) / 1e9);
  r.p50_us = Percentile(lat, 0.5);
  r.p99_us = Percentile(lat, 0.99);
  r.cpu_us_per_op =
      lat.empty() ? 0
                  : (cpu1 - cpu0) * 1e6 / ClockTicksPerSecond() / static_cast<double>(lat.size());
  if (failed > 0) {
    r.note = absl::StrCat(failed, " not acknowledged");
    // Why is in the nodes' logs, which go with the cluster: keep their ends.
    std::fprintf(stderr, "%s: %zu operations not acknowledged; the nodes' logs:\n%s\n",
                 name.c_str(), failed, c.Logs(16000).c_str());
  }
  const std::string replication = ReplicationNote(counters0, counters1);
  if (!replication.empty()) r.note += (r.note.empty() ? "" : "; ") + replication;
  return r;
}

// kill -9 of key0's primary under a PUT load, --runs times.
absl::Status Failover(const std::string& etcd, std::vector<Row>* rows) {
  auto c = StartCluster(etcd, 3, 2);
  if (!c.ok()) return c.status();
  ClusterHarness& cluster = **c;
  std::vector<double> to_write_ms, to_map_ms;
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    History history;
    WorkloadOptions w = LoadOptions(cluster, 1.0, 0);
    w.keys = 16;
    w.op_timeout = absl::Seconds(1);
    Workload load(w, &history);
    load.Start();
    absl::SleepFor(absl::Milliseconds(500));
    absl::StatusOr<int> victim = cluster.PrimaryIndexOf(load.Key(0));
    if (!victim.ok()) return victim.status();
    std::vector<std::string> keys;
    for (const std::string& k : load.keys()) {
      absl::StatusOr<int> p = cluster.PrimaryIndexOf(k);
      if (p.ok() && *p == *victim) keys.push_back(k);
    }
    const int64_t t0 = NowNs();
    cluster.KillNode(*victim);
    absl::StatusOr<std::string> successor =
        cluster.WaitNewPrimary(load.Key(0), ClusterHarness::NodeId(*victim), absl::Seconds(30));
    const int64_t t_map = NowNs();
    std::optional<int64_t> first;
    for (absl::Time end = absl::Now() + absl::Seconds(30); !first && absl::Now() < end;) {
      first = FirstAcknowledgedWrite(history.Snapshot(), keys, t0);
      if (!first) absl::SleepFor(absl::Milliseconds(10));
    }
    load.Stop();
    if (!successor.ok() || !first.has_value()) {
      return absl::DeadlineExceededError(
          absl::StrCat("run ", run, ": no failover\n", cluster.Logs()));
    }
    to_write_ms.push_back((*first - t0) / 1e6);
    to_map_ms.push_back((t_map - t0) / 1e6);
    std::fprintf(stderr, "failover run %d: %.0f ms to the first write, %.0f ms to the map\n", run,
                 to_write_ms.back(), to_map_ms.back());
    absl::Status s = cluster.RestartNode(*victim);
    if (s.ok()) s = cluster.WaitHealthy(absl::Seconds(60));
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(s.message(), "\n", cluster.Logs()));
  }
  Row r;
  r.name = "failover R=2 (ms)";
  r.p50_us = Percentile(to_write_ms, 0.5);
  r.p99_us = Percentile(to_write_ms, 0.99);
  r.note = absl::StrFormat(
      "kill->first ack write over %d runs; kill->new primary in map p50 %.0f "
      "p99 %.0f ms",
      static_cast<int>(to_write_ms.size()), Percentile(to_map_ms, 0.5),
      Percentile(to_map_ms, 0.99));
  rows->push_back(r);
  return absl::OkStatus();
}

// PUT and GET with R = 1, 2, 3 on three nodes; R=1 also gives "3 shards".
absl::Status Replication(const std::string& etcd, std::vector<Row>* rows) {
  for (int replicas = 1; replicas <= 3; ++replicas) {
    auto c = StartCluster(etcd, 3, replicas);
    if (!c.ok()) return c.status();
    if (Wanted("put") || Wanted("get")) {
      rows->push_back(MeasureLoad(**c, absl::StrCat("put R=", replicas), LoadOptions(**c, 1.0, 0),
                                  OpType::kPut));
      if (std::getenv("KV_BENCH_LOGS") != nullptr) {
        std::fprintf(stderr, "--- node logs after put R=%d ---\n%s\n", replicas,
                     (*c)->Logs(1 << 20).c_str());
      }
    }
    if (Wanted("get") && replicas != 2) {
      rows->push_back(
          MeasureLoad(**c, absl::StrCat("get R=", replicas), LoadOptions(**c, 0, 0), OpType::kGet));
    }
    if (Wanted("shards") && replicas == 1) {
      rows->push_back(
          MeasureLoad(**c, "mixed shards=3 R=1", LoadOptions(**c, 0.5, 0), std::nullopt));
    }
  }
  return absl::OkStatus();
}

absl::Status Shards(const std::string& etcd, std::vector<Row>* rows) {
  for (int nodes = 1; nodes <= 2; ++nodes) {
    auto c = StartCluster(etcd, nodes, 1);
    if (!c.ok()) return c.status();
    rows->push_back(MeasureLoad(**c, absl::StrCat("mixed shards=", nodes, " R=1"),
                                LoadOptions(**c, 0.5, 0), std::nullopt));
  }
  return absl::OkStatus();
}

// Writes about `mb` MiB of 64 KiB values under "fill-<i>" with 4 threads.
absl::Status Fill(ClusterHarness& c, int mb) {
  const int values = mb * 16;
  std::atomic<int> next{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      client::Options o;
      o.servers = c.ControlAddresses();
      o.transport = client::TransportMode::kTcp;
      auto kv = client::KvClient::Connect(o);
      if (!kv.ok()) {
        errors++;
        return;
      }
      const std::string value(64 << 10, 'f');
      for (int i = next++; i < values; i = next++) {
        if (!(*kv)->Put(absl::StrCat("fill-", i), value).ok()) errors++;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (errors > 0) return absl::InternalError(absl::StrCat(errors.load(), " fill writes failed"));
  return absl::OkStatus();
}

// Fill, kill a backup of fill-0's shard, wait until the map drops it,
// restart it, time until every shard is in sync again; fails when the
// victim came back to no shard (nothing was measured).
absl::Status Resync(const std::string& etcd, std::vector<Row>* rows) {
  const int mb = absl::GetFlag(FLAGS_fill_mb);
  // R=3 on 3 nodes: no spare member can refill the victim's place, so the
  // restarted victim itself is placed back and copies every shard (with
  // R=2 a spare refills first and the victim comes back to nothing).
  auto c = StartCluster(etcd, 3, 3, absl::StrCat(mb + 256, "M"));
  if (!c.ok()) return c.status();
  ClusterHarness& cluster = **c;
  absl::Status s = Fill(cluster, mb);
  if (!s.ok()) return s;
  absl::StatusOr<std::vector<int>> backups = cluster.BackupIndexesOf("fill-0");
  if (!backups.ok()) return backups.status();
  if (backups->empty()) return absl::InternalError("fill-0 has no backup");
  const int victim = backups->front();
  cluster.KillNode(victim);
  s = cluster.WaitNodeOutOfMap(victim, absl::Seconds(30));
  if (!s.ok()) return s;
  const int64_t t0 = NowNs();
  s = cluster.RestartNode(victim);
  if (s.ok()) s = cluster.WaitHealthy(absl::Seconds(600));
  const int64_t t1 = NowNs();
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(s.message(), "\n", cluster.Logs()));
  // The node holds its shards' share of the data (keys spread evenly).
  absl::StatusOr<v1::ClusterMap> map = cluster.GetMap();
  if (!map.ok()) return map.status();
  int held = 0;
  for (const v1::Shard& shard : map->shards()) {
    for (const std::string& r : shard.replicas()) held += r == ClusterHarness::NodeId(victim);
  }
  if (held == 0) {
    return absl::InternalError("the restarted node was placed in no shard: no resync to time");
  }
  const double gib = mb / 1024.0 * held / std::max(1, map->shards_size());
  const double secs = (t1 - t0) / 1e9;
  Row r;
  r.name = "resync (s)";
  r.p50_us = secs;
  r.note = absl::StrFormat("restart->in sync %.2f s for %.3f GiB (%d of %d shards): %.1f s/GiB",
                           secs, gib, held, map->shards_size(), gib > 0 ? secs / gib : 0);
  rows->push_back(r);
  return absl::OkStatus();
}

void Print(const std::vector<Row>& rows) {
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
      out.push_back({{"name", r.name},
                     {"ops_per_s", r.ops_per_s},
                     {"p50_us", r.p50_us},
                     {"p99_us", r.p99_us},
                     {"cpu_us_per_op", r.cpu_us_per_op},
                     {"note", r.note}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%-22s %12s %10s %10s %12s  %s\n", "experiment", "ops/s", "p50", "p99", "cpu us/op",
              "note");
  for (const Row& r : rows) {
    std::printf("%-22s %12.0f %10.1f %10.1f %12.1f  %s\n", r.name.c_str(), r.ops_per_s, r.p50_us,
                r.p99_us, r.cpu_us_per_op, r.note.c_str());
  }
  std::printf("(p50/p99 in us for load rows; in ms for failover; in s for resync)\n");
}

int Main() {
  EtcdProcess etcd;
  absl::Status s = etcd.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "etcd: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<Row> rows;
  if (s.ok() && Wanted("failover")) s = Failover(etcd.endpoint(), &rows);
  if (s.ok() && (Wanted("put") || Wanted("get") || Wanted("shards"))) {
    s = Replication(etcd.endpoint(), &rows);
  }
  if (s.ok() && Wanted("shards")) s = Shards(etcd.endpoint(), &rows);
  if (s.ok() && Wanted("resync")) s = Resync(etcd.endpoint(), &rows);
  Print(rows);
  if (!s.ok()) {
    std::fprintf(stderr, "cluster_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace testing
}  // namespace kvstore

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Under `bazel run` the working directory is the runfiles tree of the
  // workspace; tell BinaryPath() (tests/test_cluster.h) where it is.
  char cwd[4096];
  if (std::getenv("TEST_SRCDIR") == nullptr && access("server/kvserver", X_OK) == 0 &&
      getcwd(cwd, sizeof(cwd)) != nullptr) {
    const std::string dir(cwd);
    const size_t slash = dir.rfind('/');
    setenv("TEST_SRCDIR", dir.substr(0, slash).c_str(), 1);
    setenv("TEST_WORKSPACE", dir.substr(slash + 1).c_str(), 1);
  }
  return kvstore::testing::Main();
}
