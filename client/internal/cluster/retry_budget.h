// Copyright 2026 The kvstore Authors.
//
// RetryBudget: one cluster client operation's retry policy — how many
// attempts, until when, and how long to back off between them (20 ms
// doubling to 500 ms after a refresh that found no newer map; 5 ms doubling
// to 100 ms after a kTryAgain refusal) — and the helpers that read an
// attempt's status under it (which writes may be sent again, and what one
// that may not returns); BatchFailure, the failure a batch's next step is
// decided by.
// Used only by cluster_client.cc (see cluster_client.h for the
// behaviour).
//
// Thread safety: a RetryBudget belongs to one operation (one thread, or the
// threads of one batch reading deadline() only).

#ifndef KVSTORE_CLIENT_INTERNAL_CLUSTER_RETRY_BUDGET_H_
#define KVSTORE_CLIENT_INTERNAL_CLUSTER_RETRY_BUDGET_H_

#include <algorithm>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/internal/cluster/cluster_errors.h"
#include "client/internal/server_link.h"
#include "common/cluster/refusal.h"
#include "proto/kv_cluster.pb.h"

namespace kvstore {
namespace client {

inline constexpr absl::Duration kFirstBackoff = absl::Milliseconds(20);
inline constexpr absl::Duration kMaxBackoff = absl::Milliseconds(500);
// kTryAgain: a slot's handoff takes one barrier and one RPC, milliseconds.
inline constexpr absl::Duration kFirstTryAgainBackoff = absl::Milliseconds(5);
inline constexpr absl::Duration kMaxTryAgainBackoff = absl::Milliseconds(100);

// One operation's retry budget: attempts, the deadline and the backoff.

class RetryBudget {
 public:
  RetryBudget(int max_attempts, absl::Time deadline)
      : max_attempts_(std::max(1, max_attempts)), deadline_(deadline) {}
  absl::Time deadline() const { return deadline_; }
  int attempts() const { return attempts_; }
  // Counts an attempt about to start.
  void Begin() { ++attempts_; }
  // Whether another attempt may start.
  bool More() const { return attempts_ < max_attempts_ && absl::Now() < deadline_; }
  // The deadline of one attempt: `per_attempt` from now (zero: no bound of
  // its own), never past the operation's.
  // At most half the operation's time, so that one stuck attempt leaves
  // time for another on a refreshed map.
  absl::Time AttemptDeadline(absl::Duration per_attempt) const {
    if (per_attempt <= absl::ZeroDuration()) return deadline_;
    const absl::Duration half = (deadline_ - start_) / 2;
    return std::min(deadline_, absl::Now() + std::min(per_attempt, half));
  }
  // Sleeps the current backoff (never past the deadline) and doubles it.
  void Sleep() {
    absl::SleepFor(std::min(backoff_, deadline_ - absl::Now()));
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  }
  // The same for kTryAgain refusals, with a shorter backoff of its own.
  void SleepTryAgain() {
    absl::SleepFor(std::min(tryagain_backoff_, deadline_ - absl::Now()));
    tryagain_backoff_ = std::min(tryagain_backoff_ * 2, kMaxTryAgainBackoff);
  }

 private:
  const int max_attempts_;
  const absl::Time deadline_;
  const absl::Time start_ = absl::Now();
  int attempts_ = 0;
  absl::Duration backoff_ = kFirstBackoff;
  absl::Duration tryagain_backoff_ = kFirstTryAgainBackoff;
};

// Classify(), except that an attempt that ran out of its own time while
// the operation still has time left is kDown: the node stopped answering
// (frozen, or cut off), and the map may already name another primary.
inline Verdict ClassifyAttempt(const absl::Status& s, const RetryBudget& budget) {
  if (absl::IsDeadlineExceeded(s) && absl::Now() < budget.deadline()) return Verdict::kDown;
  return Classify(s);
}

// Whether a write whose attempt failed with `s` certainly had no effect, so
// that it may be sent again: it never left this client (`sent` false, or
// kNotSentPayload), or the node refused it with a refusal of
// cluster::Effect::kNone (a redirect, an ask, a try-again or cluster-down
// answered before anything was sent to a backup). Nothing else is: a write
// that reached a node which then failed, stopped answering or answered
// anything else may have been applied.
inline bool NoEffect(const absl::Status& s, bool sent) {
  return !sent || s.GetPayload(kNotSentPayload).has_value() || cluster::CertainlyNoEffect(s);
}

// What a write that stopped on `s` (not NoEffect) returns. A node's answer
// stands (kNotFound, kInvalidArgument, kResourceExhausted, ... and an
// outcome-unknown refusal, already kUnknown "outcome unknown: ..."); a
// connection that broke or a node that stopped answering after the write
// was sent (kUnavailable or kDeadlineExceeded without a refusal) leaves its
// outcome unknown too, and says so the same way: kUnknown "outcome unknown:
// <CODE>: <message>".
inline absl::Status WriteOutcome(const absl::Status& s) {
  if (!absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s)) return s;
  if (cluster::FromStatus(s).has_value()) return s;
  return absl::UnknownError(
      absl::StrCat("outcome unknown: ", absl::StatusCodeToString(s.code()), ": ", s.message()));
}

// What the client answers for a key whose shard has no primary in its map:
// refused, and nothing was sent.
inline absl::Status NoPrimary(uint32_t slot) {
  return cluster::ToStatus(
      cluster::Refusal::ClusterDown(slot, "not served: its shard has no primary in this map"));
}

// What one node's part of a batch came back with.
template <typename T>
struct PartResult {
  std::shared_ptr<ServerLink> link;
  bool sent = false;  // a link was found and the part handed to it
  absl::StatusOr<T> value = absl::UnknownError("not attempted");
};

// The last error, saying that the client gave up and why it stopped; its
// payloads (a refusal) kept.
inline absl::Status GaveUp(const absl::Status& s, const RetryBudget& budget, uint64_t epoch) {
  absl::Status out(s.code(),
                   absl::StrCat(s.message(), " (cluster client gave up after ", budget.attempts(),
                                " attempt(s); map epoch ", epoch, ")"));
  s.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& value) { out.SetPayload(url, value); });
  return out;
}

// The failure that decides what to do after an attempt of a batch: the
// worst verdict (kDown over kRedirect), its status, and where it came from.
struct BatchFailure {
  Verdict verdict = Verdict::kFinal;
  absl::Status status;
  const v1::ClusterNode* node = nullptr;
  std::shared_ptr<ServerLink> link;

  void Note(Verdict v, const absl::Status& s, const v1::ClusterNode* n,
            const std::shared_ptr<ServerLink>& l) {
    if (v == Verdict::kFinal || (verdict == Verdict::kDown && v != Verdict::kDown)) return;
    verdict = v;
    status = s;
    node = n;
    link = l;
  }
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CLUSTER_RETRY_BUDGET_H_
