// Copyright 2026 The kvstore Authors.
//
// KvControlServiceImpl: the gRPC control plane (proto/kv_control.proto).
//
// Clients come here to handshake (epoch, limits, index geometry, regions and
// their read keys, data endpoints), to obtain, renew and release write
// leases, and as the slow path for Get/Put/Delete/Scan when the data path
// cannot serve them. Stats reports the store's, the lease table's and the
// service's own counters. It is never on the per-operation fast path.
//
// Every absl::Status is mapped to a grpc::Status with ToGrpcStatus(), so the
// codes are the ones documented on KvStore and LeaseTable. Lease RPCs that
// name an epoch other than the server's fail with UNAVAILABLE: the client's
// handshake (rkeys, lease ids) belongs to an earlier server start.
//
// Security (docs/security.md): every RPC first passes the Authenticator
// (bearer token, when the server has one). Handshake opens a session
// (SessionTable); ConnectQp, DisconnectQp and the lease RPCs must name a live
// one, may only use that session's own RDMA connections, and are bounded by
// its quotas. A lease needs a connection: GrantLease with connection_id 0 is
// refused (a lease without a write key was renewable by anyone, forever).
// A sweeper thread expires idle sessions and disconnects their queue pairs,
// which ends their leases.
//
// Leases: the service holds no lease state. GrantLease asks LeaseTable for a
// lease and, with a connection_id, has RdmaService::BindLease() make its
// write key inside LeaseTable::Grant(); RenewLease/ReleaseLease pass the
// caller's connection_id to the LeaseTable, which checks it against the
// key's holder (docs/protocol.md §1.2).
//
// Threads: gRPC's sync server calls every RPC but Put from many threads.
// Put is a callback RPC (control_service_put.cc): its handler never waits
// for a replication round, which would hold one of a pool's threads per
// write in flight; the round's end answers it, and what must block (a
// commit StartCommit declines, a wait for pool space) runs on the service's
// own workers. Thread-safe.

#ifndef KVSTORE_SERVER_CONTROL_CONTROL_SERVICE_H_
#define KVSTORE_SERVER_CONTROL_CONTROL_SERVICE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/auth/authenticator.h"
#include "common/metrics/registry.h"
#include "common/sync/worker_pool.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "proto/kv_control.grpc.pb.h"
#include "proto/kv_control.pb.h"
#include "server/control/session_table.h"
#include "server/metrics/request_metrics.h"
#include "server/rdma/rdma_service.h"
#include "server/routing/cluster_state.h"
#include "server/storage/kv_store.h"
#include "server/storage/lease_table.h"
#include "server/storage/memory_pool.h"

namespace kvstore {
namespace server {

// What the service serves. The pointers are not owned and must outlive the
// service; none may be null.
struct ControlServiceDeps {
  KvStore* store = nullptr;
  LeaseTable* leases = nullptr;
  MemoryPool* pool = nullptr;
  // This server start's epoch (HandshakeResponse.epoch, checked on leases).
  uint64_t epoch = 0;
  // The RESP2 data port, "host:port"; empty when there is none.
  std::string resp_address;
  // resp_address speaks TLS.
  bool resp_tls = false;
  // RDMA device name; empty when the server serves no RDMA.
  std::string rdma_device;
  // The RDMA data path (queue pairs, lease write keys); null without RDMA.
  RdmaService* rdma = nullptr;
  // The server's registry: the service registers kvstore_grpc_* and the grpc
  // request series in it, and Stats.counters is its flat snapshot. Null: a
  // private registry (tests that only need the RPCs).
  metrics::Registry* registry = nullptr;
  // Static key/value facts for Stats.info (build, flags ...).
  std::map<std::string, std::string> info;
  // Who may call what (common/auth/credentials.h): the data token, the
  // admin token, the users, the cluster secret. None: open (Authenticator).
  auth::Credentials credentials;
  // Most index buckets one Scan call visits (RESP SCAN's budget, kvserver
  // --resp_scan_max_buckets): a sparse index costs a page of bounded work
  // and a cursor, never a walk of the whole index. 0: no bound (tests).
  uint64_t scan_max_buckets = 0;
  // Session TTL, cap and per-session quotas.
  SessionOptions sessions;
  // How often the sweeper expires sessions; zero: no sweeper thread (tests
  // call SweepSessions() themselves).
  absl::Duration session_sweep_interval = absl::Seconds(1);
  // Cluster mode: Get/Put/Delete are routed through it (not owned; must
  // outlive the service). Null: single-node mode, every key served here.
  const ClusterState* cluster = nullptr;
};

// Put, Delete and Expire are callback RPCs (their writes may wait for a
// replication round, which must not hold a thread of gRPC's pool); the rest
// are served on gRPC's sync pool.
using KvControlBase = kvstore::v1::KvControl::WithCallbackMethod_Put<
    kvstore::v1::KvControl::WithCallbackMethod_Delete<
        kvstore::v1::KvControl::WithCallbackMethod_Expire<kvstore::v1::KvControl::Service>>>;

class KvControlServiceImpl final : public KvControlBase {
 public:
  // Scan page size when the request leaves count at 0, and its cap.
  static constexpr uint32_t kDefaultScanCount = 100;
  static constexpr uint32_t kMaxScanCount = 1000;

