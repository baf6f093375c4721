// Copyright 2026 The kvstore Authors.
//
// ControlClient: the calling side of the gRPC control plane (KvControl),
// and the ONLY code that calls its generated stub: the client library and
// kvctl use it, and so does a primary that connects an RDMA replication
// link to a backup (the backup serves it KvControl as it serves clients).
// Every call
// gets a fresh grpc::ClientContext with the caller's deadline; calls scoped
// to a server session (queue pairs and leases) take its SessionScope (epoch
// and session id from the handshake) as their first argument and
// ControlClient stamps both on the request; every grpc::Status is converted
// with FromGrpcStatus (common/grpc_status.h), so callers see the server's
// absl::StatusCode unchanged: kUnavailable for a server that is gone or a
// stale epoch (handshake again), kUnauthenticated for a refused token or a
// lost session, kDeadlineExceeded when `deadline` passed, kAborted for an
// expired lease, and the RPC's own codes otherwise.
//
// Deadlines are absolute and chosen by the caller, since they differ per call
// (connect_timeout for setup, op_timeout for operations, 2 s for a
// best-effort disconnect).
//
// Security (docs/security.md): with ControlSecurity::tls_ca_file the channel
// is TLS (mutual TLS when a client certificate is given too); with an
// auth_token every call carries "authorization: Bearer <token>", added in the
// one place that makes contexts. A server that refuses the token answers
// kUnauthenticated, which reaches the caller with the server's message.
//
// Thread safety: thread-safe; any number of calls may run at once (the gRPC
// channel multiplexes them). One ControlClient serves a KvClient (or a
// replication link) and every RDMA path it builds; it must outlive them.

#ifndef KVSTORE_COMMON_CONTROL_CONTROL_CLIENT_H_
#define KVSTORE_COMMON_CONTROL_CONTROL_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/kv_control.grpc.pb.h"

namespace kvstore {
namespace control {

// How the control channel is secured; the fields of client::Options of the
// same names (options.h documents them). All empty: plaintext, no token.
struct ControlSecurity {
  std::string auth_token;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;
};

// The server-side session and epoch that queue pairs and leases belong to,
// both from one HandshakeResponse. Every scoped RPC carries both.
struct SessionScope {
  uint64_t epoch = 0;
  uint64_t session_id = 0;
};

// True when a scoped RPC failed because the server no longer knows the
// session (it expired while the client was idle, or the server forgot it):
// kUnauthenticated, or a kSessionLost refusal (common/cluster/refusal.h,
// carried in the gRPC status details). The remedy is the stale-epoch one:
// handshake again for a new session.
bool IsSessionLost(const absl::Status& status);

class ControlClient {
 public:
  // A client of the server at `address` ("host:port") without message size
  // limits, secured as `security` says. The options are checked here, before
  // any connection: kInvalidArgument for a certificate without its key (or
  // the reverse), a certificate or server name without tls_ca_file, a PEM
  // file that cannot be read or holds no PEM block (the error names the
  // path), or a token that auth::ValidateToken refuses (the token itself is
  // never printed). Otherwise gRPC connects lazily, so an unreachable server
  // shows in the first call.
  static absl::StatusOr<std::unique_ptr<ControlClient>> Dial(const std::string& address,
                                                             const ControlSecurity& security = {});
  // The channel Dial() makes, checked the same way, for callers that put
  // another service's stub on it too (the cluster client's KvCluster calls
  // share one connection per server with KvControl).
  static absl::StatusOr<std::shared_ptr<grpc::Channel>> DialChannel(
      const std::string& address, const ControlSecurity& security = {});

  // Calls go to `stub`; each carries `auth_token` as a bearer token unless
  // it is empty.
  explicit ControlClient(std::unique_ptr<v1::KvControl::Stub> stub, std::string auth_token = "");
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
  // Stores key -> value through the server's CPU with a time to live
  // (`ttl` > 0, whole milliseconds, reckoned on the server's clock).
  absl::Status PutWithTtl(absl::string_view key, absl::string_view value, absl::Duration ttl,
                          absl::Time deadline);
  // Sets the key's time to live (`ttl` > 0) or removes its expiry
  // (absl::InfiniteDuration()); whether anything changed.
  absl::StatusOr<bool> Expire(absl::string_view key, absl::Duration ttl, absl::Time deadline);
  // The key's time to live: absl::InfiniteDuration() without an expiry;
  // kNotFound when absent.
  absl::StatusOr<absl::Duration> Ttl(absl::string_view key, absl::Time deadline);
  // Reports where one-sided GETs found their entries (at most
  // kMaxReportedReads), as ReportReadsRequest.fixed_offsets.
  absl::Status ReportReads(absl::Span<const uint64_t> offsets, absl::Time deadline);

  // --- Session-scoped: queue pairs and write leases --------------------------
  // Each request is stamped with the epoch and session id of `scope`. A lost
  // session fails as IsSessionLost() describes; a stale epoch as
  // kUnavailable.

  // Connects the client's queue pair described by `request` (its epoch and
  // session id are overwritten from `scope`).
  absl::StatusOr<v1::ConnectQpResponse> ConnectQp(const SessionScope& scope,
                                                  v1::ConnectQpRequest request,
                                                  absl::Time deadline);
  // Closes connection `connection_id` and frees what the server keeps for it.
  absl::Status DisconnectQp(const SessionScope& scope, uint64_t connection_id, absl::Time deadline);

  // A write lease of at least `bytes`, tied to `connection_id`.
  absl::StatusOr<v1::Lease> GrantLease(const SessionScope& scope, uint64_t bytes,
                                       const std::string& client_name, uint64_t connection_id,
                                       absl::Time deadline);
  // Extends lease `lease_id` by the server's TTL; kAborted once it expired.
  absl::Status RenewLease(const SessionScope& scope, uint64_t lease_id, uint64_t connection_id,
                          absl::Time deadline);
  // Gives lease `lease_id` back.
  absl::Status ReleaseLease(const SessionScope& scope, uint64_t lease_id, uint64_t connection_id,
                            absl::Time deadline);

 private:
  // A fresh context for one call: the caller's deadline and, when a token
  // is set, the bearer metadata. The only place contexts are made.
  std::unique_ptr<grpc::ClientContext> NewContext(absl::Time deadline) const;

  const std::unique_ptr<v1::KvControl::Stub> stub_;
  // "Bearer <token>", or empty for no authorization metadata.
  const std::string bearer_;
};

}  // namespace control
}  // namespace kvstore

#endif  // KVSTORE_COMMON_CONTROL_CONTROL_CLIENT_H_
