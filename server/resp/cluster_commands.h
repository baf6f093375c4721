// Copyright 2026 The kvstore Authors.
//
// The Redis Cluster commands of the RESP port, answered from the node's
// ClusterState (RespServerOptions::cluster) in the shapes Redis 7 gives
// them, so redis-cli -c and cluster-aware client libraries work unchanged
// (docs/protocol.md "RESP in cluster mode"):
//   CLUSTER KEYSLOT key     the key's hash slot (integer)
//   CLUSTER SLOTS           [start, end, primary, backups...] per slot range,
//                           each node [host, port, id, []]
//   CLUSTER SHARDS          per shard: slots [start, end, ...] and nodes, each
//                           a map id/port/ip/endpoint/role/replication-offset/
//                           health ("loading" for a syncing replica)
//   CLUSTER NODES           one line per node of the map:
//                           <id> <host:port@cport> <flags> <master|-> 0 0
//                           <config-epoch> connected <slot ranges>
//                           (cport is the node's gRPC control port);
//                           during a slot migration (COPYING/HANDOFF) the
//                           source primary's line ends in
//                           [<slot>->-<target primary id>] and the target
//                           primary's in [<slot>-<-<source primary id>],
//                           <slot> being the first slot of the migrating
//                           range only (redis-cli reads one slot per entry;
//                           one entry per slot would be thousands)
//   CLUSTER INFO            cluster_state, cluster_slots_*, cluster_known_nodes,
//                           cluster_size, cluster_current_epoch, cluster_my_epoch
//   CLUSTER MYID            this node's 40-hex id
//   READONLY / READWRITE    let reads on this connection be served by a backup
//   ASKING                  +OK: accepted and not needed (a migration's target
//                           serves the slot once it accepted the handoff,
//                           with or without ASKING; architecture §19.9)
//   WAIT numreplicas timeout  the in-sync backups of the shard this node
//                           leads, at once (replication is synchronous)
// In single-node mode CLUSTER, READONLY, READWRITE and ASKING answer Redis's
// "-ERR This instance has cluster support disabled"; WAIT answers 0.
//
// Node ids: Redis ids are 40 hex digits; RedisNodeId() derives one from the
// kvstore node id, stable across restarts and equal on every node.
//
// A kvstore node may lead one shard and back others, which Redis cannot
// express per node: CLUSTER NODES shows a node that leads a shard as a
// master (with that shard's slots) and one that leads none as a replica of
// the primary of the first shard it backs. CLUSTER SLOTS and SHARDS list
// every shard's replicas exactly.
//
// Thread safety: as the command table (commands.h): on the loop's thread.

#ifndef KVSTORE_SERVER_RESP_CLUSTER_COMMANDS_H_
#define KVSTORE_SERVER_RESP_CLUSTER_COMMANDS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "server/resp/commands.h"

namespace kvstore {
namespace server {
namespace resp_internal {

inline constexpr absl::string_view kClusterDisabledError =
    "ERR This instance has cluster support disabled";

// 40 lower-case hex digits: the FNV-1a 64-bit hashes of "0:" + node_id,
// "1:" + node_id and "2:" + node_id, each as 16 hex digits, concatenated and
// cut to 40. Deterministic (no per-process seed).
std::string RedisNodeId(absl::string_view node_id);

// Rows of the command table.
void ClusterCommand(const CommandContext& ctx, CommandArgs args);
void ReadOnlyCommand(const CommandContext& ctx, CommandArgs args);
void ReadWriteCommand(const CommandContext& ctx, CommandArgs args);
void AskingCommand(const CommandContext& ctx, CommandArgs args);
void WaitCommand(const CommandContext& ctx, CommandArgs args);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_CLUSTER_COMMANDS_H_
