// Copyright 2026 The kvstore Authors.

#include "client/internal/cluster/cluster_errors.h"

#include "common/cluster/refusal.h"
#include "common/control/control_client.h"

namespace kvstore {
namespace client {
namespace {

using cluster::RefusalKind;

Verdict VerdictOf(const cluster::Refusal& r) {
  // A write that may have taken effect is not retried, and nothing else
  // is answered this way.
  if (r.effect == cluster::Effect::kUnknown) return Verdict::kFinal;
  switch (r.kind) {
    case RefusalKind::kMoved:
    case RefusalKind::kStaleShardEpoch:
      return Verdict::kRedirect;
    case RefusalKind::kAsk:
      return Verdict::kAsk;
    case RefusalKind::kTryAgain:
      return Verdict::kTryAgain;
    case RefusalKind::kClusterDown:
    case RefusalKind::kMapBehind:
    case RefusalKind::kStaleServerEpoch:
      return Verdict::kDown;
    case RefusalKind::kSessionLost:
    case RefusalKind::kNotPublished:
    case RefusalKind::kNotClustered:  // a single node: no map to follow
    // Certainly not stored, but a replica's pool is full: sending it again
    // at once would meet the same refusal. The caller decides.
    case RefusalKind::kNotStored:
      break;
  }
  return Verdict::kFinal;
}

}  // namespace

Verdict Classify(const absl::Status& status) {
  if (status.ok()) return Verdict::kFinal;
  if (std::optional<cluster::Refusal> r = cluster::FromStatus(status)) return VerdictOf(*r);
  switch (status.code()) {
    case absl::StatusCode::kFailedPrecondition:
      // A lost session is ServerLink's business (handshake again), not the
      // map's; anything else is an epoch the server does not share.
      return control::IsSessionLost(status) ? Verdict::kFinal : Verdict::kRedirect;
    case absl::StatusCode::kUnavailable:
      return Verdict::kDown;
    default:
      return Verdict::kFinal;
  }
}

std::optional<AskTarget> ParseAsk(const absl::Status& status) {
  std::optional<cluster::Refusal> r = cluster::FromStatus(status);
  if (!r.has_value() || r->kind != RefusalKind::kAsk || r->effect != cluster::Effect::kNone ||
      !r->slot.has_value()) {
    return std::nullopt;
  }
  return AskTarget{*r->slot, r->node_id, r->address};
}

}  // namespace client
}  // namespace kvstore
