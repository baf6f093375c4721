// Copyright 2026 The kvstore Authors.
//
// Per-key linearizability of a register history (history.h): PUT writes its
// value, DELETE writes "absent", GET reads; every key starts absent. Keys
// are independent objects, so the history is linearizable iff each key's
// sub-history is (Herlihy & Wing's locality), and each is searched alone
// (register_search.h).
//
// What the ops mean to the search:
//   ok write       takes effect once, inside [invoke, complete];
//   unknown write  takes effect once at any time after its invocation, or
//                  never; one whose value no read returned after its
//                  invocation is left out (it could always be "never"), and
//                  a PUT whose value no other write wrote and a read saw is
//                  searched as completing when the first such read did
//                  (it must have taken effect by then);
//   failed write   never takes effect (a read of its value is a violation);
//   ok read        returns the state at one instant inside its interval.
//
// Verdict per key: kOk (a linearization exists), kViolation (none exists)
// or kUnknown (the search spent its budget: no verdict, never "ok").
// For a violation, the explanation is a small subset of the key's ops that
// has no linearization by itself, found by removing ops while the rest still
// fails. Only removals that cannot hide a violation are tried: a read, or a
// write whose value no remaining read returns. So any history containing
// the explanation's ops is not linearizable either; it is 1-minimal under
// those removals unless `minimal` is false (the shrink budget ran out).
// Writes left out of the search (failed ones, and unknown ones no read
// could have seen) whose value an explanation read returns are added to it.
//
// Thread safety: pure functions.

#ifndef KVSTORE_TESTS_JEPSEN_LINEARIZABILITY_H_
#define KVSTORE_TESTS_JEPSEN_LINEARIZABILITY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/jepsen/history.h"
#include "tests/jepsen/register_search.h"

namespace kvstore {
namespace jepsen {

struct LinearizabilityOptions {
  SearchBudget budget;  // per key
  bool explain = true;  // shrink a violation to an explanation
  // Steps of all the searches one explanation may run.
  uint64_t explain_steps = 20'000'000;
};

enum class Verdict { kOk, kViolation, kUnknown };
const char* VerdictName(Verdict v);

struct KeyVerdict {
  std::string key;
  Verdict verdict = Verdict::kOk;
  size_t ops = 0;               // ops searched (after pruning)
  size_t pruned_unknown = 0;    // unknown writes left out (never read)
  uint64_t steps = 0;           // search steps, the verdict's own
  std::vector<Op> explanation;  // kViolation: the ops, by invocation
  bool minimal = true;          // false: shrinking stopped early
  std::string reason;           // one line for people
};

struct LinearizabilityReport {
  size_t keys = 0;
  size_t keys_ok = 0;
  std::vector<KeyVerdict> violations;
  std::vector<KeyVerdict> unknown;  // keys past the budget
  bool ok() const { return violations.empty() && unknown.empty(); }
};

// One key's ops (Normalize'd, all of one key).
KeyVerdict CheckKey(const std::string& key, const std::vector<Op>& ops,
                    const LinearizabilityOptions& options);

// Every key of `ops` (Normalize'd here).
LinearizabilityReport CheckLinearizable(const std::vector<Op>& ops,
                                        const LinearizabilityOptions& options);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_LINEARIZABILITY_H_
