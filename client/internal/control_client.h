// Copyright 2026 The kvstore Authors.
//
// ControlClient: the client's side of the gRPC control plane (KvControl),
// and the ONLY code in the client that calls the generated stub. Every call
// gets a fresh grpc::ClientContext with the caller's deadline; calls scoped
// to a server epoch (queue pairs and leases) take the epoch as their first
// argument and ControlClient stamps it on the request; every grpc::Status is
// converted with FromGrpcStatus (common/grpc_status.h), so callers see the
// server's absl::StatusCode unchanged: kUnavailable for a server that is
// gone or a stale epoch (handshake again), kDeadlineExceeded when `deadline`
// passed, kAborted for an expired lease, and the RPC's own codes otherwise.
//
// Deadlines are absolute and chosen by the caller, since they differ per call
// (connect_timeout for setup, op_timeout for operations, 2 s for a
// best-effort disconnect).
//
// Thread safety: thread-safe; any number of calls may run at once (the gRPC
// channel multiplexes them). One ControlClient serves a KvClient and every
// RDMA path it builds; it must outlive them.

#ifndef KVSTORE_CLIENT_INTERNAL_CONTROL_CLIENT_H_
#define KVSTORE_CLIENT_INTERNAL_CONTROL_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/kv_control.grpc.pb.h"

namespace kvstore {
namespace client {

class ControlClient {
 public:
  // A client of the server at `address` ("host:port") over an insecure
  // channel without message size limits. Never fails: gRPC connects lazily,
  // so an unreachable server shows in the first call.
  static std::unique_ptr<ControlClient> Dial(const std::string& address);

  explicit ControlClient(std::unique_ptr<v1::KvControl::Stub> stub);
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // Learns the server's epoch, limits, index geometry, regions and data
  // endpoints. `wait_for_ready`: wait (up to the deadline) for a channel that
  // is down to come back instead of failing at once; used when reconnecting.
  absl::StatusOr<v1::HandshakeResponse> Handshake(const std::string& client_name,
                                                  bool wait_for_ready, absl::Time deadline);

  // One page of keys after `cursor` starting with `prefix` (see KvClient::Scan).
  absl::StatusOr<v1::ScanResponse> Scan(uint64_t cursor, uint32_t count, absl::string_view prefix,
                                        absl::Time deadline);

  // The server's info and counters.
  absl::StatusOr<v1::StatsResponse> Stats(absl::Time deadline);

  // The value of `key`, read by the server's CPU (the RDMA path's fallback
  // when one-sided reads cannot be trusted); kNotFound when absent.
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline);

  // --- Epoch-scoped: queue pairs and write leases ----------------------------

  // Connects the client's queue pair described by `request` (its epoch is
  // overwritten with `epoch`).
  absl::StatusOr<v1::ConnectQpResponse> ConnectQp(uint64_t epoch, v1::ConnectQpRequest request,
                                                  absl::Time deadline);
  // Closes connection `connection_id` and frees what the server keeps for it.
  absl::Status DisconnectQp(uint64_t epoch, uint64_t connection_id, absl::Time deadline);

  // A write lease of at least `bytes`, tied to `connection_id`.
  absl::StatusOr<v1::Lease> GrantLease(uint64_t epoch, uint64_t bytes,
                                       const std::string& client_name, uint64_t connection_id,
                                       absl::Time deadline);
  // Extends lease `lease_id` by the server's TTL; kAborted once it expired.
  absl::Status RenewLease(uint64_t epoch, uint64_t lease_id, uint64_t connection_id,
                          absl::Time deadline);
  // Gives lease `lease_id` back.
  absl::Status ReleaseLease(uint64_t epoch, uint64_t lease_id, uint64_t connection_id,
                            absl::Time deadline);

 private:
  const std::unique_ptr<v1::KvControl::Stub> stub_;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CONTROL_CLIENT_H_
