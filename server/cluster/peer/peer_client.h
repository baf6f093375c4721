// Copyright 2026 The kvstore Authors.
//
// PeerClient: the one client a kvserver has of other kvservers' KvCluster
// service (proto/kv_cluster.proto) — the server twin of the client
// library's ControlClient. Every server-to-server call goes through it:
// Replicate and ImportWrite (the replicator), SyncShard and ReportInSync
// (the replica installer), BeginImport, ImportEntries and AcceptHandoff
// (the migration driver), ReplicaStatus (the controller), and the admin
// requests forwarded to the elected controller (ControllerProxy).
//
// It owns, in one place:
//   * channels: one per peer node id, kept while the node's control
//     address and incarnation stay the same and made anew when either
//     changes (a restarted node may come back elsewhere); no message size
//     limit (an entry, or a SyncShard chunk holding one large entry, may
//     exceed gRPC's 4 MiB default: the limits are the store's);
//   * credentials: PeerClientOptions::credentials, insecure when null. A
//     node with --tls_cert passes TLS credentials (KvServer::PeerCredentials:
//     the cluster CA verifies the peer, the node's own certificate is its
//     client certificate);
//   * the cluster secret, as the bearer token of every call (never the
//     data token: clients do not hold the peer credential); the admin
//     forwards carry the operator's credential instead;
//   * deadlines: every call takes one; DefaultDeadline() is the one of
//     calls whose caller has no bound of its own (PeerClientOptions::
//     rpc_timeout);
//   * errors: the peer's status as an absl::Status with its payloads (a
//     typed refusal, common/cluster/refusal.h, arrives as the peer made it:
//     common/grpc_status.h), the message prefixed with the call and the
//     peer ("Replicate on n2 (10.0.0.2:7000): ..."); kDeadlineExceeded
//     past the deadline, kUnavailable when the peer cannot be reached (as
//     gRPC reports them), kCancelled once the call's PeerCallGroup was
//     cancelled.
//
// Thread safety: thread-safe; calls may run concurrently.

#ifndef KVSTORE_SERVER_CLUSTER_PEER_PEER_CLIENT_H_
#define KVSTORE_SERVER_CLUSTER_PEER_PEER_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "proto/kv_cluster.grpc.pb.h"

namespace kvstore {
namespace server {

// The metadata key an admin forward carries (PeerClient's admin calls set
// it): the node that receives such a request answers it only if it is the
// controller itself and never forwards it again, so two nodes that each
// believe the other leads (an election under way) cannot pass a request
// between them until its deadline.
inline constexpr char kAdminForwardedKey[] = "kvstore-forwarded";

// An admin request as a node received it: what it forwards to the
// controller.
struct AdminCall {
  // The operator's "authorization" metadata ("" for none), not the
  // cluster secret: a peer is not an admin, so the controller checks the
  // operator again.
  std::string authorization;
  // The operator's deadline; a forward gets no more time than it has.
  absl::Time deadline = absl::InfiniteFuture();
  // Already forwarded once (kAdminForwardedKey was set).
  bool forwarded = false;
};

struct PeerClientOptions {
  // The cluster secret (--cluster_secret_file), sent as the bearer token
  // of every peer call; every node of a cluster shares it, no client has
  // it (common/auth/credentials.h). Empty: none (tests only: a kvserver in
  // cluster mode refuses to start without one).
  std::string peer_secret;
  // Channel credentials for peers; null: insecure (plaintext gRPC).
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // The deadline of a call whose caller has no bound of its own
  // (ReportInSync, the admin forwards): DefaultDeadline().
  absl::Duration rpc_timeout = absl::Seconds(10);
};

// The calls of one caller that its shutdown cancels (the migration
// driver's, the installer's copy), so that it need not wait out their
// deadlines. Thread-safe.
class PeerCallGroup {
 public:
  PeerCallGroup() = default;
  PeerCallGroup(const PeerCallGroup&) = delete;
  PeerCallGroup& operator=(const PeerCallGroup&) = delete;