  // CHECK-fails if deps.store, deps.leases or deps.pool is null. Starts the
  // session sweeper (deps.session_sweep_interval > 0).
  explicit KvControlServiceImpl(ControlServiceDeps deps);
  // StopSweeper(); seals the Put writers' open segments in the store.
  ~KvControlServiceImpl() override;
  KvControlServiceImpl(const KvControlServiceImpl&) = delete;
  KvControlServiceImpl& operator=(const KvControlServiceImpl&) = delete;

  // Every RPC below first fails with UNAUTHENTICATED when the server has
  // client credentials and the call carries none of them, and with
  // PERMISSION_DENIED when the caller's role lacks the permission the
  // method needs (common/auth/rpc_policy.cc: reads for readers, writes and
  // leases for writers, sessions and leases for peers too).

  // Opens a session (HandshakeResponse.session_id) and returns the
  // server's epoch, limits, index geometry, regions with their read keys,
  // and data endpoints. RESOURCE_EXHAUSTED when max_sessions are open.
  grpc::Status Handshake(grpc::ServerContext* context, const kvstore::v1::HandshakeRequest* request,
                         kvstore::v1::HandshakeResponse* response) override;
  // UNAVAILABLE for a stale epoch or a server without RDMA;
  // FAILED_PRECONDITION without a live session; INVALID_ARGUMENT for an
  // endpoint without qpn or 16-byte gid, or probe_rkey 0 (an unprobed queue
  // pair of a dead client would live forever); RESOURCE_EXHAUSTED at the
  // session's queue-pair quota; otherwise as RdmaService::Connect().
  grpc::Status ConnectQp(grpc::ServerContext* context, const kvstore::v1::ConnectQpRequest* request,
                         kvstore::v1::ConnectQpResponse* response) override;
  // UNAVAILABLE for a stale epoch; FAILED_PRECONDITION without a live
  // session; PERMISSION_DENIED for a connection the session did not make;
  // otherwise as RdmaService::Disconnect() (NOT_FOUND when already gone).
  grpc::Status DisconnectQp(grpc::ServerContext* context,
                            const kvstore::v1::DisconnectQpRequest* request,
                            kvstore::v1::DisconnectQpResponse* response) override;
  // UNAVAILABLE for a stale epoch; FAILED_PRECONDITION without a live
  // session or with connection_id 0; PERMISSION_DENIED for a connection the
  // session did not make; RESOURCE_EXHAUSTED at the session's lease or
  // lease-bytes quota; otherwise as LeaseTable::Grant() with a write key
  // bound to that queue pair (RdmaService::BindLease()'s error fails it).
  grpc::Status GrantLease(grpc::ServerContext* context,
                          const kvstore::v1::GrantLeaseRequest* request,
                          kvstore::v1::GrantLeaseResponse* response) override;
  // UNAVAILABLE for a stale epoch; FAILED_PRECONDITION without a live
  // session; PERMISSION_DENIED unless connection_id is one of the session's;
  // otherwise as LeaseTable::Renew() for that connection. The reply's write_rkey is 0: the key
  // stays valid and is not repeated.
  grpc::Status RenewLease(grpc::ServerContext* context,
                          const kvstore::v1::RenewLeaseRequest* request,
                          kvstore::v1::RenewLeaseResponse* response) override;
  // UNAVAILABLE for a stale epoch; FAILED_PRECONDITION and
  // PERMISSION_DENIED as RenewLease; otherwise as LeaseTable::Release().
  grpc::Status ReleaseLease(grpc::ServerContext* context,
                            const kvstore::v1::ReleaseLeaseRequest* request,
                            kvstore::v1::ReleaseLeaseResponse* response) override;
  // Cluster mode (deps.cluster): Get, Put and Delete first route the key,
  // after the token check; a key whose shard another node leads fails with
  // a kMoved refusal (common/cluster/refusal.h) naming the primary's control
  // address, and with kClusterDown while the shard has no primary or this
  // node has no map or is fenced (RouteRefusal). The write hook's own
  // refusals (a newer map arrived meanwhile; a write whose outcome is
  // unknown) come back the same way, in the status details. Scan is local.
  //
  // INVALID_ARGUMENT for a key over the limits, NOT_FOUND if absent.
  grpc::Status Get(grpc::ServerContext* context, const kvstore::v1::GetRequest* request,
                   kvstore::v1::GetResponse* response) override;
  // INVALID_ARGUMENT over the limits (checked before allocating),
  // RESOURCE_EXHAUSTED when the pool or the index is full. A callback RPC:
  // the entry is reserved through one writer shared by every Put in flight
  // (KvStore::NewSharedWriter) and its commit started (KvStore::StartCommit)
  // without waiting; the write hook's answer finishes the call, on the
  // replication's thread. A commit StartCommit declines (a busy key, a
  // migration, a syncing replica) and a Put that finds the pool full and
  // may wait for space (SpaceWait) run on put_workers_.
  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* context,
                                const kvstore::v1::PutRequest* request,
                                kvstore::v1::PutResponse* response) override;
  // INVALID_ARGUMENT for a key over the limits, NOT_FOUND if absent. A
  // callback RPC: the delete is started (KvStore::StartDelete) and the
  // write hook's answer finishes the call; one StartDelete declines runs on
  // put_workers_.
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const kvstore::v1::DeleteRequest* request,
                                   kvstore::v1::DeleteResponse* response) override;
  // Sets or removes a key's expiry (KvStore::Update: atomic, replicated);
  // routed as Put is. A callback RPC whose read-modify-write runs on
  // put_workers_ in cluster mode (it waits for its round), inline otherwise.
  grpc::ServerUnaryReactor* Expire(grpc::CallbackServerContext* context,
                                   const kvstore::v1::ExpireRequest* request,
                                   kvstore::v1::ExpireResponse* response) override;
  grpc::Status Ttl(grpc::ServerContext* context, const kvstore::v1::TtlRequest* request,
                   kvstore::v1::TtlResponse* response) override;
  // Counts a client's one-sided reads for eviction (KvStore::NoteRead).
  // INVALID_ARGUMENT for more than kMaxReportedReads offsets (both fields
  // together).
  grpc::Status ReportReads(grpc::ServerContext* context,
                           const kvstore::v1::ReportReadsRequest* request,
                           kvstore::v1::ReportReadsResponse* response) override;
  // The info facts and every counter (CollectCounters()). Never fails.
  grpc::Status Stats(grpc::ServerContext* context, const kvstore::v1::StatsRequest* request,
                     kvstore::v1::StatsResponse* response) override;
  // Pages of keys starting with `prefix`; a page may hold a few more keys
  // than asked for (whole buckets are listed). Cursor 0 in the reply ends it.
  grpc::Status Scan(grpc::ServerContext* context, const kvstore::v1::ScanRequest* request,
                    kvstore::v1::ScanResponse* response) override;

