// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/fault_run.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/cluster/cluster_map.h"
#include "tests/jepsen/history_check.h"
#include "tests/jepsen/history_io.h"
#include "tests/jepsen/map_history.h"
#include "tests/jepsen/map_history_reader.h"
#include "tests/jepsen/replica_check.h"
#include "tests/jepsen/replica_reader.h"
#include "tests/jepsen/run_log.h"

namespace kvstore {
namespace jepsen {
namespace {

using testing::ClusterHarness;

using Log = RunLog;

// A fault that hit a node: when, and the register keys that node led then
// (the keys whose next acknowledged write measures the failover time).
struct Hit {
  std::string kind;
  int64_t at_ns = 0;
  std::set<std::string> keys;
};

std::set<std::string> KeysLedBy(ClusterHarness& c, int node, int keys) {
  std::set<std::string> led;
  absl::StatusOr<v1::ClusterMap> map = c.GetMap();
  if (!map.ok()) return led;
  auto view = cluster::ClusterMapView::Build(*map);
  if (!view.ok()) return led;
  const std::string id = ClusterHarness::NodeId(node);
  for (int i = 0; i < keys; ++i) {
    const std::string key = absl::StrCat("r", i);
    const v1::Shard* s = (*view)->ShardForKey(key);
    if (s != nullptr && s->replicas_size() > 0 && s->replicas(0) == id) led.insert(key);
  }
  return led;
}

// Fault to the first acknowledged write (invoked after it) on its keys.
std::string FailoverTimes(const std::vector<Hit>& hits, const std::vector<Op>& ops) {
  std::map<std::string, std::vector<double>> by_kind;
  for (const Hit& h : hits) {
    if (h.keys.empty()) continue;
    int64_t first = kNever;
    for (const Op& op : ops) {
      if (op.is_write() && op.outcome == Outcome::kOk && op.invoke_ns >= h.at_ns &&
          h.keys.count(op.key) > 0) {
        first = std::min(first, op.complete_ns);
      }
    }
    if (first != kNever) by_kind[h.kind].push_back((first - h.at_ns) / 1e6);
  }
  std::string out;
  for (auto& [kind, ms] : by_kind) {
    std::sort(ms.begin(), ms.end());
    const auto pct = [&](double p) {
      return ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))];
    };
    absl::StrAppendFormat(&out, "  %-12s n=%zu p50=%.0f ms p99=%.0f ms max=%.0f ms\n", kind,
                          ms.size(), pct(0.5), pct(0.99), ms.back());
  }
  return out.empty() ? "  (no fault hit a primary's keys)\n" : out;
}

// The supervisor: start every node that exited on its own again (not a
// parked one: it was taken out of the cluster on purpose).
void RestartExited(TestBed& bed, Log& log) {
  ClusterHarness& c = bed.cluster();
  for (int i = 0; i < c.size(); ++i) {
    if (c.Running(i) || bed.parked(i)) continue;
    std::optional<int> code = c.WaitNodeExit(i, absl::ZeroDuration());
    absl::Status s = c.RestartNode(i, /*wait_out_of_map=*/false);
    log("supervisor: n%d had exited (%s); restarted: %s", i + 1,
        code.has_value() ? absl::StrCat("status ", *code) : "killed", s.ok() ? "ok" : s.ToString());
  }
}

// Compares every in-sync replica of every shard over the keys written; a
// difference marks the run diverged, a replica that never answers leaves it
// undecided.
void CheckReplicas(ClusterHarness& c, const std::vector<Op>& ops, absl::Duration timeout, Log& log,
                   FaultRunResult* result) {
  const ReplicaCheck r = CompareReplicas(c, ops, timeout);
  log("replica convergence: %s", r.text);
  result->diverged = r.diverged;
  if (!r.checked) result->undecided = true;
}

// The in-sync floor the kvservers were given (--min_insync_replicas, the
// last one wins), with the server's default min(R, 2).
uint32_t MinInsync(const TestBedOptions& bed) {
  uint32_t floor = 0;
  for (absl::string_view f : bed.extra_flags) {
    if (absl::ConsumePrefix(&f, "--min_insync_replicas=")) (void)absl::SimpleAtoi(f, &floor);
  }
  return floor != 0 ? floor : static_cast<uint32_t>(std::min(bed.replicas, 2));
}

// Every version of the map etcd kept, checked against the map invariants.
void CheckMaps(const FaultRunOptions& options, TestBed& bed, Log& log, FaultRunResult* result) {
  bool truncated = false;
  absl::StatusOr<std::vector<MapRevision>> maps =
      ReadMapHistory(bed.EtcdEndpoints(), bed.cluster().options().cluster_name, &truncated);
  if (!maps.ok()) {
    log("map history: not checked: %s", maps.status().ToString());
    result->undecided = true;
    return;
  }
  MapHistoryOptions check;
  check.min_insync = MinInsync(options.bed);
  const MapHistoryResult verdict = CheckMapHistory(*maps, check);
  result->map_revisions = verdict.maps;
  result->map_violation = !verdict.ok();
  result->violation |= result->map_violation;
  log("map history%s: %s", truncated ? " (from a compaction on)" : "", verdict.Text(20));
}

