// Copyright 2026 The kvstore Authors.
//
// RdmaService: the server side of the RDMA data path.
//
// What a client can touch, and with which key:
//   * the data arena and the index arena: READ only, through the region
//     rkeys of the handshake (MemoryPool registers them without remote
//     write, so a WRITE through them fails with a remote access error);
//   * its write leases: WRITE only, through a per-lease key. Each lease chunk
//     is registered as an MR of its own (LOCAL_WRITE | MW_BIND, no remote
//     access) and a type-2 memory window with REMOTE_WRITE is bound over the
//     whole chunk on the client's queue pair. The MR bounds the range on
//     every device (rxe checks a window's range against its MR only), the
//     window ties the key to one queue pair and is invalidated when the lease
//     ends, so a stale or foreign key fails remotely and changes nothing.
//
// Commits arrive as SENDs (common/commit_wire.h) on the client's queue pair
// and are handled by one poller thread that sleeps on a completion channel:
// GETs never wake it, so a GET-only load costs the server no CPU. The poller
// validates and publishes through LeaseTable::Commit / KvStore::Delete and
// acknowledges with a SEND.
//
// Thread safety: all public methods are thread-safe.

#ifndef KVSTORE_SERVER_RDMA_RDMA_SERVICE_H_
#define KVSTORE_SERVER_RDMA_RDMA_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/protocol/limits.h"
#include "common/rdma/completion_queue.h"
#include "common/rdma/device.h"
#include "common/rdma/gid.h"
#include "common/rdma/memory_window.h"
#include "common/rdma/queue_pair.h"
#include "server/storage/kv_store.h"
#include "server/storage/lease_table.h"
#include "server/storage/memory_pool.h"

namespace kvstore {
namespace server {

struct RdmaServiceOptions {
  // Commit messages a client may have in flight per connection.
  uint32_t commit_credits = 64;
  uint32_t max_connections = 256;
  // Source GID: the RoCE v2 GID of this IPv4 address ("" = the first one).
  std::string gid_ipv4;
  // A connection with no lease and no commit for this long gets a probe (an
  // empty ack); if its client is gone the probe fails and the connection is
  // torn down. RC gives no other sign of a peer that died silently.
  absl::Duration idle_probe_after = absl::Seconds(30);
};

struct RdmaServiceCounters {
  uint64_t connections_active = 0;
  uint64_t connections_total = 0;
  uint64_t commits = 0;
  uint64_t commit_errors = 0;
  uint64_t deletes = 0;
  uint64_t lease_keys_bound = 0;
  uint64_t lease_keys_revoked = 0;
  uint64_t poller_wakeups = 0;
  uint64_t idle_probes = 0;
  uint64_t connections_reaped = 0;  // torn down after a failed send or receive
};

class RdmaService {
 public:
  static absl::StatusOr<std::unique_ptr<RdmaService>> Start(rdma::Device* device,
                                                            rdma::ProtectionDomain* pd,
                                                            MemoryPool* pool, KvStore* store,
                                                            LeaseTable* leases,
                                                            const RdmaServiceOptions& options);
  // Stops the poller and destroys every connection (windows first).
  ~RdmaService();
  RdmaService(const RdmaService&) = delete;
  RdmaService& operator=(const RdmaService&) = delete;

  struct Accepted {
    uint64_t connection_id = 0;
    rdma::QpEndpoint server;
    uint32_t commit_credits = 0;
    uint32_t max_commit_bytes = 0;
  };
  // Creates a queue pair for `client` and connects it. kResourceExhausted
  // when max_connections are open.
  // `probe_addr`/`probe_rkey`: 8 bytes of client memory for idle probes
  // (0: this connection is never probed).
  absl::StatusOr<Accepted> Connect(const rdma::QpEndpoint& client, std::string owner,
                                   uint64_t probe_addr = 0, uint32_t probe_rkey = 0);
  // Ends a connection and every lease bound to it. kNotFound if unknown.
  absl::Status Disconnect(uint64_t connection_id);

  // A write key for `lease` on `connection_id`'s queue pair (after
  // LeaseTable::Grant). Returns {rkey, remote address of the chunk}.
  absl::StatusOr<std::pair<uint32_t, uint64_t>> BindLease(uint64_t connection_id,
                                                          const LeaseInfo& lease);
  // The connection a lease's write key is bound to; 0 if it has none.
  uint64_t LeaseConnection(uint64_t lease_id) const;
  // LeaseOptions::on_revoke: invalidates and frees the lease's window and MR.
  void RevokeLease(const LeaseInfo& lease);

  // Stops handling commits (before the LeaseTable goes away).
  void StopPoller();

  const rdma::Gid& gid() const { return gid_; }
  uint8_t port() const { return device_->port(); }
  RdmaServiceCounters counters() const;

 private:
  struct Connection;
  struct LeaseKey;

  RdmaService(rdma::Device* device, rdma::ProtectionDomain* pd, MemoryPool* pool, KvStore* store,
              LeaseTable* leases, const RdmaServiceOptions& options);
  void PollLoop();
  void HandleCommit(Connection& c, absl::string_view message);
  void SendAck(Connection& c, uint64_t request_id, const absl::Status& status);
  // Posts on c's send queue and waits for that work request's completion.
  // REQUIRES: c.send_mu held.
  absl::Status WaitSend(Connection& c, uint64_t wr_id);
  void ReapSends(Connection& c, int min_to_reap);
  std::shared_ptr<Connection> Find(uint64_t id);
  void Teardown(std::shared_ptr<Connection> c);
  void ProbeIdle();

  rdma::Device* const device_;
  rdma::ProtectionDomain* const pd_;
  MemoryPool* const pool_;
  KvStore* const store_;
  LeaseTable* const leases_;
  const RdmaServiceOptions options_;
  const uint32_t slot_bytes_;  // one commit receive buffer
  int gid_index_ = 0;
  rdma::Gid gid_{};

  // The receive CQ shared by every connection, polled by poller_.
  std::optional<rdma::CompletionChannel> channel_;
  std::optional<rdma::CompletionQueue> recv_cq_;

  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Connection>> conns_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::unique_ptr<LeaseKey>> lease_keys_ ABSL_GUARDED_BY(mu_);

  std::atomic<bool> stop_{false};
  std::thread poller_;
  std::atomic<uint64_t> connections_total_{0}, commits_{0}, commit_errors_{0}, deletes_{0},
      bound_{0}, revoked_{0}, wakeups_{0}, probes_{0}, reaped_{0};
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RDMA_RDMA_SERVICE_H_
