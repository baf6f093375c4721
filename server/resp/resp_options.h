// Copyright 2026 The kvstore Authors.
//
// RespServerOptions: the RESP data port's settings. In a header of its own so
// the loop and the command table (internal to server/resp) can read them
// without depending on RespServer; users include resp_server.h.

#ifndef KVSTORE_SERVER_RESP_RESP_OPTIONS_H_
#define KVSTORE_SERVER_RESP_RESP_OPTIONS_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/metrics/registry.h"

namespace kvstore {
namespace server {

struct RespServerOptions {
  std::string bind_address = "127.0.0.1";
  int port = 6380;  // 0 picks a free port
  int threads = 2;
  // Close a connection with no traffic for this long (0: never).
  absl::Duration idle_timeout = absl::Minutes(5);
  // Close a connection whose request has been incomplete for this long.
  absl::Duration request_timeout = absl::Seconds(30);
  // Stop reading from a connection while this many reply bytes are queued.
  size_t max_pending_output = 8 << 20;
  // The whole INFO reply, # Keyspace included; called per INFO request, on
  // the loop thread that serves it, so it must be thread-safe. Empty: INFO
  // answers with just # Keyspace.
  std::function<std::string()> info;
  // requirepass: when non-empty a connection must AUTH (or HELLO ... AUTH)
  // with it before any other command is served (-NOAUTH otherwise).
  std::string password;
  // Where the server registers kvstore_resp_* and the tcp request series
  // (not owned; must outlive the server). Null: a private registry.
  metrics::Registry* registry = nullptr;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_RESP_OPTIONS_H_
