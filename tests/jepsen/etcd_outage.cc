// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/etcd_outage.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cluster/cluster_map.h"
#include "tests/jepsen/history_check.h"
#include "tests/jepsen/history_io.h"
#include "tests/jepsen/node_watch.h"
#include "tests/jepsen/replica_check.h"
#include "tests/jepsen/run_log.h"

namespace kvstore {
namespace jepsen {
namespace {

using testing::ClusterHarness;

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Kills every member and starts it again on its data, in `order`. Returns
// once every member is healthy (has a leader).
absl::Status RestartEveryMember(TestBed& bed, EtcdRestartOrder order, RunLog& log) {
  if (order == EtcdRestartOrder::kRolling) {
    for (int m = 0; m < bed.etcd_members(); ++m) {
      const absl::Time t0 = absl::Now();
      bed.etcd(m).Kill();
      if (absl::Status s = bed.RestartEtcd(m); !s.ok()) return s;
      log("etcd e%d killed and restarted: healthy after %.1f s", m + 1,
          absl::ToDoubleSeconds(absl::Now() - t0));
    }
    return absl::OkStatus();
  }
  for (int m = 0; m < bed.etcd_members(); ++m) bed.etcd(m).Kill();
  log("every etcd member killed");
  const absl::Time t0 = absl::Now();
  for (int m = 0; m < bed.etcd_members(); ++m) {
    if (absl::Status s = bed.etcd(m).StartAsync(); !s.ok()) return s;
  }
  for (int m = 0; m < bed.etcd_members(); ++m) {
    if (absl::Status s = bed.etcd(m).WaitHealthy(); !s.ok()) return s;
  }
  log("every etcd member started again: healthy after %.1f s",
      absl::ToDoubleSeconds(absl::Now() - t0));
  return absl::OkStatus();
}

// A node that exited is a broken promise here (a lease lapse must not end
// the process); it is started again only so the final checks can run.
void CheckProcesses(ClusterHarness& c, const std::vector<pid_t>& pids, RunLog& log,
                    EtcdOutageResult* result) {
  for (int i = 0; i < c.size(); ++i) {
    if (c.Running(i) && c.node(i)->pid() == pids[i]) continue;
    result->node_exited = true;
    std::optional<int> code = c.Running(i) ? std::nullopt : c.WaitNodeExit(i, absl::ZeroDuration());
    log("NODE EXITED: n%d (pid %d) %s", i + 1, pids[i],
        code.has_value() ? absl::StrCat("exit status ", *code) : "replaced");
    if (!c.Running(i)) {
      absl::Status s = c.RestartNode(i, /*wait_out_of_map=*/false);
      log("n%d started again for the checks: %s", i + 1, s.ok() ? "ok" : s.ToString());
    }
  }
}

void ReportNodes(ClusterHarness& c, const NodeWatch& watch, RunLog& log, EtcdOutageResult* result) {
  const std::vector<NodeWatch::Summary> nodes = watch.Summaries();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeWatch::Summary& s = nodes[i];
    const int rereg =
        c.node(i) != nullptr ? CountOf(c.node(i)->Log(), "registered again as incarnation") : 0;
    result->reregistrations += rereg;
    if (s.Emptied()) result->node_emptied = true;
    result->copies_received += s.syncs_last - s.syncs_before;
    if (s.keys_before > 0 && s.min_keys_after >= 0) {
      result->min_keys_fraction = std::min(result->min_keys_fraction,
                                           static_cast<double>(s.min_keys_after) / s.keys_before);
    }
    log("%s: keys %d before, min %d after (%d samples, %d unanswered), %d at the end; copies "
        "received %d (%d entries); registered again %d times%s",
        s.name, s.keys_before, s.min_keys_after, s.answered_after, s.unanswered_after, s.keys_last,
        s.syncs_last - s.syncs_before, s.sync_entries_last - s.sync_entries_before, rereg,
        s.Emptied() ? "  <-- LOST ITS MEMORY" : "");
  }
}

// Key -> shard id from the map at the end (the outage moves no slot).
WriteAvailability Measure(ClusterHarness& c, const std::vector<Op>& ops, int64_t from,
                          int64_t since, int64_t until) {
  std::shared_ptr<const cluster::ClusterMapView> view;
  int shards = 0;
  if (absl::StatusOr<v1::ClusterMap> map = c.GetMap(); map.ok()) {
    for (const v1::Shard& s : map->shards()) shards = std::max<int>(shards, s.shard_id() + 1);
    if (auto built = cluster::ClusterMapView::Build(*map); built.ok()) view = *built;
  }
  const auto shard_of = [&view](const std::string& key) {
    const v1::Shard* s = view ? view->ShardForKey(key) : nullptr;
    return s == nullptr ? -1 : static_cast<int>(s->shard_id());
  };
  return MeasureWrites(ops, shard_of, view ? shards : 0, from, since, until);
}

// Linearizability, the set, and the replicas at quiescence.
void CheckData(ClusterHarness& c, const std::vector<Op>& ops, bool final_reads, bool quiet,
               absl::Duration timeout, RunLog& log, EtcdOutageResult* result) {
  HistoryCheckOptions check;
  check.require_final_reads = final_reads;
  const HistoryCheckResult verdict = CheckHistory(ops, check);
  log("history check:\n%s", verdict.text);
  result->violation = verdict.violation;
  result->undecided = verdict.undecided;
  if (!quiet) {
    log("replica convergence: not checked: the cluster never came back in sync");
    result->undecided = true;
    return;
  }
  const ReplicaCheck r = CompareReplicas(c, ops, timeout);
  log("replica convergence: %s", r.text);
  result->diverged = r.diverged;
  if (!r.checked) result->undecided = true;
}

// A red verdict keeps every node's whole log (the report has no room for
// them) where bazel keeps a test's outputs, so a rare failure can be read.
void SaveNodeLogs(ClusterHarness& c, RunLog& log) {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (dir == nullptr) return;
  const std::string path = absl::StrCat(dir, "/etcd-outage-node-logs.txt");
  std::ofstream out(path);
  out << c.Logs(/*tail_bytes=*/std::string::npos);
  log("node logs: %s%s", path, out.good() ? "" : " (write failed)");
}

struct Instants {
  int64_t freeze = 0, resume = 0, back = 0, until = 0;
};

// Steps 2-4 of the header: freeze, thaw, restart every member, wait for the
// cluster, keep the load on a while. Fills `at`.
absl::Status Outage(const EtcdOutageOptions& options, TestBed& bed, NodeWatch& watch, RunLog& log,
                    Instants* at, EtcdOutageResult* result) {
  absl::Duration ttl;
  if (!absl::ParseDuration(options.bed.member_ttl, &ttl)) ttl = absl::Seconds(3);
  const absl::Duration hold = ttl * options.pause_ttls;
  watch.MarkOutage();
  for (int m = 0; m < bed.etcd_members(); ++m) bed.etcd(m).Pause();
  at->freeze = NowNs();
  log("every etcd member paused (SIGSTOP) for %s (%.1f TTL)", absl::FormatDuration(hold),
      options.pause_ttls);
  absl::SleepFor(hold);
  for (int m = 0; m < bed.etcd_members(); ++m) bed.etcd(m).Resume();
  at->resume = NowNs();
  log("every etcd member resumed (SIGCONT); restarting every member (%s)",
      RestartOrderName(options.restart));
  if (absl::Status s = RestartEveryMember(bed, options.restart, log); !s.ok()) return s;
  at->back = NowNs();
  result->outage_s = (at->back - at->freeze) / 1e9;
  log("last etcd member back %.1f s after the freeze", result->outage_s);
  // The load goes on through the recovery: a node whose lease lapsed finds
  // out only now and registers again, and the map changes after that. A
  // map checked at once would still be the one from before the freeze.
  absl::SleepFor(options.load_after);
  absl::Status in_sync = bed.cluster().WaitHealthy(options.recover_timeout);
  result->recovered = in_sync.ok();
  log("%s",
      in_sync.ok() ? "every shard in sync" : absl::StrCat("NOT in sync: ", in_sync.message()));
  at->until = NowNs();
  return absl::OkStatus();
}

}  // namespace

std::string RestartOrderName(EtcdRestartOrder order) {
  return order == EtcdRestartOrder::kRolling ? "rolling" : "all-at-once";
}

absl::StatusOr<EtcdOutageResult> RunEtcdOutage(EtcdOutageOptions options) {
  EtcdOutageResult result;
  RunLog log(&result.report);
  log("scenario etcd-outage: seed %d (workload), %d nodes, R=%d, %d etcd members, TTL %s, freeze "
      "%.1f TTL, restart %s",
      options.seed, options.bed.nodes, options.bed.replicas, options.bed.etcd_members,
      options.bed.member_ttl, options.pause_ttls, RestartOrderName(options.restart));
  absl::StatusOr<std::unique_ptr<TestBed>> started = TestBed::Start(options.bed);
  if (!started.ok()) return started.status();
  TestBed& bed = **started;
  ClusterHarness& c = bed.cluster();
  if (absl::Status s = c.WaitHealthy(absl::Seconds(60)); !s.ok()) return s;
  std::vector<pid_t> pids;
  std::vector<WatchedNode> watched;
  for (int i = 0; i < c.size(); ++i) {
    pids.push_back(c.node(i)->pid());
    watched.push_back({ClusterHarness::NodeId(i), c.node(i)->control_address()});
  }
  log("cluster up: etcd %s", bed.EtcdEndpoints());

  NodeWatch watch(watched, absl::Milliseconds(250));
  watch.Start();
  Recorder recorder;
  options.workload.seeds = c.ControlAddresses();
  options.workload.seed = options.seed;
  Workload load(options.workload, &recorder);
  load.Start();
  absl::SleepFor(options.warmup);

  Instants at;
  absl::Status outage = Outage(options, bed, watch, log, &at, &result);
  load.Stop();
  if (!outage.ok()) return outage;
  CheckProcesses(c, pids, log, &result);
  const absl::Status quiet = c.WaitHealthy(options.recover_timeout);
  watch.Stop();
  log("load stopped; %s", quiet.ok() ? "every shard in sync" : quiet.ToString());
  ReportNodes(c, watch, log, &result);
  const absl::Status final_reads = load.FinalReads(absl::Minutes(2));
  if (!final_reads.ok()) log("final reads: %s", final_reads.ToString());

  const std::vector<Op> ops = recorder.Snapshot();
  result.ok = recorder.Count(Outcome::kOk);
  result.failed = recorder.Count(Outcome::kFail);
  result.unknown = recorder.Count(Outcome::kUnknown);
  result.writes = Measure(c, ops, at.freeze, at.back, at.until);
  result.first_write_after_resume_ms =
      Measure(c, ops, at.freeze, at.resume, at.until).first_write_ms;
  log("operations: %d ok, %d failed, %d unknown", result.ok, result.failed, result.unknown);
  log("writes after the last etcd member was back: %s; first write after SIGCONT %.0f ms",
      DescribeAvailability(result.writes), result.first_write_after_resume_ms);
  if (!options.history_file.empty()) {
    absl::Status w = WriteHistoryFile(options.history_file, ops);
    log("history: %s %s", options.history_file, w.ok() ? "written" : w.ToString());
  }
  CheckData(c, ops, final_reads.ok(), quiet.ok(), options.recover_timeout, log, &result);
  log("verdict: %s", result.violation      ? "VIOLATION"
                     : result.node_exited  ? "A NODE EXITED"
                     : result.node_emptied ? "A NODE LOST ITS MEMORY"
                     : result.diverged     ? "replicas differ (docs/consistency.md §1.3)"
                     : result.undecided    ? "undecided"
                                           : "PASS");
  if (result.Red()) SaveNodeLogs(c, log);
  return result;
}

}  // namespace jepsen
}  // namespace kvstore
