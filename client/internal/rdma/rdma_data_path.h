// Copyright 2026 The kvstore Authors.
//
// RdmaDataPath: the DataPath over RDMA verbs. A thin facade over the parts
// that do the work, one job each:
//
//   PathCore        the shared initiator (common/rdma/initiator/path_core.h):
//                   server layout, queue pair, operation slots and commit
//                   credits, write leases (its own thread), WRITE + commit
//   RdmaReader      one-sided GET / Exists / MultiGet, verify, retry, fallback
//   RdmaWriter      PUT / MultiPut / DELETE by WRITE + commit
//
// The parts count into the client's metrics::Registry (reader: read
// retries and fallbacks; writer: lease aborts; lease manager: leases), which
// outlives every path, so a path rebuilt after a reconnect adds to the same
// series.
//
// Any completion error (remote access error, retry exceeded: server gone)
// marks the path broken; every operation then fails with kUnavailable and the
// owner builds a new path after handshaking again (a new server epoch brings
// new rkeys and a new index seed).
//
// Thread safety: thread-safe; many operations in flight on one queue pair.

#ifndef KVSTORE_CLIENT_INTERNAL_RDMA_RDMA_DATA_PATH_H_
#define KVSTORE_CLIENT_INTERNAL_RDMA_RDMA_DATA_PATH_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/internal/data_path.h"
#include "client/internal/rdma/reader.h"
#include "common/control/control_client.h"
#include "common/metrics/registry.h"
#include "common/rdma/initiator/path_core.h"
#include "common/rdma/initiator/rdma_context.h"
#include "proto/kv_control.pb.h"

namespace kvstore {
namespace client {

class RdmaReader;
class RdmaWriter;

class RdmaDataPath final : public DataPath {
 public:
  // Connects a queue pair through ConnectQp and prepares the region
  // directory from `handshake`, on the device and PD of `context`. `control`
  // and `registry` (the client's, where the parts register their counters)
  // must outlive the path; `rpc_timeout` bounds each control-plane call the
  // path makes; `read` sets the GET location cache's size and whether large
  // entries are READ in pieces (Options::rdma_location_cache_entries and
  // rdma_read_in_pieces). Errors: kFailedPrecondition for a server whose
  // memory layout or commit buffers do not fit this client, kUnavailable when it publishes no RDMA
  // regions, ConnectQp's status, the verbs error of a resource.
  static absl::StatusOr<std::unique_ptr<RdmaDataPath>> Connect(
      std::shared_ptr<initiator::RdmaContext> context, control::ControlClient* control,
      const v1::HandshakeResponse& handshake, const std::string& client_name, uint64_t lease_bytes,
      absl::Duration rpc_timeout, metrics::Registry* registry,
      const ReadOptions& read = ReadOptions());

  // Stops the lease thread; on a healthy path also releases the leases and
  // disconnects (skipped on a broken path: the server may be gone, each RPC
  // would wait out its deadline, and it expires the leases anyway).
  ~RdmaDataPath() override;

  // The data operations, as DataPath documents them: reads go to the
  // RdmaReader, writes and deletes to the RdmaWriter.
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override;
  absl::Status Put(absl::string_view key, absl::string_view value, absl::Time deadline) override;
  absl::Status Delete(absl::string_view key, absl::Time deadline) override;
  absl::StatusOr<bool> Exists(absl::string_view key, absl::Time deadline) override;
  // Expiry goes through the server's CPU (the control plane): the server
  // reckons expiry times on its own clock, which a client's RDMA WRITE of
  // an entry could not.
  absl::Status PutWithTtl(absl::string_view key, absl::string_view value, absl::Duration ttl,
                          absl::Time deadline) override;
  absl::StatusOr<bool> Expire(absl::string_view key, absl::Duration ttl,
                              absl::Time deadline) override;
  absl::StatusOr<absl::Duration> Ttl(absl::string_view key, absl::Time deadline) override;
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys, absl::Time deadline) override;
  absl::StatusOr<std::vector<absl::Status>> MultiPut(
      absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time deadline) override;

  // Registers the memory with the context's PD, so the NIC reads and writes
  // it directly; the registration lives as long as any handle to it.
  absl::StatusOr<RegisteredBuffer> Register(void* data, size_t size) override;
  // Zero copy for buffers this device knows; others (lkey 0) are copied
  // through Get/Put as over TCP.
  absl::StatusOr<size_t> GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                 size_t offset, size_t capacity, absl::Time deadline) override;
  absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                       size_t length, absl::Time deadline) override;

  // Reads are checked against the server's fence words under this map
  // epoch (RdmaReader); the path keeps it until set again.
  void SetMapEpoch(uint64_t epoch) override;

  // True once a completion error, failed post or timeout broke the QP.
  bool broken() const override;
  absl::string_view name() const override { return "rdma"; }

 private:
  // Defined in the .cc, where the parts are complete types.
  explicit RdmaDataPath(std::unique_ptr<initiator::PathCore> core);

  // Declared first, so the reader and the writer that use it go first.
  const std::unique_ptr<initiator::PathCore> core_;
  std::unique_ptr<RdmaReader> reader_;
  std::unique_ptr<RdmaWriter> writer_;
  control::ControlClient* control_ = nullptr;  // not owned; outlives the path
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_RDMA_RDMA_DATA_PATH_H_
