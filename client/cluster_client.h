// Copyright 2026 The kvstore Authors.
//
// The KvClient of cluster mode (docs/architecture.md §19): KvClient::Connect
// builds one when a seed server hands out a cluster map.
//
// Routing. Every key goes to the primary of its shard
// (ClusterMapView::ShardForKey: the Redis Cluster hash slot). With
// Options::read_from_replicas, Get/Exists/MultiGet/GetInto go to an in-sync
// backup first (round robin over the backups; the primary on a retry or when
// the shard has none); TCP connections then send READONLY, and a backup that
// still redirects the read makes the client read from the primary at once,
// without refreshing the map. MultiGet and MultiPut are split by node, the parts run
// in parallel (one thread per extra node), and the results are put back in
// the caller's order. Each node is reached through its own ServerLink,
// connected on first use with the same transport choice, connection count and
// security options as a single-node client.
//
// Refresh and retry. An attempt refused with a redirect (kMoved, a map or
// shard epoch mismatch) or kClusterDown, or failing because the node is
// unreachable (cluster_errors.h reads the typed refusals of
// common/cluster/refusal.h, never a message), makes the client refresh its
// map from any node it knows (ClusterRouter::Refresh: the highest epoch
// wins, never an older one) and try again, at most
// Options::cluster_max_attempts times in all and within Options::op_timeout.
// Between attempts that found no newer map it backs off, 20 ms doubling to
// 500 ms. When it gives up, the last error is returned with its code (and
// refusal), the message saying how many attempts were made and by which
// map epoch.
//
// Slot migration (§19.9). A kAsk refusal sends that one request to the node
// it names — found in the map by its node id (gRPC, RDMA) or its control or
// RESP address, else the target primary of the slot's migration; when the
// map knows neither, the map is refreshed and the key routed again —
// without changing or refreshing the map; it counts as an attempt. A
// kTryAgain refusal (the handoff is under way) is retried at the same node
// after a short backoff (5 ms doubling to 100 ms), also counting as an
// attempt. Reads of a slot in HANDOFF are never one-sided RDMA READs: they
// go through the server's CPU (SlowReadPath, gRPC Get), because the target
// may already accept writes the source's index does not have; COPYING slots
// are READ at the source as ever. MultiGet reads the keys of HANDOFF slots,
// and the keys refused kAsk or kTryAgain, one by one after the rest of the
// batch; MultiPut stores the pairs refused kAsk or kTryAgain (and any later
// pair of the same key) one by one, in the caller's order. Each such key
// has a retry loop (and op_timeout) of its own.
//
// What is retried. Get, Exists and MultiGet are retried after any of the
// failures above. Writes (Put, PutFrom, MultiPut, Delete) are sent again
// only when they certainly had no effect: they never left this client, or
// the node refused them with a refusal of cluster::Effect::kNone (a
// redirect, ask, try-again or cluster-down answered before anything was
// sent to a backup). Any other failure after the write was sent leaves its
// outcome unknown, and the write returns kUnknown with a message starting
// "outcome unknown: ": the cluster answered so (a backup or migration
// target may hold the write although its primary could not publish it: it
// was fenced meanwhile, could not drop a failed backup, or its migration
// target failed), or the connection broke or the node stopped answering
// after the request was sent (the message then names UNAVAILABLE or
// DEADLINE_EXCEEDED). Such a write may or may not have been applied, and
// may still appear later (after a failover). Sending it again is not safe:
// the first attempt may have been applied, read by others and overwritten
// by a later write, and the retry would bring the older value back (the
// compose VM test's history check caught exactly that during a paused
// primary's failover). A delete retried that way could also report
// kNotFound for a delete that succeeded. Most failover errors are refusals
// of no effect (the old primary is gone from the map, or fenced and
// refusing kClusterDown), so only the writes in flight at the fault see
// the error. A node's answer (kNotFound, kInvalidArgument,
// kResourceExhausted, ...) is returned as it is.
//
// MultiPut has one outcome per pair (KvClient::MultiPutEach): every node
// answers each pair of its part on its own, and the rule above applies per
// pair. Only pairs certainly not stored are sent again; a pair stored is
// never sent twice (a part refused in its middle, e.g. TRYAGAIN for one
// key as its slot's handoff begins, resends only the refused pairs: the
// whole part again would rewrite stored pairs, perhaps after other
// clients' later writes of those keys); a pair of unknown outcome ends
// kUnknown, and so does a later pair of the same key not yet stored.
//
// Scan pages through the nodes that are primaries in the current map, in
// node-id order. Its cursor packs both positions: the top 16 bits are the
// index of the node in that order, the low 48 bits that node's own cursor
// (0 to begin, and 0 again once the whole cluster was listed). Each node's
// page is filtered to the keys of shards it leads (a node also holds copies
// of shards it backs), so a page may hold fewer than `count` keys, even none,
// while the listing goes on. A map change between two pages may skip or
// repeat keys, as Redis SCAN does; Scan is not retried. Stats() reports the
// first node of the map that answers, its info gaining "cluster_node" (the
// node id).
//
// Metrics: the single-node series, counted per node's transport, plus
// kvstore_client_cluster_{map_refreshes,redirects,retries,asks,tryagains}_total
// and the
// kvstore_client_cluster_map_epoch gauge (client_metrics.h).
//
// Thread safety: thread-safe, as KvClient.

#ifndef KVSTORE_CLIENT_CLUSTER_CLIENT_H_
#define KVSTORE_CLIENT_CLUSTER_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/kv_client.h"
#include "client/options.h"

namespace kvstore {
namespace client {

// Asks the seeds (Options::servers, in order) for the cluster map and, if one
// hands it out, returns a connected cluster client (the first reachable node
// of the map has been handshaken, so max_value_bytes() is known). When a
// seed answers as a single-node server (IsSingleNodeAnswer) the error is that
// answer and `*single_node_seed` names the seed, so the caller can connect to
// it as before. Other errors: the last seed's (kUnavailable when no seed
// could be reached), kInvalidArgument for an invalid map, or the handshake
// error of the map's nodes when none could be connected.
absl::StatusOr<std::unique_ptr<KvClient>> ConnectCluster(const Options& options,
                                                         std::string* single_node_seed);

// The 64-bit Scan cursor of the cluster client: node index in the top 16
// bits, that node's cursor in the low 48 (see the file comment).
inline constexpr int kScanNodeShift = 48;
inline constexpr uint64_t kScanNodeCursorMask = (uint64_t{1} << kScanNodeShift) - 1;

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_CLUSTER_CLIENT_H_
