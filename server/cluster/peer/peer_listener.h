// Copyright 2026 The kvstore Authors.
//
// PeerListener: the listening end of peer sockets (peer_socket.h), the
// port kvserver's --replication_port names. It accepts TCP connections,
// reads each one's hello within hello_timeout, admits it only when it
// shows the cluster secret (compared in constant time) and names a purpose
// a handler was given for, answers the welcome, and then runs that handler
// on a thread of the connection's own for as long as it lasts.
//
// Why a thread per connection: a connection is one replication stream
// (one per shard and primary), so there are few, and each one's writes
// must be installed in order; an install may wait (for pool space, up to
// the write's deadline) without holding up any other stream.
//
// Refusals (a wrong secret, an unknown purpose, a hello that is not one,
// or none in time) are answered with the reason when there is one, closed,
// counted in kvstore_peer_socket_refused_total and logged at most once
// per 10 s. Connections beyond max_connections are closed at once.
//
// Thread safety: Start and Stop from one thread. Handlers run on the
// connections' threads; Stop() shuts their sockets down (so their reads
// end) and joins them.

#ifndef KVSTORE_SERVER_CLUSTER_PEER_PEER_LISTENER_H_
#define KVSTORE_SERVER_CLUSTER_PEER_PEER_LISTENER_H_

#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "server/cluster/peer/peer_socket.h"

namespace kvstore {
namespace server {

struct PeerListenerOptions {
  std::string bind_address = "127.0.0.1";
  int port = 0;  // 0 picks a free port
  // The cluster secret every caller must show. Must not be empty.
  std::string secret;
  absl::Duration hello_timeout = absl::Seconds(10);
  int max_connections = 256;
};

class PeerListener {
 public:
  // Serves one admitted connection until it ends: `fd` is a blocking
  // socket the listener closes afterwards; `reader` may hold bytes that
  // came after the hello; `peer` is the node id the hello gave.
  using Handler = std::function<void(int fd, FrameReader& reader, const std::string& peer)>;

  // Binds and starts accepting; `handlers` by hello purpose. `registry` is
  // not owned and must outlive the listener. kUnavailable when the port
  // cannot be bound, kInvalidArgument for an empty secret or an address
  // that is not IPv4.
  static absl::StatusOr<std::unique_ptr<PeerListener>> Start(
      PeerListenerOptions options, metrics::Registry* registry,
      absl::flat_hash_map<std::string, Handler> handlers);
  ~PeerListener();  // Stop()
  PeerListener(const PeerListener&) = delete;
  PeerListener& operator=(const PeerListener&) = delete;

  int port() const { return port_; }
  // Stops accepting, shuts every connection down and joins the threads
  // (a handler in an install finishes it first). Idempotent.
  void Stop();

 private:
  struct Conn {
    int fd = -1;
    bool done = false;
    std::thread thread;
  };
  PeerListener(PeerListenerOptions options, metrics::Registry* registry,
               absl::flat_hash_map<std::string, Handler> handlers);
  void AcceptLoop();
  void Serve(Conn* conn);
  // Joins the threads of connections that ended.
  void Reap();
  void Refused(const std::string& why);

  const PeerListenerOptions options_;
  const absl::flat_hash_map<std::string, Handler> handlers_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: Stop() wakes the accept loop
  int port_ = 0;
  metrics::Counter* accepted_;
  metrics::Counter* refused_;
  std::thread accept_thread_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::list<Conn> conns_ ABSL_GUARDED_BY(mu_);
  absl::Time last_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_PEER_PEER_LISTENER_H_
