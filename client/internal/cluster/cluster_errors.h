// Copyright 2026 The kvstore Authors.
//
// How the cluster client reads a failed attempt: which answers mean "your
// map is stale" (refresh, then retry), which mean "the shard or node is not
// serving right now" (refresh, back off, retry), which belong to a slot
// migration (follow ASK once; retry TRYAGAIN shortly), and which are final.
//
// The servers' words (server/storage/write_hook.h, architecture §19):
//   MOVED <slot> <host:port>  not this node's slot. Over RESP the word comes
//                             literally, as Redis sends it (the TCP path then
//                             reports kUnknown with the whole text), or as
//                             kFailedPrecondition "MOVED ..." over gRPC and
//                             through KvStore's codes ("PRECONDITION MOVED").
//   ASK <slot> <host:port>    the slot is being handed to another shard
//                             (§19.9 HANDOFF): ask the named node for this
//                             one request; the map stays. The address is
//                             the RESP one over RESP, the control one over
//                             gRPC, and whatever the write hook knows over
//                             RDMA commits.
//   TRYAGAIN ...              the slot's handoff is under way: ask the same
//                             node again shortly. kUnavailable "TRYAGAIN ..."
//                             over gRPC; over RESP the TCP path turns the
//                             word TRYAGAIN into kUnavailable and keeps only
//                             the rest ("Hash slot <n> is being handed ..."),
//                             recognised by its "hash slot " start.
//   CLUSTERDOWN ...           no primary for the slot, or the node is fenced
//                             (kUnavailable, or kUnknown over RESP).
//   kFailedPrecondition       from the RDMA path: the server's fence word
//                             names another map epoch; from a server: a
//                             stale shard epoch.
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
  kDown,      // CLUSTERDOWN, or the node is unreachable or fenced: refresh,
              // back off, retry
  kAsk,       // ASK: retry this request once at the named node, no refresh
  kTryAgain,  // TRYAGAIN: back off briefly, retry the same node
};

// The verdict on one attempt's status. kDeadlineExceeded is final: the
// operation's time (Options::op_timeout) is spent. kUnauthenticated is
// final. A failed precondition about a session (IsSessionLost) is left to
// ServerLink and final here.
Verdict Classify(const absl::Status& status);

// What an ASK names.
struct AskTarget {
  uint32_t slot = 0;
  std::string address;  // "host:port"; empty if the answer named none
};

// The slot and address of an ASK answer (Classify() == kAsk), or nullopt
// for any other status or an ASK without a readable slot.
std::optional<AskTarget> ParseAsk(const absl::Status& status);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ERRORS_H_
