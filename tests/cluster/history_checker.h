// Copyright 2026 The kvstore Authors.
//
// HistoryChecker: judges a History (history.h) of PUT/GET/DELETE operations
// on a replicated store, per key, assuming every PUT writes a value no other
// PUT writes (the workload makes them unique).
//
// Model. Each write W (PUT or DELETE, outcome kOk or kUnknown; kFailed ones
// never happened) takes effect at one instant inside [W.invoke, U(W)] where
//   U(W) = W.complete if W was acknowledged, +inf if its outcome is unknown,
//          and, for a PUT, at most the completion of the first kOk GET that
//          returned its value (a value a reader saw has taken effect; §19.3
//          publishes a value only once every in-sync replica holds it, so a
//          failover cannot lose it either).
// The key starts absent: a virtual DELETE with U = -inf.
// A write S is *superseded before time t* when some other write W2 has
// W2.invoke > U(S) (S took effect before W2 began) and U(W2) < t (W2 took
// effect before t).
//
// Violations found (one per offending read):
//   kPhantomRead    (b) a GET returned a value no PUT of this key wrote;
//   kFailedWriteRead    a GET returned the value of a PUT recorded kFailed
//                   (the caller said it was never sent);
//   kFutureRead     a GET returned a value whose PUT began after the GET
//                   completed;
//   kStaleRead      (c) a GET returned the value of a write superseded
//                   before the GET began (a PUT(v2) acknowledged, or seen by
//                   another read, before the GET was invoked, while PUT(v1)
//                   completed before PUT(v2) began, and the GET returned v1).
//                   A GET returning "absent" is stale when every DELETE (and
//                   the initial state) it could reflect was superseded.
//   kLostWrite      (a)+(d) the same for a final read: its value is not the
//                   last acknowledged write nor one concurrent with or after
//                   it; the superseding write named is the one lost.
//   kDuplicateValue two PUTs of one key wrote the same value: the checker's
//                   premise is broken (a workload bug), its verdicts on
//                   that value mean nothing;
//   kNoFinalRead    (a) require_final_reads and a key with an acknowledged
//                   write has no kOk final GET.
// Not judged: GETs with outcome kFailed/kUnknown (they saw nothing).
//
// Accepted, as a linearizable store may do them: concurrent overlapping
// writes seen in either order, unknown-outcome writes appearing (at any time
// after their invocation) or never, deletes.
//
// Cost: O(n log n) per key.
//
// Thread safety: Check() is a pure function of its arguments.

#ifndef KVSTORE_TESTS_CLUSTER_HISTORY_CHECKER_H_
#define KVSTORE_TESTS_CLUSTER_HISTORY_CHECKER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "tests/cluster/history.h"

namespace kvstore {
namespace testing {

enum class ViolationKind {
  kPhantomRead,
  kFailedWriteRead,
  kFutureRead,
  kStaleRead,
  kLostWrite,
  kNoFinalRead,
  kDuplicateValue,
};

const char* ViolationKindName(ViolationKind kind);

struct Violation {
  ViolationKind kind;
  std::string key;
  // The operations involved: the offending read first, then the write it
  // returned (absent for a phantom), then the superseding write.
  std::vector<Operation> ops;
  std::string explanation;

  std::string Describe() const;
};

struct CheckOptions {
  // Report kNoFinalRead for keys with acknowledged writes but no final read.
  bool require_final_reads = false;
  // Use "a read saw it" as evidence that a write took effect (see U(W)).
  // Off: only acknowledgements count, exactly checks (a)-(d) of the spec.
  bool reads_as_evidence = true;
};

struct CheckResult {
  std::vector<Violation> violations;
  size_t keys = 0;
  size_t reads_checked = 0;
  size_t final_reads = 0;
  size_t acknowledged_writes = 0;
  size_t unknown_writes = 0;

  bool ok() const { return violations.empty(); }
  // A summary line, then every violation (at most `max_violations`).
  std::string Report(size_t max_violations = 20) const;
};

CheckResult CheckHistory(const std::vector<Operation>& ops, const CheckOptions& options = {});

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_CLUSTER_HISTORY_CHECKER_H_
