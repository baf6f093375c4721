// Copyright 2026 The kvstore Authors.
//
// PathCore: what every RDMA path to one server is built on, whoever drives
// it (a client's RdmaDataPath, a primary's replica writer). Built from one
// handshake, in dependency order:
//
//   ServerLayout    what the handshake says about the server's memory
//   BufferPool      registered staging for entries too large for a slot
//   OpEngine        operation slots, commit credits, completion polling
//   RdmaConnection  queue-pair setup (ConnectQp) and the ack receives
//   LeaseManager    write leases: grant, renew, release (its own thread)
//   EntryWriter     WRITE + commit of entries into the leases, SEND commits
//
// Any completion error (remote access error, retry exceeded: server gone)
// marks the path broken; the owner then builds a new one after handshaking
// again (a new server epoch brings new rkeys and a new index seed).
//
// Thread safety: thread-safe, as its parts are; many operations in flight.

#ifndef KVSTORE_COMMON_RDMA_INITIATOR_PATH_CORE_H_
#define KVSTORE_COMMON_RDMA_INITIATOR_PATH_CORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/control/control_client.h"
#include "common/metrics/registry.h"
#include "common/rdma/initiator/entry_writer.h"
#include "common/rdma/initiator/lease_manager.h"
#include "common/rdma/initiator/op_engine.h"
#include "common/rdma/initiator/rdma_context.h"
#include "common/rdma/initiator/server_layout.h"
#include "proto/kv_control.pb.h"

namespace kvstore {
namespace initiator {

class RdmaConnection;

// The counters a path's parts update. Its owner names them (a client's
// kvstore_client_* series, a server's per-peer replication series) and owns
// them in a registry that outlives every path, so a path rebuilt after a
// reconnect adds to the same series.
struct PathCounters {
  LeaseCounters leases;
  // Commits redone after their lease expired (EntryWriter).
  metrics::Counter* lease_aborts = nullptr;
};

class PathCore {
 public:
  // Connects a queue pair through ConnectQp and prepares the region
  // directory from `handshake`, on the device and PD of `context`, and
  // starts the lease thread. `control` and the counters must outlive the
  // core; `rpc_timeout` bounds
  // each control-plane call it makes; its leases are of `lease_bytes` (or
  // an entry's size, if larger). Errors: kFailedPrecondition for a server
  // whose memory layout or commit buffers do not fit this build,
  // kUnavailable when it publishes no RDMA regions, ConnectQp's status, the
  // verbs error of a resource.
  static absl::StatusOr<std::unique_ptr<PathCore>> Connect(
      std::shared_ptr<RdmaContext> context, control::ControlClient* control,
      const v1::HandshakeResponse& handshake, const std::string& name, uint64_t lease_bytes,
      absl::Duration rpc_timeout, const PathCounters& counters);

  // Stops the lease thread; on a healthy path also releases the leases and
  // disconnects (skipped on a broken path: the server may be gone, each RPC
  // would wait out its deadline, and it expires the leases anyway).
  ~PathCore();
  PathCore(const PathCore&) = delete;
  PathCore& operator=(const PathCore&) = delete;

  const std::shared_ptr<RdmaContext>& context() const { return ctx_; }
  const ServerLayout& layout() const { return layout_; }
  BufferPool* pool() { return pool_.get(); }
  OpEngine* engine() { return engine_.get(); }
  LeaseManager* leases() { return leases_.get(); }
  EntryWriter* entries() { return entries_.get(); }
  // The connected queue pair's terms (RdmaConnection).
  const RdmaConnection& connection() const { return *conn_; }

  // True once a completion error, failed post or timeout broke the QP.
  bool broken() const { return engine_->broken(); }

 private:
  PathCore(std::shared_ptr<RdmaContext> ctx, ServerLayout layout);

  const std::shared_ptr<RdmaContext> ctx_;
  const ServerLayout layout_;
  // Declared in dependency order, so they are destroyed users first.
  std::unique_ptr<BufferPool> pool_;
  std::unique_ptr<OpEngine> engine_;
  std::unique_ptr<RdmaConnection> conn_;
  std::unique_ptr<LeaseManager> leases_;
  std::unique_ptr<EntryWriter> entries_;
};

}  // namespace initiator
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_INITIATOR_PATH_CORE_H_
