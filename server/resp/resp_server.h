// Copyright 2026 The kvstore Authors.
//
// RespServer (the TCP fallback listener): the RESP2 data port. A fixed set of
// epoll event loops, each with its own SO_REUSEPORT listening socket, so the
// kernel spreads connections across loops; no thread per connection.
//
// Zero copy where it matters: a SET's value is received straight into a pool
// entry reserved for it (bytes already buffered with the request are copied
// once) and committed through KvStore::Commit, the same path as RDMA commits;
// a GET's reply is written from pool memory with writev while the entry is
// pinned.
//
// Defensive: every length is checked before anything is allocated; a
// malformed request gets a RESP error and its connection is closed without
// affecting others; idle connections and half-sent requests time out.
//
// Thread safety: Start/Stop from one thread; counters() from any.

#ifndef KVSTORE_SERVER_RESP_RESP_SERVER_H_
#define KVSTORE_SERVER_RESP_RESP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/storage/kv_store.h"

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
  // Text for INFO (the server's own sections); called per INFO request.
  std::function<std::string()> info;
};

struct RespServerCounters {
  uint64_t connections_accepted = 0;
  uint64_t connections_active = 0;
  uint64_t commands = 0;
  uint64_t gets = 0;
  uint64_t sets = 0;
  uint64_t protocol_errors = 0;
  uint64_t timeouts = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

class RespServer {
 public:
  static absl::StatusOr<std::unique_ptr<RespServer>> Start(KvStore* store,
                                                           const RespServerOptions& options);
  ~RespServer();
  RespServer(const RespServer&) = delete;
  RespServer& operator=(const RespServer&) = delete;

  // The bound port (useful with port 0).
  int port() const { return port_; }
  void Stop();
  RespServerCounters counters() const;

  class Loop;  // one epoll event loop (resp_server.cc)

 private:
  RespServer(KvStore* store, const RespServerOptions& options);

  KvStore* const store_;
  const RespServerOptions options_;
  int port_ = 0;
  int listen_fd_ = -1;
  struct Counters;  // shared by the loops (resp_server.cc)
  std::unique_ptr<Counters> counters_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_RESP_SERVER_H_
