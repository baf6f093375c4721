// Copyright 2026 The kvstore Authors.

#include "client/internal/cluster/pair_outcomes.h"

#include "absl/strings/str_cat.h"
#include "client/internal/cluster/retry_budget.h"

namespace kvstore {
namespace client {

PairOutcomes::PairOutcomes(absl::Span<const std::pair<std::string, std::string>> pairs)
    : pairs_(pairs), out_(pairs.size(), absl::UnknownError("not attempted")) {}

PairOutcomes::Next PairOutcomes::Record(size_t i, absl::Status s, bool sent, Verdict v) {
  const absl::string_view key = pairs_[i].first;
  if (s.ok()) {
    out_[i] = std::move(s);
    return Next::kDone;
  }
  if (!NoEffect(s, sent)) {
    // It may have been stored: never sent again.
    out_[i] = WriteOutcome(s);
    if (absl::IsUnknown(out_[i])) unknown_keys_.insert(key);
    return Next::kDone;
  }
  out_[i] = std::move(s);
  if (v == Verdict::kFinal) return Next::kDone;
  if (v == Verdict::kAsk || v == Verdict::kTryAgain || single_keys_.contains(key)) {
    single_keys_.insert(key);
    return Next::kSingle;
  }
  return Next::kAgain;
}

bool PairOutcomes::MaySend(size_t i) {
  if (!unknown_keys_.contains(pairs_[i].first)) return true;
  out_[i] = absl::UnknownError(absl::StrCat(
      "outcome unknown: not sent, since an earlier pair of this key has an unknown outcome and "
      "could land after it (last refusal: ",
      out_[i].message(), ")"));
  return false;
}

void PairOutcomes::Set(size_t i, absl::Status s) {
  if (absl::IsUnknown(s)) unknown_keys_.insert(pairs_[i].first);
  out_[i] = std::move(s);
}

}  // namespace client
}  // namespace kvstore