  // Cancels every call in flight in the group; every later one fails at
  // once with kCancelled.
  void CancelAll();

 private:
  friend class PeerClient;
  // false (and nothing added) once cancelled.
  bool Add(grpc::ClientContext* context);
  void Remove(grpc::ClientContext* context);

  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<grpc::ClientContext*> active_ ABSL_GUARDED_BY(mu_);
};

class PeerClient {
 public:
  explicit PeerClient(PeerClientOptions options);
  // Waits for the callbacks of asynchronous calls still in flight.
  ~PeerClient();
  PeerClient(const PeerClient&) = delete;
  PeerClient& operator=(const PeerClient&) = delete;

  // An asynchronous call in flight, counted until its last part is
  // destroyed (an implementation detail of the Start* calls).
  using InFlight = std::unique_ptr<PeerClient, void (*)(PeerClient*)>;

  // The cluster secret (PeerClientOptions::peer_secret): what the peer
  // socket's hello shows (peer_socket.h).
  const std::string& peer_secret() const { return options_.peer_secret; }
  // Whether peer calls go without TLS. Only then may peer bytes travel on
  // the peer socket, which is plaintext: a TLS cluster keeps them on TLS.
  bool plaintext() const { return options_.credentials == nullptr; }

  // Now plus PeerClientOptions::rpc_timeout.
  absl::Time DefaultDeadline() const { return absl::Now() + options_.rpc_timeout; }

  // Blocking unary calls on `node` (its control address), bounded by
  // `deadline`; with a `group`, cancelled with it. Errors: see the file
  // comment.
  absl::StatusOr<v1::ReplicaStatusResponse> ReplicaStatus(const v1::ClusterNode& node,
                                                          const v1::ReplicaStatusRequest& req,
                                                          absl::Time deadline);
  absl::StatusOr<v1::ReportInSyncResponse> ReportInSync(const v1::ClusterNode& node,
                                                        const v1::ReportInSyncRequest& req,
                                                        absl::Time deadline);
  absl::StatusOr<v1::BeginImportResponse> BeginImport(const v1::ClusterNode& node,
                                                      const v1::BeginImportRequest& req,
                                                      absl::Time deadline, PeerCallGroup* group);
  absl::StatusOr<v1::ImportEntriesResponse> ImportEntries(const v1::ClusterNode& node,
                                                          const v1::ImportEntriesRequest& req,
                                                          absl::Time deadline,
                                                          PeerCallGroup* group);
  absl::StatusOr<v1::AcceptHandoffResponse> AcceptHandoff(const v1::ClusterNode& node,
                                                          const v1::AcceptHandoffRequest& req,
                                                          absl::Time deadline,
                                                          PeerCallGroup* group);
  // A new primary's reconciliation of an in-sync backup (the calls are
  // made by ShardReconciler).
  absl::StatusOr<v1::ShardDigestResponse> ShardDigest(const v1::ClusterNode& node,
                                                      const v1::ShardDigestRequest& req,
                                                      absl::Time deadline);
  absl::StatusOr<v1::ReconcileSlotsResponse> ReconcileSlots(const v1::ClusterNode& node,
                                                            const v1::ReconcileSlotsRequest& req,
                                                            absl::Time deadline);
  // The admin requests, forwarded to the elected controller. They carry
  // `authorization`, the operator's own "authorization" metadata as this
  // node received it ("" for none), not the cluster secret: a peer is not
  // an admin, so the controller checks the operator again; and
  // kAdminForwardedKey, so that the controller does not forward them on.
  absl::StatusOr<v1::FailoverResponse> Failover(const v1::ClusterNode& node,
                                                const v1::FailoverRequest& req, absl::Time deadline,
                                                const std::string& authorization);
  absl::StatusOr<v1::RemoveNodeResponse> RemoveNode(const v1::ClusterNode& node,
                                                    const v1::RemoveNodeRequest& req,
                                                    absl::Time deadline,
                                                    const std::string& authorization);
  absl::StatusOr<v1::AddNodeResponse> AddNode(const v1::ClusterNode& node,
                                              const v1::AddNodeRequest& req, absl::Time deadline,
                                              const std::string& authorization);
  absl::StatusOr<v1::RebalanceResponse> Rebalance(const v1::ClusterNode& node,
                                                  const v1::RebalanceRequest& req,
                                                  absl::Time deadline,
                                                  const std::string& authorization);
  absl::StatusOr<v1::AcceptLossResponse> AcceptLoss(const v1::ClusterNode& node,
                                                    const v1::AcceptLossRequest& req,
                                                    absl::Time deadline,
                                                    const std::string& authorization);

