// Copyright 2026 The kvstore Authors.
//
// fault_run: the fault suite as a program (fault_run.h). Needs root, `ip
// netns` and nftables (deploy/setup.sh), like the partition tests.
//
//   bazel run //tests/jepsen:fault_run -- --duration=10m --faults=all
//
// A scripted scenario instead of the random nemesis:
//
//   fault_run --scenario=etcd-outage [--etcd_restart=rolling|all-at-once]
//
// (etcd_outage.h: every etcd member frozen for --pause_ttls TTLs, then
// every member restarted, under load; it prints the time until writes are
// accepted again and exits 1 also when a kvserver exited or lost its data.)
//
// Exit status: 0 no violation; 1 a checker found one; 3 a key's search ran
// out of budget (undecided); 2 bad usage; 77 the machine cannot host the
// bed (not root, no nftables); 4 the bed did not start.

#include <cstdio>
#include <random>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tests/jepsen/etcd_outage.h"
#include "tests/jepsen/fault_run.h"

ABSL_FLAG(uint64_t, seed, 0, "seed of the fault draw and the workload (0: random, printed)");
ABSL_FLAG(absl::Duration, duration, absl::Minutes(2), "how long faults are injected");
ABSL_FLAG(int, nodes, 4, "kvservers");
ABSL_FLAG(int, replicas, 2, "R");
ABSL_FLAG(int, etcd_members, 3, "etcd members");
ABSL_FLAG(
    std::string, faults, "all",
    "comma-separated fault kinds (kill, pause, cut-etcd, cut-peer, cut-clients, one-way, cut-all, "
    "etcd-kill, etcd-pause, etcd-isolate, failover, clock-step, full-pool, add-remove) or all");
ABSL_FLAG(std::string, member_ttl, "3s", "kvserver --member_ttl");
ABSL_FLAG(int, keys, 2000, "register keys");
ABSL_FLAG(std::string, history, "", "write the history (JSON lines) here");
ABSL_FLAG(std::string, scenario, "",
          "a scripted scenario instead of random faults: etcd-outage (etcd_outage.h)");
ABSL_FLAG(std::string, etcd_restart, "rolling",
          "etcd-outage: restart the members one after the other (rolling) or all-at-once");
ABSL_FLAG(double, pause_ttls, 2, "etcd-outage: how long every etcd member is frozen, in TTLs");
ABSL_FLAG(std::vector<std::string>, server_flags, {},
          "extra kvserver flags, comma-separated (e.g. --min_insync_replicas=2)");

namespace {

// The scripted etcd outage with the run's bed and workload; its exit status.
int RunEtcdOutage(const kvstore::jepsen::FaultRunOptions& run) {
  namespace j = kvstore::jepsen;
  j::EtcdOutageOptions o;
  o.bed = run.bed;
  o.workload = run.workload;
  o.seed = run.seed;
  o.history_file = run.history_file;
  o.pause_ttls = absl::GetFlag(FLAGS_pause_ttls);
  const std::string order = absl::GetFlag(FLAGS_etcd_restart);
  if (order != "rolling" && order != "all-at-once") {
    std::fprintf(stderr, "fault_run: --etcd_restart is rolling or all-at-once\n");
    return 2;
  }
  o.restart = order == "rolling" ? j::EtcdRestartOrder::kRolling : j::EtcdRestartOrder::kAllAtOnce;
  absl::StatusOr<j::EtcdOutageResult> r = j::RunEtcdOutage(o);
  if (!r.ok()) {
    std::fprintf(stderr, "fault_run: %s\n", r.status().ToString().c_str());
    return absl::IsFailedPrecondition(r.status()) ? 77 : 4;
  }
  // One line for scripts that gather many seeds.
  std::printf(
      "FIGURES seed=%llu R=%d restart=%s outage_s=%.1f first_write_ms=%.0f all_shards_ms=%.0f "
      "first_write_after_sigcont_ms=%.0f longest_gap_ms=%.0f worst_shard_gap_ms=%.0f "
      "ok=%llu failed=%llu unknown=%llu violation=%d node_exited=%d node_emptied=%d diverged=%d "
      "undecided=%d reregistrations=%d copies=%d min_keys_fraction=%.2f\n",
      static_cast<unsigned long long>(o.seed), o.bed.replicas, order.c_str(), r->outage_s,
      r->writes.first_write_ms, r->writes.all_shards_ms, r->first_write_after_resume_ms,
      r->writes.longest_gap_ms, r->writes.longest_shard_gap_ms,
      static_cast<unsigned long long>(r->ok), static_cast<unsigned long long>(r->failed),
      static_cast<unsigned long long>(r->unknown), r->violation, r->node_exited, r->node_emptied,
      r->diverged, r->undecided, r->reregistrations, r->copies_received, r->min_keys_fraction);
  return r->Red() || r->diverged ? 1 : r->undecided ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "fault_run: a multi-member etcd and kvservers in network namespaces, a random nemesis, "
      "register/set/multiput workloads, per-key linearizability and replica convergence "
      "checks. Needs root and nftables.");
  absl::ParseCommandLine(argc, argv);
  namespace j = kvstore::jepsen;
  j::FaultRunOptions o;
  if (absl::Status s = j::ParseFaults(absl::GetFlag(FLAGS_faults), &o.faults); !s.ok()) {
    std::fprintf(stderr, "fault_run: --faults: %s\n", s.ToString().c_str());
    return 2;
  }
  o.seed = absl::GetFlag(FLAGS_seed);
  if (o.seed == 0) o.seed = std::random_device{}() | 1;
  o.duration = absl::GetFlag(FLAGS_duration);
  o.bed.nodes = absl::GetFlag(FLAGS_nodes);
  o.bed.max_nodes = o.bed.nodes + 1;
  o.bed.replicas = absl::GetFlag(FLAGS_replicas);
  o.bed.etcd_members = absl::GetFlag(FLAGS_etcd_members);
  o.bed.member_ttl = absl::GetFlag(FLAGS_member_ttl);
  for (const std::string& f : absl::GetFlag(FLAGS_server_flags)) o.bed.extra_flags.push_back(f);
  o.workload.keys = absl::GetFlag(FLAGS_keys);
  o.history_file = absl::GetFlag(FLAGS_history);
  if (absl::GetFlag(FLAGS_scenario) == "etcd-outage") return RunEtcdOutage(o);
  if (!absl::GetFlag(FLAGS_scenario).empty()) {
    std::fprintf(stderr, "fault_run: unknown --scenario\n");
    return 2;
  }
  absl::StatusOr<j::FaultRunResult> r = j::RunFaults(o);
  if (!r.ok()) {
    std::fprintf(stderr, "fault_run: %s\n", r.status().ToString().c_str());
    return absl::IsFailedPrecondition(r.status()) ? 77 : 4;
  }
  return r->violation || r->diverged ? 1 : r->undecided ? 3 : 0;
}
