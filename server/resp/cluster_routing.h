// Copyright 2026 The kvstore Authors.
//
// Cluster routing of the RESP port's keyed commands, as Redis Cluster
// answers them (docs/protocol.md "RESP in cluster mode"). Every keyed
// command asks here before it touches the store; so does the streamed SET,
// before a byte of its value is received. With no ClusterState (single-node
// mode) every key is served and nothing here changes a reply.
//
// Replies, in Redis's order of checks: CROSSSLOT for keys of several slots
// not all served here; otherwise the route's refusal (RouteRefusal in
// server/routing/cluster_state.h: kClusterDown with no map, fenced, or no
// primary for the slot; kMoved naming the primary's RESP address; kTryAgain
// / kAsk during a slot's handoff), which the RESP encoder writes in Redis
// Cluster's words (common/cluster/refusal.h). A read on a connection that
// sent READONLY is also served by an in-sync backup of the slot's shard;
// writes always need the primary.
//
// The store's write hook (server/storage/write_hook.h) can still refuse a
// write that passed routing (a new map arrived in between), or end it with
// an outcome-unknown refusal; ReplyStoreStatus answers those the same way,
// naming the RESP address of a redirect's node.
//
// Thread safety: stateless; ClusterState is thread-safe.

#ifndef KVSTORE_SERVER_RESP_CLUSTER_ROUTING_H_
#define KVSTORE_SERVER_RESP_CLUSTER_ROUTING_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/resp/connection.h"
#include "server/routing/cluster_state.h"

namespace kvstore {
namespace server {
namespace resp_internal {

inline constexpr absl::string_view kCrossSlotError =
    "CROSSSLOT Keys in request don't hash to the same slot";

// Whether this node serves `key` for a read (`write` false; an in-sync
// backup serves it too after READONLY on `conn`) or a write. Otherwise
// queues the error
// on `conn` and returns false. Always true when `cluster` is null.
bool RouteKey(const ClusterState* cluster, Connection* conn, absl::string_view key, bool write);

// The same for the keys args[first], args[first + step], ... (DEL, MGET,
// MSET ...): CROSSSLOT when they do not share one slot.
bool RouteKeys(const ClusterState* cluster, Connection* conn,
               absl::Span<const absl::string_view> args, size_t first, size_t step, bool write);

// Whether `s` carries a cluster refusal (the write hook's; any kind or
// effect).
bool IsClusterRefusal(const absl::Status& s);

// What a command writing several keys (MSET, DEL) answers when the write
// of one key ended with `s` after earlier keys of the command were written:
// a refusal of no effect becomes one of unknown effect. The command as a
// whole did take effect, and a client resending it on a MOVED, TRYAGAIN or
// CLUSTERDOWN (as Redis Cluster clients do) would write the earlier keys a
// second time, perhaps after another client's later write of one of them.
// Anything else is returned as it is.
absl::Status AfterEarlierKeys(const absl::Status& s);

// Queues `s` as ReplyStatus does (a refusal in Redis Cluster's words),
// except that a kMoved / kAsk refusal of no effect is routed again on the
// current map, so that it names the slot's primary by its RESP address (the
// hook's own address when the map does not know the slot's primary).
// Nearly every write succeeds: the OK is queued inline, a refusal by
// ReplyStoreRefusal().
void ReplyStoreRefusal(const ClusterState* cluster, Connection* conn, const absl::Status& s);
inline void ReplyStoreStatus(const ClusterState* cluster, Connection* conn, const absl::Status& s) {
  if (s.ok()) {
    conn->ReplyOk();
  } else {
    ReplyStoreRefusal(cluster, conn, s);
  }
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_CLUSTER_ROUTING_H_
