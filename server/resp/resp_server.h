// Copyright 2026 The kvstore Authors.
//
// RespServer (the TCP fallback listener): the RESP data port (RESP2, RESP3
// after HELLO 3, inline commands). One listening
// socket, owned by the server, shared by a fixed set of epoll event loops
// (options.threads, one thread each). Every loop registers the socket with
// EPOLLEXCLUSIVE, so the kernel wakes one waiting loop per incoming
// connection; the loop that accepts a connection serves it until it closes.
// No thread per connection. (Not SO_REUSEPORT: the socket sets SO_REUSEADDR
// only, so a second server on the same port fails to bind instead of
// silently sharing it.)
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
// Files: resp_loop (event loop, socket I/O), commands (the command table),
// streamed_set (SET into pool memory), connection (per-socket state and
// reply encoding), client_registry (every connection of the port, for
// CLIENT); this file only owns the socket, the registry and the loops.
//
// Thread safety: Start/Stop from one thread; counters() from any.

#ifndef KVSTORE_SERVER_RESP_RESP_SERVER_H_
#define KVSTORE_SERVER_RESP_RESP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/net/fd_watch.h"
#include "server/resp/resp_options.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

namespace resp_internal {
class ClientRegistry;  // client_registry.h
class RespLoop;        // resp_loop.h
struct Counters;       // resp_counters.h
struct SharedBudgets;  // limits.h
}  // namespace resp_internal

class TlsFront;  // tls_front.h

class RespServer final : public net::FdWatcher {
 public:
  // Binds options.bind_address:options.port (unless !options.plaintext)
  // and options.tls_port (when >= 0), and starts the loops. Errors:
  // InvalidArgument for threads < 1, an address that is not IPv4, a TLS
  // port without a context or no port at all,
  // Unavailable if the port cannot be bound, Internal if epoll is refused.
  // `store` is not owned and must outlive the server.
  static absl::StatusOr<std::unique_ptr<RespServer>> Start(KvStore* store,
                                                           const RespServerOptions& options);
  // Stops the loops (closing every connection) and the listening socket.
  ~RespServer() override;
  RespServer(const RespServer&) = delete;
  RespServer& operator=(const RespServer&) = delete;

  // The bound port (useful with port 0); -1 without a plaintext listener.
  int port() const { return port_; }
  // The bound TLS port; -1 without one.
  int tls_port() const;
  // Stops and joins the loops, closing their connections (uncommitted
  // streamed SETs are dropped). Idempotent; the port stays bound until
  // destruction.
  void Stop();
  // The registry holding the server's series (options.registry or its own);
  // any thread, any time before destruction.
  const metrics::Registry& registry() const { return *registry_; }

  // net::FdWatcher: watches `watch` on one of the loops (in turn), which
  // runs it beside its connections; false once the loops stopped. Any
  // thread.
  bool Watch(std::shared_ptr<net::FdWatch> watch) override;

 private:
  RespServer(KvStore* store, const RespServerOptions& options);

  // Declared first: counters_ points into it, so it is destroyed last.
  std::unique_ptr<metrics::Registry> own_registry_;
  metrics::Registry* registry_ = nullptr;
  KvStore* const store_;
  const RespServerOptions options_;
  // The users options_.credentials name; the loops hold a pointer.
  std::unique_ptr<auth::Identities> ids_;
  int port_ = 0;
  int listen_fd_ = -1;
  std::unique_ptr<resp_internal::Counters> counters_;      // shared by the loops
  std::unique_ptr<resp_internal::SharedBudgets> budgets_;  // shared by the loops
  // Every connection of every loop (CLIENT LIST); before loops_, so that
  // it outlives the connections, which unregister when destroyed.
  std::unique_ptr<resp_internal::ClientRegistry> clients_;
  // Guards Stop()'s clearing of loops_ against Watch(), which any thread
  // may call while the loops run (the rest reads loops_ on the threads
  // Start() and Stop() order).
  absl::Mutex loops_mu_;
  std::vector<std::unique_ptr<resp_internal::RespLoop>> loops_;
  // The TLS port; stopped before the loops (its connections end first).
  std::unique_ptr<TlsFront> tls_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_watch_loop_{0};  // Watch()'s turn
  bool stopped_ = false;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_RESP_SERVER_H_
