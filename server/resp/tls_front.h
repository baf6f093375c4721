// Copyright 2026 The kvstore Authors.
//
// TlsFront: the RESP port over TLS (--resp_tls_port, as Redis's
// --tls-port). It accepts TLS connections on its own listening socket, and
// for each one makes a socketpair, hands the plaintext end to the RESP
// loops as if it had been accepted there (RespServer::Adopt), and runs the
// TLS handshake and then the pump (common/tls/tls_pump.h) on a thread of
// its own until either side closes. The loops, their limits, AUTH and
// every command stay exactly as on the plaintext port.
//
// Why a thread per connection and not TLS inside the event loops: the
// loops receive SET values straight into pool memory and send GET values
// from it with writev; with TLS those bytes must be decrypted/encrypted
// through buffers anyway, and a separate bridge leaves the loops untouched.
// The cost: one thread and one extra copy per TLS connection (see
// docs/performance.md); the connection count is bounded by max_connections
// (the RESP port's --resp_max_clients).
//
// Each accepted connection gets the certificate current at accept time
// (tls::ReloadingServerContext: renewed files, or Reload() on SIGHUP).
// A handshake not finished within handshake_timeout, or refused (a client
// without a certificate the client CA signed, plaintext, a client that does
// not trust our CA), closes the connection; refusals are counted in
// kvstore_resp_tls_handshake_failures_total.
//
// Thread safety: Start and Stop from one thread; the rest is internal.

#ifndef KVSTORE_SERVER_RESP_TLS_FRONT_H_
#define KVSTORE_SERVER_RESP_TLS_FRONT_H_

#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "common/tls/ssl_context.h"

namespace kvstore {
namespace server {

struct TlsFrontOptions {
  std::string bind_address = "127.0.0.1";
  int port = 0;  // 0 picks a free port
  // Connections at once; one more is closed before its handshake.
  int max_connections = 4096;
  absl::Duration handshake_timeout = absl::Seconds(10);
};

class TlsFront {
 public:
  // Takes a connected, blocking-or-not plaintext socket `fd`; from then on
  // the RESP loops own it (and close it). `tls_fd` is the client's TCP
  // socket, valid during the call only: for its addresses (CLIENT LIST).
  using Adopt = std::function<void(int fd, int tls_fd)>;

  // Binds and starts accepting. `context` and `registry` are not owned and
  // must outlive the front. kUnavailable when the port cannot be bound,
  // kInvalidArgument for an address that is not IPv4.
  static absl::StatusOr<std::unique_ptr<TlsFront>> Start(const TlsFrontOptions& options,
                                                         tls::ReloadingServerContext* context,
                                                         metrics::Registry* registry, Adopt adopt);
  ~TlsFront();
  TlsFront(const TlsFront&) = delete;
  TlsFront& operator=(const TlsFront&) = delete;

  int port() const { return port_; }
  // Stops accepting, ends every connection and joins the threads.
  // Idempotent.
  void Stop();

 private:
  struct Conn {
    int fd = -1;
    bool done = false;
    std::thread thread;
  };
  TlsFront(const TlsFrontOptions& options, tls::ReloadingServerContext* context,
           metrics::Registry* registry, Adopt adopt);
  void AcceptLoop();
  void Serve(Conn* conn);
  // Joins the threads of finished connections.
  void Reap() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TlsFrontOptions options_;
  tls::ReloadingServerContext* const context_;
  const Adopt adopt_;
  metrics::Counter* const handshake_failures_;
  metrics::Counter* const accepted_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: wakes the accept loop
  int port_ = 0;
  std::thread acceptor_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<Conn> conns_ ABSL_GUARDED_BY(mu_);
  bool stopped_ = false;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_TLS_FRONT_H_
