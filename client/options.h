// Copyright 2026 The kvstore Authors.
//
// Options for kvstore::client::KvClient. Part of the public API: no verbs,
// gRPC or protobuf types may appear here.

#ifndef KVSTORE_CLIENT_OPTIONS_H_
#define KVSTORE_CLIENT_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kvstore {
namespace client {

// Which data path a client uses.
//   kAuto: RDMA when both sides have a device, otherwise TCP (logged once and
//          counted in kvstore_client_tcp_fallbacks_total, see metrics()).
//   kRdma: RDMA or fail with kUnavailable; never falls back.
//   kTcp:  always the RESP/TCP data port.
enum class TransportMode { kAuto, kRdma, kTcp };

absl::string_view TransportModeName(TransportMode mode);
absl::StatusOr<TransportMode> ParseTransportMode(absl::string_view text);

// Checks a control-plane address: "host:port" or "[ipv6]:port", with a
// non-empty host and a decimal port in 1..65535. kInvalidArgument naming the
// address otherwise (gRPC would dial 99999 as another port, and a missing
// port as port 0). Does not resolve the host.
absl::Status ValidateServerAddress(absl::string_view address);

struct Options {
  // Control-plane (gRPC) addresses, "host:port": seed servers. Connect()
  // asks them, in order, for the cluster map; the first that hands one out
  // makes this a cluster client, which then routes every key to its shard's
  // node (client/internal/cluster/cluster_client.h). A server in single-node
  // mode (or one too old to know the cluster) is used alone, as before the
  // cluster existed. The data endpoints are learned from each handshake.
  std::vector<std::string> servers = {"127.0.0.1:7300"};
  TransportMode transport = TransportMode::kAuto;
  // Bound on connecting and handshaking.
  absl::Duration connect_timeout = absl::Seconds(5);
  // Bound on one operation (a MultiGet/MultiPut counts as one).
  absl::Duration op_timeout = absl::Seconds(30);
  // Data connections per server; operations are pipelined on each.
  int connections_per_server = 2;
  // RDMA device for kAuto/kRdma ("" = the first with an active port).
  std::string rdma_device;
  // Bytes per RDMA write lease (rounded up by the server to its segments);
  // larger entries get a lease of their own size.
  uint64_t lease_bytes = 4ull << 20;
  // Keys whose entry location an RDMA path remembers per server, so that a
  // repeated GET costs one RDMA READ instead of two (docs/architecture.md
  // §10.2). About 32 bytes each; rounded up to a power of two; 0 = off.
  size_t rdma_location_cache_entries = 65536;
  // READ entries of 512 KiB and more in up to four pieces and checksum each
  // as it lands, while the rest are on the wire (docs/architecture.md
  // §10.2). Off by default: it can only pay on a NIC that moves the bytes
  // while the CPU hashes, and has not been measured on one; on Soft-RoCE,
  // where the CPU is the NIC, it gained nothing in one VM and cost 10-20 %
  // across two.
  bool rdma_read_in_pieces = false;

  // --- Cluster mode (ignored by a single-node client).
  // Reads (Get, Exists, MultiGet, GetInto) go to an in-sync backup of the
  // key's shard rather than its primary. Not linearizable, and not only
  // stale: a backup publishes a write when it installs it, before the
  // primary acknowledges it, so a replica read may return the value of a
  // write that never took effect (the primary then refused it or failed,
  // and its client was told so or got "outcome unknown"), or that a later
  // failover removes; it may also answer from an older map (e.g. just
  // after a failover), and two reads may see values in either order. Only
  // for callers that tolerate all of that.
  bool read_from_replicas = false;
  // Attempts per operation (the first included) before a redirect,
  // cluster-down refusal or unreachable node is returned to the caller; all of them
  // within op_timeout. At least 1.
  int cluster_max_attempts = 10;
  // Bound on one attempt in cluster mode (zero: op_timeout alone), and at
  // most half of op_timeout. A node
  // that does not answer within it (frozen, or cut off from the network) is
  // dropped and the map refreshed, so the operation moves to the new
  // primary after a failover instead of waiting out op_timeout. Raise it
  // for values that take longer than this to transfer.
  absl::Duration cluster_attempt_timeout = absl::Seconds(2);

  // --- Security (docs/security.md).
  // Connect() checks these before dialling: kInvalidArgument for a token
  // auth::ValidateToken refuses (16..1024 printable bytes; the token is
  // never put in an error), a certificate without its key or the reverse, a
  // certificate or server name without tls_ca_file, and a PEM file that
  // cannot be read or holds no PEM block (naming the file).
  //
  // The server's token: sent as the gRPC bearer token on every control call
  // and as `AUTH <token>`, first, on every RESP data connection (reconnects
  // included). A refusal is kUnauthenticated, never retried on its own.
  // Empty: none sent.
  std::string auth_token;
  // PEM file of the CA that signed the server's certificate. Set: the
  // control channel uses TLS. Empty: plaintext. The RESP data port is
  // plaintext either way (RDMA traffic is not encrypted either).
  std::string tls_ca_file;
  // PEM client certificate and key for mutual TLS (both or neither).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Name the server certificate must carry, when it differs from the host
  // of the server address (e.g. connecting by IP to a cert issued for a name).
  std::string tls_server_name;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_OPTIONS_H_
