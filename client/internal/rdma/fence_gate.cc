// Copyright 2026 The kvstore Authors.

#include "client/internal/rdma/fence_gate.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kvstore {
namespace client {

namespace {

constexpr char kRefusals[] = "kvstore_client_fence_refusals_total";
constexpr char kHelp[] =
    "One-sided reads refused because the server's fence words said fenced, lease lapsed or "
    "another cluster map epoch.";

}  // namespace

FenceGate::FenceGate(metrics::Registry* registry)
    : fenced_(registry->AddCounter(kRefusals, kHelp, {{"reason", "fenced"}})),
      lease_lapsed_(registry->AddCounter(kRefusals, kHelp, {{"reason", "lease_lapsed"}})),
      map_epoch_mismatch_(registry->AddCounter(kRefusals, kHelp, {{"reason", "map_epoch"}})) {}

absl::Status FenceGate::Admit(const fence::FenceWords& words, int64_t now_unix_ms) {
  absl::Status s = fence::Check(words, map_epoch(), now_unix_ms);
  if (s.ok()) return s;
  // fence::Check says kUnavailable for both a fenced server and a lapsed
  // lease; the words tell them apart.
  if (absl::IsFailedPrecondition(s)) {
    map_epoch_mismatch_->Increment();
  } else if (words.valid_until_ms == 0) {
    fenced_->Increment();
  } else {
    lease_lapsed_->Increment();
  }
  return s;
}

absl::Status FenceGate::Admit(const fence::FenceWords& words) {
  return Admit(words, absl::ToUnixMillis(absl::Now()));
}

}  // namespace client
}  // namespace kvstore
