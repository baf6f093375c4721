// Copyright 2026 The kvstore Authors.
//
// How the cluster client reads a failed attempt: which answers mean "your
// map is stale" (refresh, then retry), which mean "the shard or node is not
// serving right now" (refresh, back off, retry), which belong to a slot
// migration (follow an ask once; retry a try-again shortly), and which are
// final.
//
// The servers' refusals are typed (common/cluster/refusal.h) and reach the
// client typed on every transport: in the status details over gRPC, in the
// commit ack over RDMA, and in Redis Cluster's words over RESP, which the
// TCP path's RESP decoder turns back into the type. Classify reads the
// type, never a message:
//   kMoved, kStaleShardEpoch   kRedirect
//   kAsk                       kAsk (the node, by id and address: ParseAsk)
//   kTryAgain                  kTryAgain
//   kClusterDown, kMapBehind,  kDown
//   kStaleServerEpoch
//   kSessionLost               kFinal here: ServerLink handshakes again
//   kNotStored                 kFinal: no effect, but a replica's pool is
//                              full; resending at once meets the same
//                              refusal (not resent automatically)
//   any outcome-unknown one    kFinal: a write that may have taken effect
//                              is not sent again (retry_budget.h)
// Statuses without a refusal go by their code: kFailedPrecondition is
// kRedirect (the RDMA path's fence check: the server's fence word names
// another map epoch), kUnavailable kDown (the node is unreachable or its
// fence words say fenced), anything else final.
//
// Thread safety: pure functions.

#ifndef KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ERRORS_H_
#define KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ERRORS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace kvstore {
namespace client {

enum class Verdict {
  kFinal,     // the answer stands (success, kNotFound, bad argument, ...)
  kRedirect,  // routed by a stale map: refresh, then retry at once
  kDown,      // the shard has no primary, or the node is unreachable or
              // fenced: refresh, back off, retry
  kAsk,       // retry this request once at the named node, no refresh
  kTryAgain,  // back off briefly, retry the same node
};

// The verdict on one attempt's status (see the table above).
// kDeadlineExceeded is final: the operation's time (Options::op_timeout)
// is spent. kUnauthenticated is final.
Verdict Classify(const absl::Status& status);

// What a kAsk refusal names.
struct AskTarget {
  uint32_t slot = 0;
  std::string node_id;  // empty over RESP, which names the address only
  std::string address;  // "host:port"; empty if the answer named none
};

// The slot and node of a kAsk refusal of no effect, or nullopt for any
// other status or an ask without a slot.
std::optional<AskTarget> ParseAsk(const absl::Status& status);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ERRORS_H_
