// Copyright 2026 The kvstore Authors.
//
// RunEtcdOutage: a scripted fault-suite scenario (not drawn at random): the
// whole etcd cluster stops, then every member restarts, under load.
//
//   1. A TestBed (3 etcd members, N kvservers, R) in sync; the register,
//      write-once set and MultiPut workloads of the real client run.
//   2. Every etcd member is SIGSTOPped at once for `pause_ttls` member TTLs
//      (longer than every node's lease), then SIGCONTed.
//   3. Every member is killed (-9) and started again on its data directory:
//      one after the other, each back and healthy before the next goes
//      (kRolling), or all down together, then all started (kAllAtOnce: no
//      quorum until two are back).
//   4. The load goes on for `load_after`, then until every shard is in
//      sync again; then the final reads and the checks.
//
// What it checks: per-key linearizability and the write-once set
// (history_check.h); every in-sync replica identical at quiescence
// (replica_check.h); and that no kvserver exited (same pid throughout) or
// lost its memory (node_watch.h: its key count never fell below half of
// what it held before the outage). What it measures (write_availability.h):
// from the last etcd member back to the first acknowledged write and to
// every shard accepting writes, and the longest time without an
// acknowledged write (any shard, and the worst shard).
//
// Thread safety: one run per process at a time (namespaces are named from
// the pid).

#ifndef KVSTORE_TESTS_JEPSEN_ETCD_OUTAGE_H_
#define KVSTORE_TESTS_JEPSEN_ETCD_OUTAGE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/jepsen/test_bed.h"
#include "tests/jepsen/workload.h"
#include "tests/jepsen/write_availability.h"

namespace kvstore {
namespace jepsen {

enum class EtcdRestartOrder { kRolling, kAllAtOnce };

struct EtcdOutageOptions {
  TestBedOptions bed;
  WorkloadOptions workload;  // seeds are filled in by the run
  uint64_t seed = 1;         // the workload's (the faults are scripted)
  double pause_ttls = 2;     // how long etcd is frozen, in member TTLs
  EtcdRestartOrder restart = EtcdRestartOrder::kRolling;
  absl::Duration warmup = absl::Seconds(4);  // load before the outage
  // Load after the last member is back, before the cluster is required to
  // be in sync (the load goes on until it is).
  absl::Duration load_after = absl::Seconds(8);
  absl::Duration recover_timeout = absl::Seconds(60);
  std::string history_file;  // written when set
};

struct EtcdOutageResult {
  bool violation = false;     // the history check found one
  bool diverged = false;      // in-sync replicas differed at quiescence
  bool undecided = false;     // a search ran out of budget, or replicas unread
  bool node_exited = false;   // some kvserver exited (its pid changed)
  bool node_emptied = false;  // some kvserver's key count collapsed
  bool recovered = false;     // every shard in sync within recover_timeout
  int reregistrations = 0;    // "registered again" over every node's log
  // Copies the nodes received from the freeze on (kvstore_syncs_completed_total),
  // and the smallest key count any node fell to, as a fraction of what it
  // held before the freeze (1 = kept everything; a full copy that first
  // drops a shard's keys shows here).
  int copies_received = 0;
  double min_keys_fraction = 1;
  uint64_t ok = 0, failed = 0, unknown = 0;
  double outage_s = 0;  // from the freeze to the last member back
  // Measured from the last member back (since) and the freeze (from).
  WriteAvailability writes;
  double first_write_after_resume_ms = -1;  // from the SIGCONT
  std::string report;                       // everything printed
  // A broken promise: a violation, or a node that exited or lost its memory.
  bool Red() const { return violation || node_exited || node_emptied; }
};

std::string RestartOrderName(EtcdRestartOrder order);  // "rolling", "all-at-once"

// Errors: kFailedPrecondition when the machine cannot host the bed (not
// root, no nftables or namespaces): callers skip; other errors when it
// could not start or etcd did not come back.
absl::StatusOr<EtcdOutageResult> RunEtcdOutage(EtcdOutageOptions options);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_ETCD_OUTAGE_H_
