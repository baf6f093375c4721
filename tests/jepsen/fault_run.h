// Copyright 2026 The kvstore Authors.
//
// RunFaults: one run of the fault suite, start to verdict. It starts a
// TestBed, runs the workloads, lets the nemesis inject, hold and heal
// faults one after the other until `duration` has passed, acts as the
// supervisor (a kvserver that exited — e.g. status 3 after its lease lapsed
// — is started again, as compose's restart policy would), then heals
// everything, waits for every shard to be in sync, reads every key, checks
// the history (per-key linearizability, the write-once set), compares every
// in-sync replica of every shard, and prints what it saw:
//
//   seed, faults injected (and which could not be), operations
//   ok/failed/unknown, failover times (fault to the first acknowledged
//   write on the keys of the node it hit), and the checkers' verdicts.
//
// Last it reads every version of the cluster map etcd kept during the run
// and checks the map-history invariants (map_history.h); a broken one is a
// violation like a history's.
//
// Thread safety: one run per process at a time (namespaces are named from
// the pid).

#ifndef KVSTORE_TESTS_JEPSEN_FAULT_RUN_H_
#define KVSTORE_TESTS_JEPSEN_FAULT_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tests/jepsen/nemesis.h"
#include "tests/jepsen/test_bed.h"
#include "tests/jepsen/workload.h"

namespace kvstore {
namespace jepsen {

struct FaultRunOptions {
  TestBedOptions bed;
  WorkloadOptions workload;  // seeds are filled in by the run
  std::vector<FaultKind> faults;
  uint64_t seed = 1;
  absl::Duration duration = absl::Minutes(1);
  // Quiet time between two faults (drawn in [gap, 2 gap]).
  absl::Duration gap = absl::Seconds(2);
  // How long a heal may take to bring every shard back in sync before the
  // run notes the cluster as not recovered (not a violation by itself).
  absl::Duration recover_timeout = absl::Seconds(60);
  std::string history_file;  // written when set
};

struct FaultRunResult {
  // The history check found one (linearizability, the set), or the map
  // history broke an invariant (map_violation).
  bool violation = false;
  bool map_violation = false;
  size_t map_revisions = 0;  // versions of the map the map check read
  // In-sync replicas differed at quiescence. Reported apart: replicas can
  // still differ on writes that were never acknowledged (docs/consistency.md
  // §5), which no read on the primary path has seen.
  bool diverged = false;
  bool undecided = false;  // a key's linearizability search ran out of budget
  int faults = 0;          // injected
  int faults_failed = 0;   // could not be injected
  int not_recovered = 0;   // heals after which the cluster was not in sync in time
  uint64_t ok = 0, failed = 0, unknown = 0;
  std::string report;  // everything printed, for a test's failure message
};

// Errors: kFailedPrecondition when the machine cannot host the bed (not
// root, no nftables or namespaces): callers skip; other errors when it
// could not start.
absl::StatusOr<FaultRunResult> RunFaults(FaultRunOptions options);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_FAULT_RUN_H_
