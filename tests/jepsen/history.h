// Copyright 2026 The kvstore Authors.
//
// The history model the Jepsen-style checkers judge: every operation a
// client ran against the store, with its real-time interval and outcome.
//
// An operation is a PUT, GET or DELETE of one key. A MultiPut is recorded as
// one PUT per pair, each with the batch's interval and the batch's id in
// `batch` (each pair is judged as a separate write).
//
// Outcomes:
//   kOk       the server acknowledged it (a GET returned a value or "absent";
//             a DELETE of an absent key is kOk too);
//   kFail     it certainly had no effect: only when the server said so (a
//             typed refusal of effect kNone, common/cluster/refusal.h) or
//             the client refused it before sending anything;
//   kUnknown  it may take effect once or never, at any time after its
//             invocation (timeout, broken connection, "outcome unknown").
// An operation of unknown outcome never completes: its complete_ns is kNever
// whatever the client saw, because its effect may land at any later time.
// A GET that did not return kOk saw nothing and is dropped (Normalize).
//
// Keys start absent. DELETE writes "absent"; a GET of an absent key reads
// it (value nullopt).
//
// Times are nanoseconds on one clock (any origin); A precedes B in real time
// when A.complete_ns < B.invoke_ns, equal instants count as concurrent.
//
// Thread safety: value types and pure functions.

#ifndef KVSTORE_TESTS_JEPSEN_HISTORY_H_
#define KVSTORE_TESTS_JEPSEN_HISTORY_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvstore {
namespace jepsen {

inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

enum class OpKind { kPut, kGet, kDelete };
enum class Outcome { kOk, kFail, kUnknown };

const char* OpKindName(OpKind kind);   // "PUT", "GET", "DELETE"
const char* OutcomeName(Outcome out);  // "ok", "fail", "unknown"

struct Op {
  uint64_t id = 0;  // unique in its history; explanations name it
  int client = 0;
  OpKind kind = OpKind::kGet;
  std::string key;
  // PUT: the value written. GET (kOk): the value read, nullopt = absent.
  // DELETE: nullopt.
  std::optional<std::string> value;
  int64_t invoke_ns = 0;
  int64_t complete_ns = kNever;  // kNever while pending and for kUnknown
  Outcome outcome = Outcome::kUnknown;
  std::string batch;        // MultiPut: the batch's id; empty otherwise
  std::string workload;     // "set" for the write-once set; empty: register
  bool final_read = false;  // a GET after the load stopped (the final state)
  std::string path;         // which read path served a GET, for people
  std::string error;        // the status text of a failed/unknown op

  bool is_write() const { return kind != OpKind::kGet; }
  // "#12 c3 PUT k1=v-17 [1.000200s, 1.000900s] ok"; times relative to
  // `origin_ns`.
  std::string Describe(int64_t origin_ns = 0) const;
};

// The history as the checkers take it: reads that did not return kOk are
// dropped, an unknown op's complete_ns becomes kNever, and a write's
// complete_ns is at least its invoke_ns.
std::vector<Op> Normalize(std::vector<Op> ops);

// The ops of each key, in the order given.
std::map<std::string, std::vector<Op>> ByKey(const std::vector<Op>& ops);

// The earliest invoke_ns (0 for none): the origin Describe prints from.
int64_t Origin(const std::vector<Op>& ops);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_HISTORY_H_
