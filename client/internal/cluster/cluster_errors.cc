// Copyright 2026 The kvstore Authors.

#include "client/internal/cluster/cluster_errors.h"

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "client/internal/control_client.h"

namespace kvstore {
namespace client {
namespace {

// The message with a leading code word of KvStore's RESP mapping removed
// ("PRECONDITION MOVED 12 h:p" -> "MOVED 12 h:p").
absl::string_view Body(const absl::Status& s) {
  absl::string_view m = s.message();
  for (absl::string_view word : {"PRECONDITION ", "TRYAGAIN ", "UNKNOWN "}) {
    if (absl::StartsWith(m, word)) m.remove_prefix(word.size());
  }
  return m;
}

}  // namespace

Verdict Classify(const absl::Status& status) {
  if (status.ok()) return Verdict::kFinal;
  const absl::string_view body = Body(status);
  if (absl::StartsWith(body, "MOVED ") || absl::StartsWith(body, "ASK ")) {
    return Verdict::kRedirect;
  }
  if (absl::StartsWith(body, "CLUSTERDOWN")) return Verdict::kDown;
  switch (status.code()) {
    case absl::StatusCode::kFailedPrecondition:
      // A lost session is ServerLink's business (handshake again), not the
      // map's; anything else is an epoch the server does not share.
      return IsSessionLost(status) ? Verdict::kFinal : Verdict::kRedirect;
    case absl::StatusCode::kUnavailable:
      return Verdict::kDown;
    default:
      return Verdict::kFinal;
  }
}

}  // namespace client
}  // namespace kvstore
