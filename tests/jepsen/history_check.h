// Copyright 2026 The kvstore Authors.
//
// HistoryCheck: every check of this package over one history, as the
// check_history program prints it. The register keys go to the per-key
// linearizability checker (linearizability.h), the write-once set's keys
// (ops with workload "set", or keys starting with `set_prefix`) to the set
// checker (set_checker.h). With require_final_reads, a register key with an
// acknowledged write and no final read is a violation (without a final read
// a lost write goes unseen).
//
// Result: the report text (counts, then each violation with the ops that
// show it) and whether any check found a violation or could not decide.
//
// Thread safety: a pure function.

#ifndef KVSTORE_TESTS_JEPSEN_HISTORY_CHECK_H_
#define KVSTORE_TESTS_JEPSEN_HISTORY_CHECK_H_

#include <cstddef>
#include <string>
#include <vector>

#include "tests/jepsen/convergence.h"
#include "tests/jepsen/history.h"
#include "tests/jepsen/linearizability.h"

namespace kvstore {
namespace jepsen {

struct HistoryCheckOptions {
  LinearizabilityOptions linearizability;
  std::string set_prefix;  // empty: only ops marked workload "set"
  bool require_final_reads = false;
  size_t max_reported = 10;  // violations printed per check
};

struct HistoryCheckResult {
  std::string text;
  bool violation = false;  // some check found one
  bool undecided = false;  // some key's search ran out of budget
  // 1 on a violation, else 3 when undecided, else 0.
  int ExitCode() const { return violation ? 1 : (undecided ? 3 : 0); }
};

HistoryCheckResult CheckHistory(const std::vector<Op>& ops, const HistoryCheckOptions& options);

// The convergence report as text; *violation set on a difference.
std::string ConvergenceText(const ConvergenceReport& report, size_t max_reported, bool* violation);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_HISTORY_CHECK_H_
