// Copyright 2026 The kvstore Authors.
//
// ClusterService: kvstore.v1.KvCluster (proto/kv_cluster.proto), served on
// the control port next to KvControl.
//
//   GetClusterMap   the map of this node's ClusterState (kFailedPrecondition
//                   "single-node mode" without one; kUnavailable before the
//                   first map).
//   Replicate,      the backup's side (ReplicaInstaller).
//   ReplicaStatus,
//   ShardDigest,
//   ReconcileSlots
//   SyncShard       the primary's side of a joiner's copy: refused unless
//                   this node leads the shard and its map lists the
//                   requester as syncing (Replicator::BeginSync); then every
//                   key of the shard's slots and of the slots of migrations
//                   into it that are COPYING or HANDOFF (ReplicaSlots: a
//                   replica in sync before the flip must hold them), each
//                   copied under its stripe lock, in chunks of at most
//                   sync_chunk_bytes (a larger entry goes alone), the last
//                   chunk with done and the snapshot seq.
//   ReportInSync    Replicator::PromoteSyncing.
//   Failover        the `failover` function given at construction (the
//                   controller's; kUnimplemented when none is given).
//   RemoveNode      the `remove_node` function given at construction, the
//                   same way.
//   ImportWrite,    the target primary's side of a slot migration
//   BeginImport,    (SlotImporter; kUnimplemented without one).
//   ImportEntries,
//   AcceptHandoff
//   AddNode,        the `add_node` / `rebalance` functions, the same way
//   Rebalance       (§19.9).
//   AcceptLoss      a DOWN shard serves again, empty (operations §13.7).
//
// Every RPC first passes the Authenticator, as KvControl's do, with the
// permission common/auth/rpc_policy.cc names for it: GetClusterMap for every
// principal, the server-to-server RPCs for peers (the cluster secret) only,
// Failover / RemoveNode / AddNode / Rebalance / AcceptLoss for admins only.
// A caller without a credential fails with UNAUTHENTICATED, one without the
// permission with PERMISSION_DENIED, before its request is read.
//
// In single-node mode (no ClusterState) only GetClusterMap answers
// (kFailedPrecondition); the others fail the same way.
//
// Thread safety: thread-safe (gRPC calls it from many threads).

#ifndef KVSTORE_SERVER_CLUSTER_CLUSTER_SERVICE_H_
#define KVSTORE_SERVER_CLUSTER_CLUSTER_SERVICE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/auth/authenticator.h"
#include "common/metrics/registry.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "server/cluster/migration/slot_importer.h"
#include "server/cluster/migration/slot_scan.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/replication/replica_installer.h"
#include "server/cluster/replication/replicate_batch_view.h"
#include "server/cluster/replication/replicator.h"
#include "server/routing/cluster_state.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

struct ClusterServiceDeps {
  // Null: single-node mode (every RPC answers kFailedPrecondition). The
  // others may then be null too. None owned; all outlive the service.
  ClusterState* state = nullptr;
  KvStore* store = nullptr;
  Replicator* replicator = nullptr;
  ReplicaInstaller* installer = nullptr;
  // The target's side of slot migrations; null: those RPCs are unimplemented.
  SlotImporter* importer = nullptr;
  // Each admin function gets the request and the call as received: the
  // caller's raw "authorization" metadata and deadline (a forward to the
  // controller carries both), and whether another node forwarded it.
  template <typename Resp, typename Req>
  using AdminFn = std::function<absl::StatusOr<Resp>(const Req&, const AdminCall&)>;
  // Performs a manual failover (the controller helper's; it forwards to the
  // controller when this node is not it). Empty: kUnimplemented.
  AdminFn<v1::ClusterMap, v1::FailoverRequest> failover;
  // Drains a node (kvctl cluster remove-node), like `failover`: the
  // controller's, forwarded when this node is not it. Empty: kUnimplemented.
  AdminFn<v1::ClusterMap, v1::RemoveNodeRequest> remove_node;
  // add-node and rebalance (kvctl cluster add-node / rebalance), like
  // `failover`. Empty: kUnimplemented.
  AdminFn<v1::AddNodeResponse, v1::AddNodeRequest> add_node;
  AdminFn<v1::RebalanceResponse, v1::RebalanceRequest> rebalance;
  // accept-loss (kvctl cluster accept-loss), like `failover`.
  AdminFn<v1::AcceptLossResponse, v1::AcceptLossRequest> accept_loss;
  // Who may call what (Authenticator): peers the cluster secret, admins the
  // admin token, data clients only GetClusterMap. None: open, and no peer.
  auth::Credentials credentials;
  // Gets kvstore_grpc_auth_failures_total (shared with KvControl's) and
  // kvstore_sync_served_*; required.
  metrics::Registry* registry = nullptr;
  // Upper bound of one SyncShard chunk's entries.
  uint64_t sync_chunk_bytes = 1 << 20;
};