  // Replicate, started without blocking (the replication stream replaced
  // it in the replicator; kept for callers that send one write alone):
  // `done` runs exactly once, on a
  // gRPC thread, with the status. `req` must stay valid until then. The
  // destructor waits for every such callback to have returned.
  using Done = std::function<void(absl::Status)>;
  void StartReplicate(const v1::ClusterNode& node, const v1::ReplicateRequest& req,
                      absl::Time deadline, Done done);
  void StartImportWrite(const v1::ClusterNode& node, const v1::ImportWriteRequest& req,
                        absl::Time deadline, Done done);

  // Binds `reactor` to a ReplicateStream call of `node` (ReplicationStream)
  // on the node's channel, `context` carrying the cluster secret and no
  // deadline (each write carries its own time left); the caller then
  // starts it (reactor->StartCall()). Returns the stub, which keeps the
  // channel: hold it until the reactor's OnDone().
  using StreamReactor = grpc::ClientBidiReactor<v1::ReplicateBatch, v1::ReplicateBatchReply>;
  std::shared_ptr<v1::KvCluster::Stub> BindReplicateStream(const v1::ClusterNode& node,
                                                           grpc::ClientContext* context,
                                                           StreamReactor* reactor);

  // The SyncShard stream of `node`: `on_chunk` runs for every chunk, in
  // order, on the caller's thread, until the stream ends. An error from
  // `on_chunk` cancels the stream and is returned; so is the group's
  // cancellation (kCancelled). Otherwise the stream's status.
  absl::Status SyncShard(const v1::ClusterNode& node, const v1::SyncShardRequest& req,
                         absl::Time deadline, PeerCallGroup* group,
                         absl::FunctionRef<absl::Status(const v1::SyncShardChunk&)> on_chunk);

 private:
  // `authorization` null: the cluster secret; else that metadata value
  // (an operator's, forwarded).
  template <typename Resp, typename Req, typename Call>
  absl::StatusOr<Resp> Unary(const char* method, const v1::ClusterNode& node, const Req& req,
                             absl::Time deadline, PeerCallGroup* group,
                             const std::string* authorization, Call call);
  // The stub for `node`, cached (see the file comment).
  std::shared_ptr<v1::KvCluster::Stub> Stub(const v1::ClusterNode& node);
  // Deadline and credential: the cluster secret, or `authorization` when
  // not null.
  void Prepare(grpc::ClientContext* context, absl::Time deadline,
               const std::string* authorization = nullptr) const;

  InFlight StartCall();

  struct Peer {
    std::string address;
    uint64_t incarnation = 0;
    std::shared_ptr<v1::KvCluster::Stub> stub;
  };
  const PeerClientOptions options_;
  const std::string bearer_;  // "Bearer <token>", or empty
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Peer> peers_ ABSL_GUARDED_BY(mu_);
  // Channels replaced in peers_ that a call in flight may still use.
  std::vector<std::shared_ptr<v1::KvCluster::Stub>> retired_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

// The status of a call `method` on `node` that failed with `status`: its
// code and payloads, the message naming the call and the peer. OK stays OK.
absl::Status PeerError(const char* method, const v1::ClusterNode& node, const absl::Status& status);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_PEER_PEER_CLIENT_H_
