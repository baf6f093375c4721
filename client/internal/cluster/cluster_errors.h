// Copyright 2026 The kvstore Authors.
//
// How the cluster client reads a failed attempt: which answers mean "your
// map is stale" (refresh, then retry), which mean "the shard or node is not
// serving right now" (refresh, back off, retry), and which are final.
//
// The servers' words (server/storage/write_hook.h, architecture §19):
//   MOVED <slot> <host:port>  not this node's slot. Over RESP the word comes
//                             literally, as Redis sends it (the TCP path then
//                             reports kUnknown with the whole text), or as
//                             kFailedPrecondition "MOVED ..." over gRPC and
//                             through KvStore's codes ("PRECONDITION MOVED").
//   ASK <slot> <host:port>    during a slot migration; treated as MOVED.
//   CLUSTERDOWN ...           no primary for the slot, or the node is fenced
//                             (kUnavailable, or kUnknown over RESP).
//   kFailedPrecondition       from the RDMA path: the server's fence word
//                             names another map epoch; from a server: a
//                             stale shard epoch.
//
// Thread safety: pure functions.

#ifndef KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ERRORS_H_
#define KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ERRORS_H_

#include "absl/status/status.h"

namespace kvstore {
namespace client {

enum class Verdict {
  kFinal,     // the answer stands (success, kNotFound, bad argument, ...)
  kRedirect,  // routed by a stale map: refresh, then retry at once
  kDown,      // CLUSTERDOWN, or the node is unreachable or fenced: refresh,
              // back off, retry
};

// The verdict on one attempt's status. kDeadlineExceeded is final: the
// operation's time (Options::op_timeout) is spent. kUnauthenticated is
// final. A failed precondition about a session (IsSessionLost) is left to
// ServerLink and final here.
Verdict Classify(const absl::Status& status);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ERRORS_H_
