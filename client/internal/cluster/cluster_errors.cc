// Copyright 2026 The kvstore Authors.

#include "client/internal/cluster/cluster_errors.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/control/control_client.h"

namespace kvstore {
namespace client {
namespace {

// The message with a leading code word of KvStore's RESP mapping removed
// ("PRECONDITION MOVED 12 h:p" -> "MOVED 12 h:p"). TRYAGAIN is such a word
// (kUnavailable) only in front of another cluster word; on its own it is
// the migration's answer.
absl::string_view Body(const absl::Status& s) {
  absl::string_view m = s.message();
  for (absl::string_view word : {"PRECONDITION ", "UNKNOWN "}) {
    if (absl::StartsWith(m, word)) m.remove_prefix(word.size());
  }
  if (absl::StartsWith(m, "TRYAGAIN ")) {
    const absl::string_view rest = m.substr(9);
    for (absl::string_view word : {"MOVED ", "ASK ", "CLUSTERDOWN"}) {
      if (absl::StartsWith(rest, word)) return rest;
    }
  }
  return m;
}

// TRYAGAIN in any of its shapes (see the header): the word itself (gRPC,
// a hook refusal passed on as text), or what the TCP path leaves of
// "-TRYAGAIN Hash slot ..." once it turned the word into kUnavailable.
bool IsTryAgain(const absl::Status& s, absl::string_view body) {
  if (absl::StartsWith(body, "TRYAGAIN")) return true;
  return s.code() == absl::StatusCode::kUnavailable &&
         absl::StartsWithIgnoreCase(body, "hash slot ");
}

}  // namespace

Verdict Classify(const absl::Status& status) {
  if (status.ok()) return Verdict::kFinal;
  const absl::string_view body = Body(status);
  if (absl::StartsWith(body, "ASK ")) return Verdict::kAsk;
  if (absl::StartsWith(body, "MOVED ")) return Verdict::kRedirect;
  if (absl::StartsWith(body, "CLUSTERDOWN")) return Verdict::kDown;
  if (IsTryAgain(status, body)) return Verdict::kTryAgain;
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
  if (Classify(status) != Verdict::kAsk) return std::nullopt;
  // "ASK <slot> <host:port>"; the address may be missing.
  const std::vector<absl::string_view> words =
      absl::StrSplit(Body(status), ' ', absl::SkipWhitespace());
  AskTarget target;
  if (words.size() < 2 || !absl::SimpleAtoi(words[1], &target.slot)) return std::nullopt;
  if (words.size() >= 3) target.address = std::string(words[2]);
  return target;
}

}  // namespace client
}  // namespace kvstore
