// Copyright 2026 The kvstore Authors.
//
// The fault suite's register workload over one-sided RDMA, in the Soft-RoCE
// VM (requires-rdma: deploy/test.sh runs it through tests/rxe). Three
// kvserver processes (R=2) and one etcd; every node serves RDMA on the
// VM's rxe device. Three register clients share the Zipf-skewed keys, each
// reading by another path:
//
//   rdma-cache    one-sided GETs with the location cache (one entry READ
//                 on a hit, checked against the fence words);
//   rdma-nocache  one-sided GETs without it (bucket READs, then the entry);
//   resp          RESP GETs over TCP, served by the primary's CPU.
//
// Each fault hits the primary of a hot key's shard, in a seeded order:
//   kill      kill -9, wait for the promotion, restart under the same id;
//   pause     SIGSTOP past the member TTL until another node is promoted,
//             then SIGCONT: the frozen node's NIC went on answering READs
//             all along, and only its fence words keep them from counting;
//   failover  the admin command (KvCluster/Failover) under load.
// After each the cluster must be healthy again and writes flow. Then the
// load stops, every key is read once more, and the whole history goes to
// the per-key linearizability checker (history_check.h: unknown outcomes
// may take effect once, at any time after their invocation, or never).
//
// The test also proves the reads were one-sided: the RDMA clients' own
// counters must show their GETs on the RDMA transport, none on TCP, almost
// none answered by the server's CPU, and location-cache hits only where the
// cache is on.
//
// Prints the seed (KV_FAULT_SEED=<n> replays the fault order, victims and
// the clients' choices), each fault, operations ok/failed/unknown per read
// path, the RDMA read counters and the checker's report; the history goes
// to TEST_UNDECLARED_OUTPUTS_DIR/history-rdma-register.jsonl.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/cluster/cluster_map.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"
#include "tests/jepsen/history.h"
#include "tests/jepsen/history_check.h"
#include "tests/jepsen/history_io.h"
#include "tests/jepsen/workload.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace jepsen {
namespace {

using testing::ClusterHarness;

constexpr int kKeys = 200;
// No fault begins later than this many seconds into the test (60-95 s in
// all on a quiet host).
constexpr double kLastFaultAt = 150;
constexpr char kCache[] = "rdma-cache";
constexpr char kNoCache[] = "rdma-nocache";
constexpr char kResp[] = "resp";
constexpr char kGetsOnRdma[] = "kvstore_client_requests_total{op=\"get\",transport=\"rdma\"}";
constexpr char kGetsOnTcp[] = "kvstore_client_requests_total{op=\"get\",transport=\"tcp\"}";

enum class FaultKind { kKill, kPause, kFailover };

const char* FaultName(FaultKind k) {
  switch (k) {
    case FaultKind::kKill:
      return "kill";
    case FaultKind::kPause:
      return "pause";
    case FaultKind::kFailover:
      return "failover";
  }
  return "?";
}

uint64_t Seed() {
  uint64_t seed = std::random_device{}() | 1;
  if (const char* env = std::getenv("KV_FAULT_SEED"); env != nullptr) {
    EXPECT_TRUE(absl::SimpleAtoi(env, &seed)) << "KV_FAULT_SEED=" << env;
  }
  std::printf("rdma register seed %llu (KV_FAULT_SEED=%llu replays it)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

// Seconds since the test began, for the lines it prints.
absl::Time g_start = absl::Now();
double Elapsed() { return absl::ToDoubleSeconds(absl::Now() - g_start); }

std::string Device() {
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  return dev != nullptr ? dev : "";
}

std::string OutputDir() {
  const char* d = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  return d != nullptr ? d : testing::TempDir();
}

std::vector<ClientPath> ReadPaths() {
  ClientPath cache{kCache, client::TransportMode::kRdma, Device()};
  ClientPath nocache = cache;
  nocache.name = kNoCache;
  nocache.location_cache_entries = 0;
  return {cache, nocache, ClientPath{}};
}

// The shard of `key` in the newest map: its id and the register keys it holds.
struct ShardOfKey {
  uint32_t id = 0;
  std::set<std::string> keys;
};

absl::StatusOr<ShardOfKey> ShardOf(ClusterHarness& cluster, const std::string& key) {
  absl::StatusOr<v1::ClusterMap> map = cluster.GetMap();
  if (!map.ok()) return map.status();
  auto view = cluster::ClusterMapView::Build(*std::move(map));
  if (!view.ok()) return view.status();
  const v1::Shard* shard = (*view)->ShardForKey(key);
  if (shard == nullptr) return absl::UnavailableError(absl::StrCat("no shard for ", key));
  ShardOfKey out;
  out.id = shard->shard_id();
  for (int i = 0; i < kKeys; ++i) {
    const std::string k = absl::StrCat("r", i);
    if ((*view)->ShardForKey(k) == shard) out.keys.insert(k);
  }
  return out;
}

// The admin failover of `shard`, asked of each running node in turn until
// one has it done (a node without a controller in its map says "retry"),
// for at most `timeout`. A second failover after one that answered late
// is harmless: it is one more fault of the same kind.
absl::Status Failover(ClusterHarness& cluster, uint32_t shard, absl::Duration timeout) {
  absl::Status last = absl::UnavailableError("no node running");
  for (const absl::Time end = absl::Now() + timeout; absl::Now() < end;) {
    for (int i = 0; i < cluster.size(); ++i) {
      if (!cluster.Running(i)) continue;
      auto stub = v1::KvCluster::NewStub(grpc::CreateChannel(cluster.node(i)->control_address(),
                                                             grpc::InsecureChannelCredentials()));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
      v1::FailoverRequest req;
      req.set_shard_id(shard);
      v1::FailoverResponse resp;
      grpc::Status s = stub->Failover(&ctx, req, &resp);
      if (s.ok()) return absl::OkStatus();
      last = absl::Status(
          static_cast<absl::StatusCode>(s.error_code()),
          absl::StrCat("failover via ", ClusterHarness::NodeId(i), ": ", s.error_message()));
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  return last;
}

// Waits until a write on `keys` invoked at or after `since_ns` was
// acknowledged; its invocation time.
std::optional<int64_t> WaitForWrite(const Recorder& recorder, const std::set<std::string>& keys,
                                    int64_t since_ns, absl::Duration timeout) {
  for (const absl::Time end = absl::Now() + timeout; absl::Now() < end;) {
    std::optional<int64_t> first;
    for (const Op& op : recorder.Snapshot()) {
      if (op.is_write() && op.outcome == Outcome::kOk && op.invoke_ns >= since_ns &&
          keys.count(op.key) > 0 && (!first.has_value() || op.invoke_ns < *first)) {
        first = op.invoke_ns;
      }
    }
    if (first.has_value()) return first;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return std::nullopt;
}

// Waits until every register path has `each` acknowledged reads and
// writes invoked at or after `since_ns`.
absl::Status WaitEveryPathWorks(const Recorder& recorder, const Workload& load, int64_t since_ns,
                                int each, absl::Duration timeout) {
  std::map<std::string, int> done;
  for (const absl::Time end = absl::Now() + timeout; absl::Now() < end;) {
    done.clear();
    for (const char* path : {kCache, kNoCache, kResp}) {
      done[absl::StrCat(path, " reads")] = 0;
      done[absl::StrCat(path, " writes")] = 0;
    }
    for (const Op& op : recorder.Snapshot()) {
      if (op.outcome != Outcome::kOk || op.invoke_ns < since_ns) continue;
      ++done[op.is_write() ? absl::StrCat(load.PathOf(op.client).name, " writes")
                           : absl::StrCat(op.path, " reads")];
    }
    if (std::all_of(done.begin(), done.end(), [&](const auto& d) { return d.second >= each; })) {
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  std::string text;
  for (const auto& [what, n] : done) absl::StrAppend(&text, text.empty() ? "" : ", ", what, " ", n);
  return absl::DeadlineExceededError(absl::StrCat("after ", absl::FormatDuration(timeout),
                                                  " acknowledged (", each, " wanted): ", text));
}

class RdmaRegisterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Line-buffered: the lines interleave with the client library's log.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    g_start = absl::Now();
    absl::Status s = etcd_.Start();
    ASSERT_TRUE(s.ok()) << s;
    testing::ClusterOptions o;
    o.etcd_endpoint = etcd_.endpoint();
    o.nodes = 3;
    o.replicas = 2;
    o.extra_flags = {"--pool_size=64M", "--transport=rdma",
                     absl::StrCat("--rdma_device=", Device()), "--grace_period=100ms"};
    // The VM emulates its CPUs (TCG): a 2 s lease renewed every 667 ms
    // would lapse on a slow moment without any fault.
    o.member_ttl = "4s";
    o.fence_margin = "1s";
    auto started = ClusterHarness::Start(o);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = *std::move(started);
    s = cluster_->WaitHealthy(absl::Seconds(60));
    ASSERT_TRUE(s.ok()) << s << "\n" << cluster_->Logs();
    std::printf("[%5.1fs] cluster healthy: 3 nodes, R=2, etcd %s\n", Elapsed(),
                etcd_.endpoint().c_str());
  }

  // Injects `kind` on the primary of `key`'s shard and waits until the
  // cluster is healthy again with writes flowing on that shard; what did
  // not happen in time otherwise.
  absl::Status Inject(FaultKind kind, const std::string& key);

  testing::EtcdProcess etcd_;
  std::unique_ptr<ClusterHarness> cluster_;
  Recorder recorder_;
};

absl::Status RdmaRegisterTest::Inject(FaultKind kind, const std::string& key) {
  ClusterHarness& c = *cluster_;
  // A busy host can make a lease lapse with no fault injected: each fault
  // starts from a cluster in sync.
  KV_RETURN_IF_ERROR(c.WaitHealthy(absl::Seconds(90)));
  absl::StatusOr<int> victim = c.PrimaryIndexOf(key);
  if (!victim.ok()) return victim.status();
  absl::StatusOr<ShardOfKey> shard = ShardOf(c, key);
  if (!shard.ok()) return shard.status();
  const std::string id = ClusterHarness::NodeId(*victim);
  std::printf("[%5.1fs] fault %s: %s, primary of shard %u (%s and %zu of %d keys)\n", Elapsed(),
              FaultName(kind), id.c_str(), shard->id, key.c_str(), shard->keys.size(), kKeys);
  const int64_t fault_ns = NowNs();
  if (kind == FaultKind::kKill) c.KillNode(*victim);
  if (kind == FaultKind::kPause) c.PauseNode(*victim);
  if (kind == FaultKind::kFailover) {
    KV_RETURN_IF_ERROR(Failover(c, shard->id, absl::Seconds(60)));
  }
  // Generous bounds: the VM emulates its CPUs and shares a busy host.
  absl::StatusOr<std::string> successor = c.WaitNewPrimary(key, id, absl::Seconds(60));
  if (kind == FaultKind::kPause) c.ResumeNode(*victim);
  if (!successor.ok()) return successor.status();
  if (kind == FaultKind::kKill) KV_RETURN_IF_ERROR(c.RestartNode(*victim));
  // Past the TTL another node leads the shard. Resumed, the node finds its
  // lease gone and registers again, keeping its memory.
  if (kind == FaultKind::kPause) {
    KV_RETURN_IF_ERROR(c.WaitReregistered(*victim, absl::Seconds(60)));
  }
  std::optional<int64_t> first = WaitForWrite(recorder_, shard->keys, fault_ns, absl::Seconds(60));
  if (!first.has_value()) {
    return absl::DeadlineExceededError("no write acknowledged on the shard since the fault");
  }
  KV_RETURN_IF_ERROR(c.WaitHealthy(absl::Seconds(90)));
  std::printf(
      "[%5.1fs]   new primary %s; first acknowledged write on the shard %.0f ms after the fault; "
      "healthy again\n",
      Elapsed(), successor->c_str(), (*first - fault_ns) / 1e6);
  return absl::OkStatus();
}

// Each shard of the newest map: epoch, replicas, syncing, last in-sync set.
std::string MapText(ClusterHarness& cluster) {
  absl::StatusOr<v1::ClusterMap> map = cluster.GetMap();
  if (!map.ok()) return map.status().ToString();
  std::string out = absl::StrCat("map epoch ", map->epoch(), "\n");
  for (const v1::Shard& s : map->shards()) {
    std::vector<std::string> last;
    for (const v1::ClusterNode& n : s.last_in_sync()) last.push_back(n.node_id());
    absl::StrAppend(&out, "  shard ", s.shard_id(), " epoch ", s.shard_epoch(), ": replicas [",
                    absl::StrJoin(s.replicas(), ","), "] syncing [",
                    absl::StrJoin(s.syncing(), ","), "] last_in_sync [", absl::StrJoin(last, ","),
                    "]\n");
  }
  return out;
}

// ok / failed / unknown per read path, reads and writes apart.
std::string PathTable(const std::vector<Op>& ops, const Workload& load) {
  struct Row {
    uint64_t n[2][3] = {};  // [read, write][ok, fail, unknown]
  };
  std::map<std::string, Row> rows;
  for (const Op& op : ops) {
    if (!op.workload.empty()) continue;
    const std::string path = op.final_read   ? "final (resp)"
                             : op.is_write() ? load.PathOf(op.client).name
                                             : op.path;
    rows[path].n[op.is_write() ? 1 : 0][static_cast<int>(op.outcome)]++;
  }
  std::string out = "  path           reads ok/fail/unknown   writes ok/fail/unknown\n";
  for (const auto& [path, r] : rows) {
    absl::StrAppendFormat(&out, "  %-14s %8d/%d/%-8d %12d/%d/%d\n", path, r.n[0][0], r.n[0][1],
                          r.n[0][2], r.n[1][0], r.n[1][1], r.n[1][2]);
  }
  return out;
}

// The sum of the series of `m` whose name starts with `prefix` (any labels).
uint64_t SumSeries(const std::map<std::string, uint64_t>& m, const std::string& prefix) {
  uint64_t sum = 0;
  for (auto it = m.lower_bound(prefix); it != m.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    sum += it->second;
  }
  return sum;
}

// The RDMA read counters of one path's clients; checks they went one-sided.
// `ok_reads`: the path's acknowledged GETs in the history (final reads
// excluded), each of which the RDMA transport must have counted.
void CheckOneSided(const Workload& load, const std::string& path, bool cache, uint64_t ok_reads) {
  const std::map<std::string, uint64_t> m = load.PathMetrics(path);
  const uint64_t rdma = testing::SeriesValue(m, kGetsOnRdma);
  const uint64_t tcp = testing::SeriesValue(m, kGetsOnTcp);
  const uint64_t by_cpu = testing::SeriesValue(m, "kvstore_client_server_fallback_gets_total");
  const auto cache_of = [&](const char* result) {
    return testing::SeriesValue(
        m, absl::StrCat("kvstore_client_location_cache_total{result=\"", result, "\"}"));
  };
  const uint64_t hits = cache_of("hit"), misses = cache_of("miss"), stale = cache_of("stale");
  std::printf(
      "  %s: GETs over rdma %llu (answered by the server CPU %llu), over tcp %llu; location "
      "cache hit %llu miss %llu stale %llu; fence refusals %llu\n",
      path.c_str(), static_cast<unsigned long long>(rdma), static_cast<unsigned long long>(by_cpu),
      static_cast<unsigned long long>(tcp), static_cast<unsigned long long>(hits),
      static_cast<unsigned long long>(misses), static_cast<unsigned long long>(stale),
      static_cast<unsigned long long>(SumSeries(m, "kvstore_client_fence_refusals_total")));
  EXPECT_GE(rdma, ok_reads) << path << ": every acknowledged read went by RDMA";
  EXPECT_EQ(tcp, 0u) << path << ": no silent fall back to TCP";
  EXPECT_LE(by_cpu * 10, rdma) << path << ": at most 10 % answered by the server's CPU";
  if (cache) {
    EXPECT_GT(hits, 0u) << path;
  } else {
    EXPECT_EQ(hits + stale, 0u) << path << ": the cache is off";
  }
}

TEST_F(RdmaRegisterTest, LinearizableUnderFaults) {
  const uint64_t seed = Seed();
  std::mt19937_64 rng(seed);
  WorkloadOptions w;
  w.seeds = cluster_->ControlAddresses();
  w.seed = seed;
  w.register_clients = 3;
  w.set_clients = 0;
  w.multiput_clients = 0;
  w.keys = kKeys;
  w.register_paths = ReadPaths();
  Workload load(w, &recorder_);
  load.Start();
  // Warm up until every path has read and written (a generous bound: the
  // VM shares a busy host).
  // Without it no fault is injected, but the history is still checked.
  const absl::Status warm = WaitEveryPathWorks(recorder_, load, 0, 5, absl::Seconds(90));
  EXPECT_TRUE(warm.ok()) << warm << "\n" << MapText(*cluster_);
  std::printf("[%5.1fs] load %s: %d register clients (%s, %s, %s), %d Zipf keys\n", Elapsed(),
              warm.ok() ? "running" : "NOT running on every path", w.register_clients, kCache,
              kNoCache, kResp, kKeys);

  std::vector<FaultKind> faults = {FaultKind::kKill, FaultKind::kPause, FaultKind::kFailover};
  std::shuffle(faults.begin(), faults.end(), rng);
  if (!warm.ok()) faults.clear();
  for (FaultKind f : faults) {
    // Leave time for the final reads and the check inside the harness's
    // per-binary timeout (300 s): a fault not injected is a failure, but
    // the history is still judged.
    if (Elapsed() > kLastFaultAt) {
      ADD_FAILURE() << "no time left for fault " << FaultName(f) << " after " << Elapsed()
                    << " s: the host is too slow for this test";
      break;
    }
    // A hot key: its shard carries most of the load.
    const std::string key = absl::StrCat("r", std::uniform_int_distribution<int>(0, 4)(rng));
    absl::Status injected = Inject(f, key);
    // The load runs on the recovered cluster before the next fault.
    if (injected.ok()) {
      injected = WaitEveryPathWorks(recorder_, load, NowNs(), 10, absl::Seconds(60));
    }
    if (!injected.ok()) {
      // The history so far is still checked below: stop injecting only.
      ADD_FAILURE() << "fault " << FaultName(f) << ": " << injected << "\n" << MapText(*cluster_);
      std::printf("[%5.1fs] fault %s did not recover: %s\n%s", Elapsed(), FaultName(f),
                  injected.ToString().c_str(), MapText(*cluster_).c_str());
      break;
    }
  }
  load.Stop();
  std::printf("[%5.1fs] load stopped\n", Elapsed());
  // Every node's whole log, beside the history.
  const std::string logs = absl::StrCat(OutputDir(), "/nodes.log");
  std::FILE* f = std::fopen(logs.c_str(), "w");
  if (f != nullptr) {
    const std::string text = cluster_->Logs(size_t{64} << 20);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }

  const absl::Status final_reads = load.FinalReads(absl::Seconds(60));
  EXPECT_TRUE(final_reads.ok()) << final_reads << "\n" << MapText(*cluster_);
  const std::vector<Op> ops = recorder_.Snapshot();
  std::printf("[%5.1fs] final reads %s\noperations per read path:\n%s", Elapsed(),
              final_reads.ok() ? "done" : "NOT done", PathTable(ops, load).c_str());
  std::printf("RDMA reads:\n");
  const auto ok_reads = [&](const char* path) {
    return static_cast<uint64_t>(std::count_if(ops.begin(), ops.end(), [&](const Op& op) {
      return op.kind == OpKind::kGet && !op.final_read && op.path == path &&
             op.outcome == Outcome::kOk;
    }));
  };
  CheckOneSided(load, kCache, true, ok_reads(kCache));
  CheckOneSided(load, kNoCache, false, ok_reads(kNoCache));
  const std::string dump = absl::StrCat(OutputDir(), "/history-rdma-register.jsonl");
  const absl::Status written = WriteHistoryFile(dump, ops);
  std::printf("history: %s %s\n", dump.c_str(), written.ok() ? "written" : "NOT written");

  HistoryCheckOptions check;
  check.require_final_reads = final_reads.ok();
  const HistoryCheckResult verdict = CheckHistory(ops, check);
  std::printf("[%5.1fs] history check:\n%s\n", Elapsed(), verdict.text.c_str());
  EXPECT_FALSE(verdict.violation) << verdict.text;
  EXPECT_FALSE(verdict.undecided) << verdict.text;
  // Every path read during the faults (WaitEveryPathWorks asked for 10
  // after each, 5 before the first).
  for (const char* path : {kCache, kNoCache, kResp}) EXPECT_GE(ok_reads(path), 35u) << path;
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
