// Copyright 2026 The kvstore Authors.
//
// PairOutcomes: the outcome of each pair of one cluster MultiPut, and the
// rule for which pairs may be sent again (cluster_client.h, kv_client.h).
//
// A pair is sent again only when it certainly was not stored: it never left
// the client, or its node refused it with a refusal of no effect
// (NoEffect, retry_budget.h). A pair already stored is never written twice:
// a second write could land after another client's later write of the same
// key and undo it. A pair that may have been stored ends with its error
// (kUnknown "outcome unknown: ..." for a transport failure after it was
// sent). Order per key is kept: a pair is not sent again once an earlier
// pair of its key has an unknown outcome (the earlier one could still land
// after it; it ends kUnknown too), and once an earlier pair of its key was
// put aside to be stored alone (kAsk, kTryAgain), later pairs of that key
// go with it, after it.
//
// Thread safety: none; one MultiPut's thread owns it.

#ifndef KVSTORE_CLIENT_INTERNAL_CLUSTER_PAIR_OUTCOMES_H_
#define KVSTORE_CLIENT_INTERNAL_CLUSTER_PAIR_OUTCOMES_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/internal/cluster/cluster_errors.h"

namespace kvstore {
namespace client {

class PairOutcomes {
 public:
  // What becomes of a pair after an attempt.
  enum class Next {
    kDone,    // its status stands (stored, answered, or of unknown outcome)
    kAgain,   // certainly not stored and worth another batch attempt
    kSingle,  // certainly not stored; to be stored alone after the batch
  };

  // `pairs` must outlive this object. Every status starts as "not attempted".
  explicit PairOutcomes(absl::Span<const std::pair<std::string, std::string>> pairs);

  // Records pair `i`'s status `s` from an attempt whose verdict is `v`
  // (ClassifyAttempt); `sent`: the pair was handed to a node's link.
  // Records must come in the caller's order for each key.
  Next Record(size_t i, absl::Status s, bool sent, Verdict v);
  // Whether pair `i`, certainly not stored, may be sent again; when an
  // earlier pair of its key has an unknown outcome it may not, and its
  // status becomes kUnknown.
  bool MaySend(size_t i);
  // Sets pair `i`'s final status (a pair stored alone, or given up on).
  void Set(size_t i, absl::Status s);

  const absl::Status& status(size_t i) const { return out_[i]; }
  std::vector<absl::Status> Take() && { return std::move(out_); }

 private:
  absl::Span<const std::pair<std::string, std::string>> pairs_;
  std::vector<absl::Status> out_;
  absl::flat_hash_set<absl::string_view> unknown_keys_;
  absl::flat_hash_set<absl::string_view> single_keys_;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CLUSTER_PAIR_OUTCOMES_H_
