// Copyright 2026 The kvstore Authors.
//
// RespServerOptions: the RESP data port's settings. In a header of its own so
// the loop and the command table (internal to server/resp) can read them
// without depending on RespServer; users include resp_server.h.

#ifndef KVSTORE_SERVER_RESP_RESP_OPTIONS_H_
#define KVSTORE_SERVER_RESP_RESP_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/auth/credentials.h"
#include "common/metrics/registry.h"

namespace kvstore {
namespace server {

class ClusterState;  // server/cluster/cluster_state.h
}  // namespace server
namespace tls {
class ReloadingServerContext;  // common/tls/ssl_context.h
}  // namespace tls
namespace server {

// Per-resource bounds of the RESP port (docs/security.md). Each is a
// kvserver flag (--resp_<name>), is named in the error a client gets when it
// trips, and is counted in a kvstore_resp_* series. 0 disables a bound
// where noted.
struct RespLimits {
  // Connections open at once on the port (all loops together). One more is
  // answered "-ERR max number of clients reached" and closed.
  int max_clients = 4096;
  // With a password: connections open at once that have not authenticated
  // yet, split evenly among the loops (at least one each). They do not
  // count against max_clients until AUTH succeeds; at the cap a new
  // connection closes the loop's oldest unauthenticated one first, so
  // sockets that never log in cannot keep clients with the password out.
  // 0: no cap.
  int max_unauthenticated_clients = 256;
  // With a password: a connection not authenticated this long after it
  // was accepted is closed, however busy it is (store clock; 0: never).
  absl::Duration auth_timeout = absl::Seconds(5);
  // Bytes of one incomplete request held in a connection's input buffer
  // (streamed SET values are not buffered and do not count). Over it:
  // "ERR Protocol error: ... resp_max_query_buffer" and close.
  uint64_t max_query_buffer = 8ull << 20;
  // Queued reply bytes (pinned GET values included) past which the client
  // is disconnected at once; an MGET whose reply would pass it is refused.
  uint64_t output_hard_limit = 256ull << 20;
  // Queued reply bytes a client may keep above this for at most
  // output_soft_seconds before it is disconnected (0: no soft limit).
  uint64_t output_soft_limit = 32ull << 20;
  absl::Duration output_soft_seconds = absl::Seconds(10);
  // How long a queued reply may keep its pool entry pinned (blocking the
  // reclamation of its segment). Past it the rest of a value up to
  // pin_copy_bytes is copied out and unpinned; a larger one closes the
  // connection.
  absl::Duration max_pin_time = absl::Seconds(5);
  uint64_t pin_copy_bytes = 1ull << 20;
  // Pool bytes all streamed SETs still receiving their value may hold
  // together (shared by every loop). A SET that would pass it is answered
  // -OOM naming resp_max_inflight_set_bytes. 0: no bound.
  uint64_t max_inflight_set_bytes = 0;
  // Index buckets one SCAN call may visit; past it SCAN returns what it has
  // (possibly nothing) with a cursor to continue from.
  uint64_t scan_max_buckets = 16384;
};

struct RespServerOptions {
  std::string bind_address = "127.0.0.1";
  int port = 6380;  // 0 picks a free port
  int threads = 2;
  // Close a connection with no traffic for this long (0: never).
  absl::Duration idle_timeout = absl::Minutes(5);
  // Close a connection whose request has been incomplete for this long.
  absl::Duration request_timeout = absl::Seconds(30);
  // How often each loop looks for expired connections and replies pinned
  // or queued too long (idle_timeout, request_timeout, RespLimits). The
  // timeouts themselves run on the store's clock (KvStore::clock()); tests
  // on a fake clock shorten this so that a check follows each step soon.
  absl::Duration timeout_check_interval = absl::Seconds(1);
  // Stop reading from a connection while this many reply bytes are queued.
  size_t max_pending_output = 8 << 20;
  // The whole INFO reply, # Keyspace included; called per INFO request, on
  // the loop thread that serves it, so it must be thread-safe. Empty: INFO
  // answers with just # Keyspace.
  std::function<std::string()> info;
  // The users (common/auth/credentials.h): with any client credential a
  // connection must AUTH [user] pass (or HELLO ... AUTH) before any other
  // command is served (-NOAUTH otherwise), and its user's role decides
  // which commands it may run (-NOPERM otherwise). None: every connection
  // is an admin, as Redis without requirepass. The peer secret is no RESP
  // user.
  auth::Credentials credentials;
  RespLimits limits;
  // Where the server registers kvstore_resp_* and the tcp request series
  // (not owned; must outlive the server). Null: a private registry.
  metrics::Registry* registry = nullptr;
  // Cluster mode: who serves which slot (not owned; must outlive the
  // server). Keyed commands are routed through it and the CLUSTER commands
  // answer from it (cluster_routing.h, cluster_commands.h). Null: single-node
  // mode, every key served here and CLUSTER refused as Redis does.
  const ClusterState* cluster = nullptr;
  // RESP over TLS (tls_front.h): -1 off, 0 a free port, N that port, on
  // bind_address. Requires tls_context.
  int tls_port = -1;
  // The TLS port's certificates (not owned; must outlive the server).
  tls::ReloadingServerContext* tls_context = nullptr;
  // false: no plaintext listener at all (`port` is ignored); only the TLS
  // port serves. Requires tls_port >= 0.
  bool plaintext = true;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_RESP_OPTIONS_H_
