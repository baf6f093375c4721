// Copyright 2026 The kvstore Authors.
//
// SetChecker: the write-once set workload. Each element is a key written
// exactly once (a PUT of a fresh key, never overwritten or deleted), read by
// samplers while the load runs and once more by a final read after it
// stopped. Because nothing is overwritten, lost or diverged data cannot
// hide behind a later write.
//
// Violations, per key:
//   kLost            an acknowledged insert whose final read found it absent;
//   kUnstable        a read found it present and a read invoked after that
//                    one completed found it absent (it appeared, then went);
//   kRefusedPresent  a read found the value of an insert the server refused
//                    (outcome fail: it must never appear);
//   kPhantom         a read found a value no insert of this key wrote
//                    (another value, or a key never inserted);
//   kFutureRead      a read completed before the insert it saw was invoked;
//   kNotWriteOnce    two inserts of one key: the workload broke the premise,
//                    and the key is not judged further.
// Not a violation: an insert of unknown outcome present or absent at the
// end (counted), a key without a final read (counted as unchecked).
//
// Thread safety: a pure function.

#ifndef KVSTORE_TESTS_JEPSEN_SET_CHECKER_H_
#define KVSTORE_TESTS_JEPSEN_SET_CHECKER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "tests/jepsen/history.h"

namespace kvstore {
namespace jepsen {

enum class SetViolationKind {
  kLost,
  kUnstable,
  kRefusedPresent,
  kPhantom,
  kFutureRead,
  kNotWriteOnce
};
const char* SetViolationName(SetViolationKind kind);

struct SetViolation {
  SetViolationKind kind;
  std::string key;
  std::vector<Op> ops;  // the insert (if any) and the reads that show it
};

struct SetReport {
  size_t keys = 0;
  size_t acked = 0;            // inserts acknowledged
  size_t failed = 0;           // inserts refused
  size_t unknown = 0;          // inserts of unknown outcome
  size_t unknown_present = 0;  // ... found present by the final read
  size_t unchecked = 0;        // keys without a final read
  std::vector<SetViolation> violations;
  bool ok() const { return violations.empty(); }
};

// `ops`: the set workload's ops (Normalize'd here).
SetReport CheckSet(const std::vector<Op>& ops);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_SET_CHECKER_H_