class ClusterService : public v1::KvCluster::Service {
 public:
  explicit ClusterService(ClusterServiceDeps deps);

  grpc::Status GetClusterMap(grpc::ServerContext* context, const v1::GetClusterMapRequest* request,
                             v1::GetClusterMapResponse* response) override;
  grpc::Status Replicate(grpc::ServerContext* context, const v1::ReplicateRequest* request,
                         v1::ReplicateResponse* response) override;
  // The replication stream (proto/kv_cluster.proto): admitted once, then
  // every write of every batch installed in order through InstallWrite(),
  // each batch answered once all its writes are done. Runs on one gRPC
  // thread for the stream's lifetime.
  grpc::Status ReplicateStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ReplicateBatchReply, v1::ReplicateBatch>* stream) override;
  // One batch of a replication stream, from the gRPC ReplicateStream or a
  // peer socket (replica_socket.h): its writes installed in order through
  // InstallWrite(). The caller is a peer, already admitted (the socket's
  // hello showed the cluster secret). REQUIRES: an installer.
  v1::ReplicateBatchReply ApplyBatch(const ReplicateBatchView& batch, absl::Time arrived);
  grpc::Status ReplicaStatus(grpc::ServerContext* context, const v1::ReplicaStatusRequest* request,
                             v1::ReplicaStatusResponse* response) override;
  grpc::Status ShardDigest(grpc::ServerContext* context, const v1::ShardDigestRequest* request,
                           v1::ShardDigestResponse* response) override;
  grpc::Status ReconcileSlots(grpc::ServerContext* context,
                              const v1::ReconcileSlotsRequest* request,
                              v1::ReconcileSlotsResponse* response) override;
  grpc::Status SyncShard(grpc::ServerContext* context, const v1::SyncShardRequest* request,
                         grpc::ServerWriter<v1::SyncShardChunk>* writer) override;
  grpc::Status ReportInSync(grpc::ServerContext* context, const v1::ReportInSyncRequest* request,
                            v1::ReportInSyncResponse* response) override;
  grpc::Status Failover(grpc::ServerContext* context, const v1::FailoverRequest* request,
                        v1::FailoverResponse* response) override;
  grpc::Status RemoveNode(grpc::ServerContext* context, const v1::RemoveNodeRequest* request,
                          v1::RemoveNodeResponse* response) override;
  grpc::Status ImportWrite(grpc::ServerContext* context, const v1::ImportWriteRequest* request,
                           v1::ImportWriteResponse* response) override;
  grpc::Status BeginImport(grpc::ServerContext* context, const v1::BeginImportRequest* request,
                           v1::BeginImportResponse* response) override;
  grpc::Status ImportEntries(grpc::ServerContext* context, const v1::ImportEntriesRequest* request,
                             v1::ImportEntriesResponse* response) override;
  grpc::Status AcceptHandoff(grpc::ServerContext* context, const v1::AcceptHandoffRequest* request,
                             v1::AcceptHandoffResponse* response) override;
  grpc::Status AddNode(grpc::ServerContext* context, const v1::AddNodeRequest* request,
                       v1::AddNodeResponse* response) override;
  grpc::Status Rebalance(grpc::ServerContext* context, const v1::RebalanceRequest* request,
                         v1::RebalanceResponse* response) override;
  grpc::Status AcceptLoss(grpc::ServerContext* context, const v1::AcceptLossRequest* request,
                          v1::AcceptLossResponse* response) override;

 protected:
  // One replicated write, from Replicate, ReplicateStream or a peer socket:
  // the installer's answer (ReplicaInstaller::Replicate). REQUIRES: the
  // call was admitted (so the installer is there). Virtual for tests that
  // inject faults.
  virtual absl::Status InstallWrite(const ReplicateWrite& write, absl::Time deadline);

 private:
  // Authenticates and authorizes the caller of `method` (the KvCluster
  // method's name), then checks that there is a cluster.
  absl::Status Admit(const grpc::ServerContext* context, absl::string_view method) const;
  // Admit(), then that the component the RPC needs is there
  // (kUnimplemented `missing` when `needed` is null).
  absl::Status Admit(const grpc::ServerContext* context, absl::string_view method,
                     const void* needed, const char* missing) const;
  // Admit(), then `wired` (whether the admin function was given).
  absl::Status AdmitAdmin(const grpc::ServerContext* context, absl::string_view method,
                          absl::Status wired) const;
  absl::Status StreamShard(grpc::ServerContext* context, const SlotSet& slots,
                           uint64_t snapshot_seq, grpc::ServerWriter<v1::SyncShardChunk>* writer);

  const ClusterServiceDeps deps_;
  const auth::Authenticator auth_;
  metrics::Counter* sync_entries_;
  metrics::Counter* sync_bytes_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_CLUSTER_SERVICE_H_
