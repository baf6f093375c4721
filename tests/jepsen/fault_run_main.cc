// Copyright 2026 The kvstore Authors.
//
// fault_run: the fault suite as a program (fault_run.h). Needs root, `ip
// netns` and nftables (deploy/setup.sh), like the partition tests.
//
//   bazel run //tests/jepsen:fault_run -- --duration=10m --faults=all
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
ABSL_FLAG(std::vector<std::string>, server_flags, {},
          "extra kvserver flags, comma-separated (e.g. --min_insync_replicas=2)");

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
  absl::StatusOr<j::FaultRunResult> r = j::RunFaults(o);
  if (!r.ok()) {
    std::fprintf(stderr, "fault_run: %s\n", r.status().ToString().c_str());
    return absl::IsFailedPrecondition(r.status()) ? 77 : 4;
  }
  return r->violation || r->diverged ? 1 : r->undecided ? 3 : 0;
}
