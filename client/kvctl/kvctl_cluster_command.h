// Copyright 2026 The kvstore Authors.
//
// `kvctl cluster SUBCOMMAND`: the cluster map as the server named by
// --server holds it (any node; clients never talk to etcd).
//
//   status    epoch, controller, each shard: slot ranges, primary, in-sync
//             backups, syncing nodes, up or DOWN (no primary); draining
//             nodes
//   nodes     one line per node: addresses, incarnation, roles
//   slots     slot ranges -> shard and primary
//   failover  --shard=N [--to=NODE]: KvCluster.Failover on that server
//             (forwarded to the controller); prints the new map as status
//   remove-node NODE: KvCluster.RemoveNode (drain NODE before stopping
//             it; forwarded to the controller); prints the new map as status
//   add-node NODE: KvCluster.AddNode (a new, empty shard led by NODE);
//             prints the new shard's id and the new map as status
//   accept-loss --shard=N [--yes]: prints what giving up DOWN shard N's
//             keys costs (every key of its slots); with --yes,
//             KvCluster.AcceptLoss (an empty primary), else exit 3
//   rebalance [--dry-run] [--wait]: KvCluster.Rebalance; prints the planned
//             migrations; --wait then polls GetClusterMap every 0.5 s,
//             printing progress on every change, until every planned
//             migration left the map (exit 3 if one was dropped, on an
//             error, or after --wait_timeout)
//
// Output: kvctl_cluster_format.h (text, or JSON with --json). Exit codes
// as for every kvctl command: 0 done; 2 usage error (unknown subcommand,
// --shard missing for failover, --shard/--to given to another
// subcommand, --dry-run/--wait given to another or together,
// remove-node/add-node without exactly one NODE, an operand given to
// another subcommand); 3 any other error, e.g. FAILED_PRECONDITION from a server
// in single-node mode or a failover the controller refuses, UNIMPLEMENTED
// from a server without the cluster service; 4 credentials refused.
//
// Thread safety: main's thread only (reads flags, writes stdout/stderr).

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_CLUSTER_COMMAND_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_CLUSTER_COMMAND_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/kvctl/kvctl_context.h"

namespace kvstore {
namespace client {
namespace kvctl {

// What `cluster` was asked to do, checked before anything is dialled.
struct ClusterRequest {
  enum class Kind {
    kStatus,
    kNodes,
    kSlots,
    kFailover,
    kRemoveNode,
    kAddNode,
    kRebalance,
    kAcceptLoss
  };
  Kind kind = Kind::kStatus;
  int shard = -1;        // failover and accept-loss only
  bool yes = false;      // accept-loss only
  std::string target;    // failover only; empty: the controller picks
  std::string node;      // remove-node and add-node only
  bool dry_run = false;  // rebalance only
  bool wait = false;     // rebalance only
};

// Parses the subcommand and its flags. `shard` is --shard (-1: not given),
// `target` --to, `given` the flags on the command line, `operands` the
// words after the subcommand. kInvalidArgument, worded for UsageError(),
// for an unknown subcommand, failover or accept-loss without --shard (or a
// negative one), --shard with another subcommand, --to with another than
// failover, --yes with another than accept-loss, --dry-run/--wait (`dry_run`,
// `wait`: their values) with another subcommand or both set,
// remove-node/add-node without exactly one NODE, or an operand given to
// another subcommand.
absl::StatusOr<ClusterRequest> ParseClusterRequest(const std::string& subcommand, int shard,
                                                   const std::string& target,
                                                   const std::set<std::string>& given,
                                                   const std::vector<std::string>& operands = {},
                                                   bool dry_run = false, bool wait = false,
                                                   bool yes = false);

// The handler (CommandFn): args[0] is the subcommand.
int RunCluster(const Context& context, const std::vector<std::string>& args);

// The text of `kvctl cluster --help`.
std::string ClusterHelpText();

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_CLUSTER_COMMAND_H_
