// Copyright 2026 The kvstore Authors.

#include "server/resp/resp_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/sync/thread_name.h"
#include "server/resp/client_registry.h"
#include "server/resp/limits.h"
#include "server/resp/resp_counters.h"
#include "server/resp/resp_loop.h"
#include "server/resp/tls_front.h"

namespace kvstore {
namespace server {

namespace {

using resp_internal::Counters;
using resp_internal::RespLoop;

// A non-blocking IPv4 listening socket on address:port.
absl::StatusOr<int> Listen(const std::string& address, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  // SO_REUSEADDR only: a restarted server can rebind at once, but a second
  // server on the same port fails instead of silently sharing it.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", address));
  }
  // Backlog 1024: benchmarks and pools open many connections at once, and
  // the loops accept in bursts.
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1024) != 0) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("bind/listen on ", address, ":", port, ": ", std::strerror(errno)));
    close(fd);
    return s;
  }
  return fd;
}

// The port actually bound (the kernel's pick for port 0).
int BoundPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

}  // namespace

// Private: Start() is the only way to get a server, so a RespServer always
// has its socket bound and its loops running.
RespServer::RespServer(KvStore* store, const RespServerOptions& options)
    : store_(store), options_(options) {}

absl::StatusOr<std::unique_ptr<RespServer>> RespServer::Start(KvStore* store,
                                                              const RespServerOptions& options) {
  if (options.threads < 1) return absl::InvalidArgumentError("--resp_threads must be at least 1");
  // `new`, not make_unique: the constructor is private.
  absl::StatusOr<auth::Identities> ids = auth::Identities::Build(options.credentials);
  if (!ids.ok()) return ids.status();
  std::unique_ptr<RespServer> server(new RespServer(store, options));
  server->ids_ = std::make_unique<auth::Identities>(*std::move(ids));
  // Counters first: the loops hold a pointer to them.
  if (options.registry == nullptr) server->own_registry_ = std::make_unique<metrics::Registry>();
  server->registry_ = options.registry != nullptr ? options.registry : server->own_registry_.get();
  server->counters_ = std::make_unique<Counters>(server->registry_);
  Counters* counters = server->counters_.get();
  server->budgets_ = std::make_unique<resp_internal::SharedBudgets>(
      options.limits.max_clients > 0 ? static_cast<uint64_t>(options.limits.max_clients) : 0,
      options.limits.max_inflight_set_bytes);
  if (options.tls_port >= 0 && options.tls_context == nullptr) {
    return absl::InvalidArgumentError("a RESP TLS port needs certificates (--tls_cert, --tls_key)");
  }
  if (!options.plaintext && options.tls_port < 0) {
    return absl::InvalidArgumentError("the RESP port must be plaintext, TLS or both");
  }
  // One listening socket shared by every loop (EPOLLEXCLUSIVE wakes one
  // loop per connection), owned by the server.
  int listen_fd = -1;
  server->port_ = -1;
  if (options.plaintext) {
    auto fd = Listen(options.bind_address, options.port);
    if (!fd.ok()) return fd.status();
    listen_fd = *fd;
    server->listen_fd_ = *fd;
    // With port 0 the kernel picked one; callers (tests, --ready_file) need it.
    server->port_ = BoundPort(*fd);
  }
  server->clients_ = std::make_unique<resp_internal::ClientRegistry>();
  // Every loop is initialised before any runs, so a failure leaves no
  // thread to stop.
  for (int i = 0; i < options.threads; ++i) {
    auto loop =
        std::make_unique<RespLoop>(store, server->options_, server->ids_.get(), counters,
                                   server->budgets_.get(), listen_fd, server->clients_.get());
    if (absl::Status s = loop->Init(); !s.ok()) return s;
    server->loops_.push_back(std::move(loop));
  }
  // The loops read server->options_, which lives as long as they do.
  for (auto& loop : server->loops_) {
    server->threads_.emplace_back([l = loop.get()] {
      NameThread("kv-resp-loop");
      l->Run();
    });
  }
  if (options.tls_port >= 0) {
    TlsFrontOptions to;
    to.bind_address = options.bind_address;
    to.port = options.tls_port;
    to.max_connections = options.limits.max_clients > 0 ? options.limits.max_clients : 1 << 30;
    RespServer* self = server.get();
    // TLS connections are spread over the loops in turn.
    // The addresses are the TLS client's, read while its socket is open.
    auto adopt = [self, next = std::make_shared<std::atomic<size_t>>(0)](int fd, int tls_fd) {
      self->loops_[next->fetch_add(1) % self->loops_.size()]->Adopt(
          fd, resp_internal::SocketAddress(tls_fd, /*peer=*/true),
          resp_internal::SocketAddress(tls_fd, /*peer=*/false));
    };
    auto front = TlsFront::Start(to, options.tls_context, server->registry_, std::move(adopt));
    if (!front.ok()) return front.status();
    server->tls_ = *std::move(front);
  }
  return server;
}

// Wake every loop, then join: a loop drops its connections (and their
// pinned replies and reservations) when destroyed, after its thread ended.
int RespServer::tls_port() const { return tls_ != nullptr ? tls_->port() : -1; }

void RespServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // No new adoption once the loops are going.
  if (tls_ != nullptr) tls_->Stop();
  for (auto& loop : loops_) loop->Wake();
  for (auto& t : threads_) t.join();
  threads_.clear();
  absl::MutexLock lock(&loops_mu_);
  loops_.clear();
}

bool RespServer::Watch(std::shared_ptr<net::FdWatch> watch) {
  absl::MutexLock lock(&loops_mu_);
  if (loops_.empty()) return false;
  const size_t i = next_watch_loop_.fetch_add(1, std::memory_order_relaxed) % loops_.size();
  return loops_[i]->Watch(std::move(watch));
}

// The socket is closed last, after no loop can accept from it any more.
RespServer::~RespServer() {
  Stop();
  if (listen_fd_ >= 0) close(listen_fd_);
}

}  // namespace server
}  // namespace kvstore