  // Expires the sessions idle at `now` (SessionTable::Sweep) and disconnects
  // their queue pairs. Returns how many expired. The sweeper calls it.
  size_t SweepSessions(absl::Time now);
  // Stops the sweeper; after it returns the service no longer disconnects
  // anything on its own, so the RDMA service may go. Idempotent.
  void StopSweeper();
  // The sessions, for tests.
  SessionTable& sessions() { return sessions_; }

 private:
  // A Put waiting for pool space, and Expire, spread over a few writers so
  // that one large value does not hold up every other one; each is used by
  // one thread at a time.
  static constexpr size_t kPutWriters = 4;
  // Threads for the blocking parts of Put, Delete and Expire (put_workers_):
  // each holds one write in flight, so this bounds those (the common Put and
  // Delete take none).
  static constexpr size_t kPutWorkers = 64;
  struct PutWriter {
    absl::Mutex mu;
    std::unique_ptr<KvStore::Writer> writer ABSL_GUARDED_BY(mu);
  };

  // OK when this node serves `key` (or there is no cluster); otherwise the
  // refusal described at Get().
  absl::Status RouteKey(const std::string& key) const;
  // `status`, except that the write hook's kMoved / kAsk refusal is
  // re-routed on the newest map so that it names the primary's control
  // address.
  absl::Status RerouteRefusal(const std::string& key, absl::Status status) const;
  // How long a PUT or a lease grant may be held back by a pool full of
  // segments in their grace period (see the definition); never past the
  // RPC's deadline.
  absl::Duration SpaceWait(const grpc::ServerContextBase* context) const;
  // Put's slow way, on a worker: KvStore::Put through one of writers_,
  // waiting up to `space_wait` for space. Returns the call's status.
  absl::Status PutWaitingForSpace(const kvstore::v1::PutRequest& request, absl::Duration space_wait,
                                  uint64_t expires_at_ms);
  // Expire's work (on a worker in cluster mode): the checks, then the
  // read-modify-write through one of writers_. Returns the call's status.
  absl::Status ExpireNow(const kvstore::v1::ExpireRequest& request,
                         kvstore::v1::ExpireResponse* response);
  // OK, or UNAVAILABLE telling the client to handshake again.
  absl::Status CheckEpoch(uint64_t epoch) const;
  // The proto form of `info`; write_addr only when there is a write key.
  void FillLease(const LeaseInfo& info, kvstore::v1::Lease* lease) const;
  // Counts an UNAVAILABLE lease RPC and converts the status.
  grpc::Status FinishLeaseRpc(const absl::Status& status);
  // The live session `id` (refusal counted otherwise).
  absl::StatusOr<std::shared_ptr<SessionTable::Session>> UseSession(uint64_t id);
  // PERMISSION_DENIED (counted) unless `session` made `connection_id`;
  // FAILED_PRECONDITION if the session expired after it was looked up.
  // REQUIRES: session.mu held.
  absl::Status CheckOwns(SessionTable::Session& session, uint64_t connection_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu);
  // A live session `session_id` that made `connection_id` (Renew/Release).
  absl::Status CheckCaller(uint64_t session_id, uint64_t connection_id);
  // RESOURCE_EXHAUSTED (counted) if a lease of `bytes` would take the
  // session past its lease or lease-bytes quota.
  // REQUIRES: session.mu held (so two grants cannot both pass).
  absl::Status CheckLeaseQuota(SessionTable::Session& session, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(session.mu);
  // PERMISSION_DENIED unless `caller` is the user that opened `session`
  // (its queue pairs and leases carry that user's rights).
  absl::Status CheckSameUser(const SessionTable::Session& session, const auth::Identity& caller);
  // The RDMA connection behind ConnectQp, once the request is checked.
  absl::StatusOr<RdmaService::Accepted> ConnectChecked(
      SessionTable::Session& session, const grpc::ServerContext* context,
      const kvstore::v1::ConnectQpRequest& request);
  // Counts a session refusal by reason and passes the status on.
  absl::Status Refuse(const char* reason, absl::Status status);
  void SweepLoop();
  // Stats.counters: FlattenSnapshot of the registry, i.e. every series of
  // the server keyed as in /metrics.
  std::map<std::string, uint64_t> CollectCounters() const;
  // Registers the per-RPC and grpc request series; constructor only.
  void RegisterMetrics();

  // Declared first: the Counter*s below point into it, so it dies last.
  std::unique_ptr<metrics::Registry> own_registry_;
  const ControlServiceDeps deps_;
  metrics::Registry* const registry_;
  std::array<PutWriter, kPutWriters> writers_;
  std::atomic<uint64_t> next_writer_{0};
  // Put()'s writer: shared, so that its rounds overlap (one open segment).
  std::unique_ptr<KvStore::Writer> put_writer_;
  // After the writers: destroyed first, and its destructor runs the jobs
  // still queued, which use them.
  std::unique_ptr<WorkerPool> put_workers_;
  const auth::Authenticator auth_;
  SessionTable sessions_;
  absl::Notification stop_sweeper_;
  std::thread sweeper_;

  // kvstore_grpc_requests_total{method=...}, one per RPC; owned by the registry.
  // kvstore_grpc_session_refusals_total{reason=...}, by reason.
  std::map<std::string, metrics::Counter*> refusals_;
  metrics::Counter* handshakes_;
  metrics::Counter* connect_qps_;
  metrics::Counter* disconnect_qps_;
  metrics::Counter* grant_leases_;
  metrics::Counter* renew_leases_;
  metrics::Counter* release_leases_;
  metrics::Counter* gets_;
  metrics::Counter* puts_;
  metrics::Counter* deletes_;
  metrics::Counter* scans_;
  metrics::Counter* stats_;
  metrics::Counter* stale_epoch_errors_;
  // The slow-path data RPCs as kvstore_server_requests_total{transport="grpc"}.
  RequestMetrics get_requests_;
  RequestMetrics put_requests_;
  RequestMetrics delete_requests_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CONTROL_CONTROL_SERVICE_H_