// The nemesis loop: draw, inject, hold, heal, restart exited nodes, wait
// for every shard to be in sync; until options.duration has passed.
std::vector<Hit> InjectFaults(const FaultRunOptions& options, TestBed& bed, Nemesis& nemesis,
                              Log& log, FaultRunResult* result) {
  ClusterHarness& c = bed.cluster();
  std::vector<Hit> hits;
  std::mt19937_64 rng(options.seed ^ 0x9e3779b97f4a7c15ull);
  const absl::Time end = absl::Now() + options.duration;
  while (absl::Now() < end) {
    absl::SleepFor(options.gap * (1 + std::uniform_real_distribution<double>(0, 1)(rng)));
    Fault f = nemesis.Next();
    const std::set<std::string> led =
        f.node >= 0 ? KeysLedBy(c, f.node, options.workload.keys) : std::set<std::string>();
    absl::Status injected = nemesis.Inject(f);
    // Once the fault is wholly in place: a partition is several rules, and a
    // write acknowledged while the first are going in is no failover.
    const int64_t at = NowNs();
    if (!injected.ok()) {
      ++result->faults_failed;
      log("fault %s: not injected: %s", f.Describe(), injected.ToString());
      continue;
    }
    ++result->faults;
    log("fault %s", f.Describe());
    if (std::string note = nemesis.TakeNote(); !note.empty()) log("  %s", note);
    if (f.node >= 0) hits.push_back({FaultName(f.kind), at, led});
    absl::SleepFor(f.hold);
    absl::Status healed = nemesis.Heal(f);
    if (std::string note = nemesis.TakeNote(); !note.empty()) log("  %s", note);
    RestartExited(bed, log);
    const absl::Time t0 = absl::Now();
    absl::Status in_sync = c.WaitHealthy(options.recover_timeout);
    if (!in_sync.ok()) ++result->not_recovered;
    log("healed%s; %s after %.1f s", healed.ok() ? "" : absl::StrCat(" (", healed.ToString(), ")"),
        in_sync.ok() ? "every shard in sync" : absl::StrCat("NOT in sync: ", in_sync.message()),
        absl::ToDoubleSeconds(absl::Now() - t0));
  }
  return hits;
}

}  // namespace

absl::StatusOr<FaultRunResult> RunFaults(FaultRunOptions options) {
  FaultRunResult result;
  Log log(&result.report);
  log("seed %d (--seed=%d replays the fault draw), %d nodes, R=%d, %d etcd members, faults %d "
      "kinds, %s",
      options.seed, options.seed, options.bed.nodes, options.bed.replicas, options.bed.etcd_members,
      static_cast<int>(options.faults.size()), absl::FormatDuration(options.duration));
  options.bed.fake_clocks |=
      std::count(options.faults.begin(), options.faults.end(), FaultKind::kClockStep) > 0;
  absl::StatusOr<std::unique_ptr<TestBed>> started = TestBed::Start(options.bed);
  if (!started.ok()) return started.status();
  TestBed& bed = **started;
  ClusterHarness& c = bed.cluster();
  if (absl::Status s = c.WaitHealthy(absl::Seconds(60)); !s.ok()) return s;
  log("cluster up: etcd %s", bed.EtcdEndpoints());

  Recorder recorder;
  options.workload.seeds = c.ControlAddresses();
  options.workload.seed = options.seed;
  Workload load(options.workload, &recorder);
  load.Start();

  absl::Duration ttl;
  if (!absl::ParseDuration(options.bed.member_ttl, &ttl)) ttl = absl::Seconds(3);
  Nemesis nemesis(&bed, options.faults, options.seed, ttl);
  std::vector<Hit> hits = InjectFaults(options, bed, nemesis, log, &result);
  load.Stop();
  (void)bed.HealAll();
  RestartExited(bed, log);
  absl::Status quiet = c.WaitHealthy(options.recover_timeout * 2);
  log("load stopped; %s", quiet.ok() ? "every shard in sync" : quiet.ToString());
  absl::Status final_reads = load.FinalReads(absl::Minutes(2));
  if (!final_reads.ok()) log("final reads: %s", final_reads.ToString());

  std::vector<Op> ops = recorder.Snapshot();
  result.ok = recorder.Count(Outcome::kOk);
  result.failed = recorder.Count(Outcome::kFail);
  result.unknown = recorder.Count(Outcome::kUnknown);
  log("%d faults injected (%d could not be), %d heals not in sync in time; operations: %d ok, %d "
      "failed, %d unknown",
      result.faults, result.faults_failed, result.not_recovered, result.ok, result.failed,
      result.unknown);
  log("failover time (fault -> first acknowledged write on the keys the node led):\n%s",
      FailoverTimes(hits, ops));
  if (!options.history_file.empty()) {
    absl::Status w = WriteHistoryFile(options.history_file, ops);
    log("history: %s %s", options.history_file, w.ok() ? "written" : w.ToString());
  }

  HistoryCheckOptions check;
  check.require_final_reads = final_reads.ok();
  const HistoryCheckResult verdict = CheckHistory(ops, check);
  log("history check:\n%s", verdict.text);
  result.violation = verdict.violation;
  result.undecided = verdict.undecided;

  if (quiet.ok()) {
    CheckReplicas(c, ops, options.recover_timeout, log, &result);
  } else {
    log("replica convergence: not checked: the cluster never came back in sync");
    result.undecided = true;
  }
  CheckMaps(options, bed, log, &result);
  log("verdict: %s", result.violation   ? "VIOLATION"
                     : result.diverged  ? "replicas differ (docs/consistency.md §1.3)"
                     : result.undecided ? "undecided"
                                        : "PASS");
  return result;
}

}  // namespace jepsen
}  // namespace kvstore
