// Copyright 2026 The kvstore Authors.
//
// ClusterRpc: the client's side of the KvCluster service (proto/
// kv_cluster.proto), limited to what clients and kvctl call: GetClusterMap,
// and the controller requests Failover, RemoveNode, AddNode, Rebalance,
// AcceptLoss. The only client code that
// calls the KvCluster stub. Like ControlClient, every call gets a fresh context with the caller's
// absolute deadline and, with a token, the bearer metadata, and every grpc::Status is converted
// with FromGrpcStatus, so callers see the server's codes:
//   kFailedPrecondition  single-node mode ("single-node mode"), or a
//                        failover the controller refuses
//   kUnimplemented       a server built before the cluster existed
//   kUnavailable         unreachable, fenced, or no map yet
//   kUnauthenticated     the token was refused
//
// Thread safety: thread-safe; calls may run concurrently.

#ifndef KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_RPC_H_
#define KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_RPC_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/kv_cluster.grpc.pb.h"

namespace kvstore {
namespace client {

class ClusterRpc {
 public:
  // Calls go over `channel` (ControlClient::DialChannel), carrying
  // `auth_token` as a bearer token unless it is empty.
  ClusterRpc(std::shared_ptr<grpc::Channel> channel, const std::string& auth_token);
  ClusterRpc(const ClusterRpc&) = delete;
  ClusterRpc& operator=(const ClusterRpc&) = delete;

  // The map the server holds, and its node id. `known_epoch` is the epoch
  // the caller holds (informational).
  absl::StatusOr<v1::GetClusterMapResponse> GetClusterMap(uint64_t known_epoch,
                                                          absl::Time deadline);

  // Asks for a manual failover of `shard_id` to `target_node` (empty: the
  // in-sync backup with the newest data); the server forwards it to the
  // controller. Returns the map that the failover wrote.
  absl::StatusOr<v1::ClusterMap> Failover(uint32_t shard_id, const std::string& target_node,
                                          absl::Time deadline);

  // Asks to drain `node_id` (kvctl cluster remove-node); the server
  // forwards it to the controller. Returns the map that the removal wrote.
  absl::StatusOr<v1::ClusterMap> RemoveNode(const std::string& node_id, absl::Time deadline);

  // Asks to give the registered member `node_id` a new, empty shard
  // (kvctl cluster add-node); forwarded to the controller. Returns the map
  // written and the new shard's id.
  absl::StatusOr<v1::AddNodeResponse> AddNode(const std::string& node_id, absl::Time deadline);

  // Asks the controller to plan (and, unless `dry_run`, queue) the slot
  // migrations that even out the shards (kvctl cluster rebalance).
  absl::StatusOr<v1::RebalanceResponse> Rebalance(bool dry_run, absl::Time deadline);

  // Asks the controller to give DOWN shard `shard_id` an empty primary
  // (kvctl cluster accept-loss): its keys are given up.
  absl::StatusOr<v1::AcceptLossResponse> AcceptLoss(uint32_t shard_id, absl::Time deadline);

 private:
  std::unique_ptr<grpc::ClientContext> NewContext(absl::Time deadline) const;

  const std::unique_ptr<v1::KvCluster::Stub> stub_;
  const std::string bearer_;  // "Bearer <token>" or empty
};

// True for the answers of a server that is not part of a cluster: the typed
// refusal kNotClustered (common/cluster/refusal.h), or kUnimplemented (a
// server without the KvCluster service). Such a server is used as before the
// cluster existed.
bool IsSingleNodeAnswer(const absl::Status& status);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_RPC_H_
