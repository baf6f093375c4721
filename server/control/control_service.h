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
// Leases: the service holds no lease state. GrantLease asks LeaseTable for a
// lease and, with a connection_id, has RdmaService::BindLease() make its
// write key inside LeaseTable::Grant(); RenewLease/ReleaseLease pass the
// caller's connection_id to the LeaseTable, which checks it against the
// key's holder (docs/protocol.md §1.2).
//
// Thread safety: thread-safe (gRPC's sync server calls it from many threads).

#ifndef KVSTORE_SERVER_CONTROL_CONTROL_SERVICE_H_
#define KVSTORE_SERVER_CONTROL_CONTROL_SERVICE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/registry.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "proto/kv_control.grpc.pb.h"
#include "proto/kv_control.pb.h"
#include "server/metrics/request_metrics.h"
#include "server/rdma/rdma_service.h"
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
};

class KvControlServiceImpl final : public kvstore::v1::KvControl::Service {
 public:
  // Scan page size when the request leaves count at 0, and its cap.
  static constexpr uint32_t kDefaultScanCount = 100;
  static constexpr uint32_t kMaxScanCount = 1000;

  // CHECK-fails if deps.store, deps.leases or deps.pool is null.
  explicit KvControlServiceImpl(ControlServiceDeps deps);
  // Seals the Put writers' open segments in the store.
  ~KvControlServiceImpl() override;
  KvControlServiceImpl(const KvControlServiceImpl&) = delete;
  KvControlServiceImpl& operator=(const KvControlServiceImpl&) = delete;

  // The server's epoch, limits, index geometry, regions with their read
  // keys, and data endpoints. Never fails.
  grpc::Status Handshake(grpc::ServerContext* context, const kvstore::v1::HandshakeRequest* request,
                         kvstore::v1::HandshakeResponse* response) override;
  // UNAVAILABLE for a stale epoch or a server without RDMA; INVALID_ARGUMENT
  // for an endpoint without qpn or 16-byte gid; otherwise as
  // RdmaService::Connect().
  grpc::Status ConnectQp(grpc::ServerContext* context, const kvstore::v1::ConnectQpRequest* request,
                         kvstore::v1::ConnectQpResponse* response) override;
  // UNAVAILABLE for a stale epoch or a server without RDMA; otherwise as
  // RdmaService::Disconnect() (NOT_FOUND for an unknown connection).
  grpc::Status DisconnectQp(grpc::ServerContext* context,
                            const kvstore::v1::DisconnectQpRequest* request,
                            kvstore::v1::DisconnectQpResponse* response) override;
  // UNAVAILABLE for a stale epoch; otherwise as LeaseTable::Grant(). With a
  // connection_id, the lease is granted with a write key bound to that queue
  // pair: FAILED_PRECONDITION without RDMA, or RdmaService::BindLease()'s
  // error (the lease is then not granted).
  grpc::Status GrantLease(grpc::ServerContext* context,
                          const kvstore::v1::GrantLeaseRequest* request,
                          kvstore::v1::GrantLeaseResponse* response) override;
  // UNAVAILABLE for a stale epoch; otherwise as LeaseTable::Renew() for the
  // request's connection_id. The reply's write_rkey is 0: the key stays
  // valid and is not repeated.
  grpc::Status RenewLease(grpc::ServerContext* context,
                          const kvstore::v1::RenewLeaseRequest* request,
                          kvstore::v1::RenewLeaseResponse* response) override;
  // UNAVAILABLE for a stale epoch; otherwise as LeaseTable::Release() for
  // the request's connection_id.
  grpc::Status ReleaseLease(grpc::ServerContext* context,
                            const kvstore::v1::ReleaseLeaseRequest* request,
                            kvstore::v1::ReleaseLeaseResponse* response) override;
  // INVALID_ARGUMENT for a key over the limits, NOT_FOUND if absent.
  grpc::Status Get(grpc::ServerContext* context, const kvstore::v1::GetRequest* request,
                   kvstore::v1::GetResponse* response) override;
  // INVALID_ARGUMENT over the limits (checked before allocating),
  // RESOURCE_EXHAUSTED when the pool or the index is full.
  grpc::Status Put(grpc::ServerContext* context, const kvstore::v1::PutRequest* request,
                   kvstore::v1::PutResponse* response) override;
  // INVALID_ARGUMENT for a key over the limits, NOT_FOUND if absent.
  grpc::Status Delete(grpc::ServerContext* context, const kvstore::v1::DeleteRequest* request,
                      kvstore::v1::DeleteResponse* response) override;
  // The info facts and every counter (CollectCounters()). Never fails.
  grpc::Status Stats(grpc::ServerContext* context, const kvstore::v1::StatsRequest* request,
                     kvstore::v1::StatsResponse* response) override;
  // Pages of keys starting with `prefix`; a page may hold a few more keys
  // than asked for (whole buckets are listed). Cursor 0 in the reply ends it.
  grpc::Status Scan(grpc::ServerContext* context, const kvstore::v1::ScanRequest* request,
                    kvstore::v1::ScanResponse* response) override;

 private:
  // Put() spreads over a few writers so that one large value does not hold
  // up every other slow-path PUT; each is used by one thread at a time.
  static constexpr size_t kPutWriters = 4;
  struct PutWriter {
    absl::Mutex mu;
    std::unique_ptr<KvStore::Writer> writer ABSL_GUARDED_BY(mu);
  };

  // OK, or UNAVAILABLE telling the client to handshake again.
  absl::Status CheckEpoch(uint64_t epoch) const;
  // The proto form of `info`; write_addr only when there is a write key.
  void FillLease(const LeaseInfo& info, kvstore::v1::Lease* lease) const;
  // Counts an UNAVAILABLE lease RPC and converts the status.
  grpc::Status FinishLeaseRpc(const absl::Status& status);
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

  // kvstore_grpc_requests_total{method=...}, one per RPC; owned by the registry.
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
