// Copyright 2026 The kvstore Authors.
//
// RdmaDataPath: the DataPath over RDMA verbs.
//
//   GET     READ both candidate buckets (one doorbell) -> pick the slots whose
//           fingerprint matches -> bounds-check them -> READ the entry ->
//           verify magic, lengths, checksum and key. A failed verify or a
//           bucket-to-entry span longer than the server's max_read_span is
//           retried from the bucket READ (bounded, with backoff); then the
//           server's gRPC Get answers. The server CPU takes no part otherwise.
//   PUT     bump-allocate the entry in a write lease -> RDMA WRITE of header
//           + key + value (gathered; the value straight from the caller's
//           registered buffer in PutFrom) -> SEND a commit on the same queue
//           pair -> wait for the server's ack. A commit refused because the
//           lease expired (kAborted) is redone once with a fresh lease.
//   DELETE  a commit naming the key.
// Leases are refilled in the background before the current one runs out,
// renewed before they expire and released once drained.
//
// Any completion error (remote access error, retry exceeded: server gone)
// marks the path broken; every operation then fails with kUnavailable and the
// owner builds a new path after handshaking again (a new server epoch brings
// new rkeys and a new index seed).
//
// Thread safety: thread-safe; many operations in flight on one queue pair.

#ifndef KVSTORE_CLIENT_INTERNAL_RDMA_RDMA_DATA_PATH_H_
#define KVSTORE_CLIENT_INTERNAL_RDMA_RDMA_DATA_PATH_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/internal/data_path.h"
#include "client/kv_client.h"
#include "common/protocol/limits.h"
#include "proto/kv_control.grpc.pb.h"

namespace kvstore {
namespace client {

// Payload type URL on a Status whose operation was never sent to the server
// (it failed locally first), so retrying it cannot repeat its effect.
inline constexpr char kNotSentPayload[] = "type.kvstore/not-sent";

struct RdmaPathCounters {
  uint64_t ops = 0;
  uint64_t checksum_retries = 0;
  uint64_t span_retries = 0;
  uint64_t server_fallback_gets = 0;
  uint64_t leases_granted = 0;
  uint64_t leases_released = 0;
  uint64_t leases_renewed = 0;
  uint64_t lease_aborts = 0;

  RdmaPathCounters& operator+=(const RdmaPathCounters& o) {
    ops += o.ops;
    checksum_retries += o.checksum_retries;
    span_retries += o.span_retries;
    server_fallback_gets += o.server_fallback_gets;
    leases_granted += o.leases_granted;
    leases_released += o.leases_released;
    leases_renewed += o.leases_renewed;
    lease_aborts += o.lease_aborts;
    return *this;
  }
};

// The device and protection domain a client's paths share, so that memory
// registered by the caller stays valid when a broken path is replaced.
class RdmaContext;

class RdmaDataPath : public DataPath {
 public:
  // Opens `device` ("" = the first with an active port). kUnavailable when
  // there is none, or when RLIMIT_MEMLOCK is too small for RDMA buffers (the
  // message names the fix).
  static absl::StatusOr<std::shared_ptr<RdmaContext>> OpenContext(const std::string& device,
                                                                  uint64_t max_value_bytes);

  // Connects a queue pair through ConnectQp and prepares the region
  // directory from `handshake`. `stub` must outlive the path.
  static absl::StatusOr<std::unique_ptr<RdmaDataPath>> Connect(
      std::shared_ptr<RdmaContext> context, v1::KvControl::Stub* stub,
      const v1::HandshakeResponse& handshake, const std::string& client_name, uint64_t lease_bytes,
      absl::Duration rpc_timeout);

  // Zero copy (see KvClient).
  virtual absl::StatusOr<RegisteredBuffer> Register(void* data, size_t size) = 0;
  virtual absl::StatusOr<size_t> GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                         size_t offset, size_t capacity, absl::Time deadline) = 0;
  virtual absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                               size_t length, absl::Time deadline) = 0;

  // True once a completion error broke the queue pair.
  virtual bool broken() const = 0;
  virtual uint64_t epoch() const = 0;
  virtual RdmaPathCounters counters() const = 0;

  absl::string_view name() const override { return "rdma"; }
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_RDMA_RDMA_DATA_PATH_H_
