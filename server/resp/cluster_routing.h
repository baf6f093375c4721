// Copyright 2026 The kvstore Authors.
//
// Cluster routing of the RESP port's keyed commands, as Redis Cluster
// answers them (docs/protocol.md "RESP in cluster mode"). Every keyed
// command asks here before it touches the store; so does the streamed SET,
// before a byte of its value is received. With no ClusterState (single-node
// mode) every key is served and nothing here changes a reply.
//
// Replies, in Redis's words and in Redis's order of checks:
//   CROSSSLOT Keys in request don't hash to the same slot
//   CLUSTERDOWN The cluster is down      (no map, fenced, or the slot's
//                                         shard has no primary)
//   MOVED <slot> <host>:<resp port>      (another node is the primary)
// A read on a connection that sent READONLY is also served by an in-sync
// backup of the slot's shard; writes always need the primary.
//
// The store's write hook (server/storage/write_hook.h) can still refuse a
// write that passed routing (a new map arrived in between); ReplyStoreStatus
// turns its kFailedPrecondition "MOVED|ASK <slot> ..." and kUnavailable
// "CLUSTERDOWN|TRYAGAIN ..." into the same replies, naming the RESP address.
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
inline constexpr absl::string_view kClusterDownError = "CLUSTERDOWN The cluster is down";

// The error text for a route this node does not serve ("MOVED ..." naming
// the primary's RESP address, or kClusterDownError); empty for kServe.
std::string RouteErrorText(const Route& route);

// Whether this node serves `key` for a read (`write` false; an in-sync
// backup serves it too after READONLY on `conn`) or a write. Otherwise
// queues the error
// on `conn` and returns false. Always true when `cluster` is null.
bool RouteKey(const ClusterState* cluster, Connection* conn, absl::string_view key, bool write);

// The same for the keys args[first], args[first + step], ... (DEL, MGET,
// MSET ...): CROSSSLOT when they do not share one slot.
bool RouteKeys(const ClusterState* cluster, Connection* conn,
               absl::Span<const absl::string_view> args, size_t first, size_t step, bool write);

// Whether `s` is the write hook's cluster refusal (MOVED / ASK / CLUSTERDOWN /
// TRYAGAIN).
bool IsClusterRefusal(const absl::Status& s);

// Queues `s` as ReplyStatus does, except that a cluster refusal is answered
// as Redis Cluster words it: "-MOVED <slot> <primary's RESP address>" (the
// address from the current map; the hook's own address when the map does
// not know the slot's primary) or "-CLUSTERDOWN ...".
void ReplyStoreStatus(const ClusterState* cluster, Connection* conn, const absl::Status& s);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_CLUSTER_ROUTING_H_
