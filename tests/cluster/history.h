// Copyright 2026 The kvstore Authors.
//
// History: a thread-safe record of every operation a cluster test's clients
// ran, with its real-time interval and outcome, for HistoryChecker
// (history_checker.h) to judge afterwards.
//
//   History h;
//   size_t id = h.Invoke(client, OpType::kPut, "k1", "v-17");
//   absl::Status s = kv->Put("k1", "v-17");
//   h.Complete(id, OutcomeOf(s), std::nullopt, s);
//
// Times are steady-clock nanoseconds (NowNs()), so intervals of different
// threads compare. An operation not completed when Snapshot() is taken
// counts as kUnknown, still in flight.
//
// Outcomes, chosen by the caller:
//   kOk       the server acknowledged it (a GET returned a value or NotFound,
//             a DELETE of an absent key is kOk too);
//   kFailed   definitely not applied (refused before anything was sent);
//   kUnknown  may or may not have been applied, now or later (timeout,
//             connection lost, any error after sending).
// When in doubt, kUnknown: the checker is lenient with it and strict with
// the other two.
//
// Thread safety: every method may be called from any thread.

#ifndef KVSTORE_TESTS_CLUSTER_HISTORY_H_
#define KVSTORE_TESTS_CLUSTER_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace testing {

enum class OpType { kPut, kGet, kDelete };
enum class Outcome { kPending, kOk, kFailed, kUnknown };

const char* OpTypeName(OpType type);
const char* OutcomeName(Outcome outcome);

// Steady-clock nanoseconds.
int64_t NowNs();

// NowNs()'s reading at the moment CLOCK_REALTIME read `wall_ns` (what
// `date +%s%N` prints), for a time taken by another process on the same
// kernel, e.g. a chaos script that injected a fault.
int64_t SteadyNsFromWallNs(int64_t wall_ns);

struct Operation {
  size_t id = 0;  // index in the history
  int client = 0;
  OpType type = OpType::kGet;
  std::string key;
  // PUT: the value written. GET (kOk): the value read, nullopt when the key
  // was absent. DELETE: nullopt.
  std::optional<std::string> value;
  int64_t invoke_ns = 0;
  int64_t complete_ns = 0;  // 0 while pending
  Outcome outcome = Outcome::kPending;
  // A read made after the workload stopped (no write in flight except
  // unknown ones): its value is the key's final state.
  bool final_read = false;
  std::string error;  // the status text of a failed/unknown operation

  // "#12 c3 PUT k1=v-17 [1.000200s, 1.000900s] ok".
  std::string Describe() const;
};

class History {
 public:
  History() = default;
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  // Records the start of an operation (now) and returns its id.
  size_t Invoke(int client, OpType type, absl::string_view key,
                std::optional<std::string> put_value = std::nullopt, bool final_read = false);
  // Records its end (now). `read_value` only for a kOk GET. `status` is kept
  // as text when not OK.
  void Complete(size_t id, Outcome outcome, std::optional<std::string> read_value = std::nullopt,
                const absl::Status& status = absl::OkStatus());

  // Adds a finished operation as is (hand-made histories in tests).
  size_t Add(Operation op);

  // A copy of every operation, in invocation order; pending ones are
  // reported as kUnknown with complete_ns = INT64_MAX.
  std::vector<Operation> Snapshot() const;
  size_t size() const;

  // One JSON object per line (ids, times relative to the first invoke), for
  // reading a failed run by hand.
  absl::Status DumpJsonLines(const std::string& path) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<Operation> ops_ ABSL_GUARDED_BY(mu_);
};

// The earliest completion time of an acknowledged (kOk) PUT or DELETE on one
// of `keys` that was invoked at or after `after_ns`, or nullopt: "when did
// writes succeed again" after a fault injected at `after_ns`.
std::optional<int64_t> FirstAcknowledgedWrite(const std::vector<Operation>& ops,
                                              const std::vector<std::string>& keys,
                                              int64_t after_ns);

// Up to `max` distinct error texts of operations invoked at or after
// `since_ns`, one per line: what clients saw, for a failure message.
std::string DistinctErrors(const std::vector<Operation>& ops, int64_t since_ns, size_t max = 5);

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_CLUSTER_HISTORY_H_
