// Copyright 2026 The kvstore Authors.

#include "server/resp/tls_front.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sync/thread_name.h"
#include "common/tls/tls_pump.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {

TlsFront::TlsFront(const TlsFrontOptions& options, tls::ReloadingServerContext* context,
                   metrics::Registry* registry, Adopt adopt)
    : options_(options),
      context_(context),
      adopt_(std::move(adopt)),
      handshake_failures_(registry->AddCounter(
          "kvstore_resp_tls_handshake_failures_total",
          "TLS handshakes on the RESP TLS port that failed or timed out (plaintext clients, "
          "certificates that do not verify).")),
      accepted_(registry->AddCounter("kvstore_resp_tls_connections_total",
                                     "Connections accepted on the RESP TLS port.")) {}

absl::StatusOr<std::unique_ptr<TlsFront>> TlsFront::Start(const TlsFrontOptions& options,
                                                          tls::ReloadingServerContext* context,
                                                          metrics::Registry* registry,
                                                          Adopt adopt) {
  std::unique_ptr<TlsFront> front(new TlsFront(options, context, registry, std::move(adopt)));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  front->listen_fd_ = fd;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  if (inet_pton(AF_INET, options.bind_address.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", options.bind_address));
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1024) != 0) {
    return absl::UnavailableError(absl::StrCat("bind/listen on ", options.bind_address, ":",
                                               options.port,
                                               " (RESP TLS): ", std::strerror(errno)));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  front->port_ = ntohs(addr.sin_port);
  front->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (front->stop_fd_ < 0) {
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  front->acceptor_ = std::thread([f = front.get()] {
    NameThread("kv-tls-accept");
    f->AcceptLoop();
  });
  return front;
}

TlsFront::~TlsFront() {
  Stop();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void TlsFront::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (acceptor_.joinable()) {
    uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof(one));
    acceptor_.join();
  }
  std::list<Conn> conns;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Wakes every pump (its poll sees the hang-up) and handshake.
    for (Conn& c : conns_) shutdown(c.fd, SHUT_RDWR);
    conns.swap(conns_);
  }
  for (Conn& c : conns) c.thread.join();
}

void TlsFront::Reap() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    it->thread.join();
    it = conns_.erase(it);
  }
}

void TlsFront::AcceptLoop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LOG(ERROR) << "RESP TLS: poll: " << std::strerror(errno);
      return;
    }
    if (p[1].revents != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: let some close instead of spinning.
        LOG_EVERY_N(WARNING, 100) << "RESP TLS: accept: " << std::strerror(errno);
        poll(nullptr, 0, 100);
      }
      continue;
    }
    absl::MutexLock lock(&mu_);
    Reap();
    if (stopping_ || active_ >= options_.max_connections) {
      close(fd);
      continue;
    }
    accepted_->Increment();
    ++active_;
    conns_.emplace_back();
    Conn* conn = &conns_.back();
    conn->fd = fd;
    conn->thread = std::thread([this, conn] {
      NameThread("kv-tls-conn");
      Serve(conn);
    });
  }
}

void TlsFront::Serve(Conn* conn) {
  const int fd = conn->fd;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  tls::SetNonBlocking(fd);
  tls::SslCtxPtr ctx = context_->Current();
  SSL* ssl = SSL_new(ctx.get());
  int pair[2] = {-1, -1};
  if (ssl != nullptr && SSL_set_fd(ssl, fd) == 1) {
    SSL_set_accept_state(ssl);
    absl::Status s = tls::Handshake(ssl, fd, absl::Now() + options_.handshake_timeout);
    if (!s.ok()) {
      handshake_failures_->Increment();
      VLOG(1) << "RESP TLS: " << s.message();
    } else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0) {
      // The loops own pair[0] from here; closing pair[1] tells them the
      // client is gone, and their close of pair[0] ends the pump.
      tls::SetNonBlocking(pair[0]);
      tls::SetNonBlocking(pair[1]);
      adopt_(pair[0], fd);
      s = tls::Pump(ssl, fd, pair[1]);
      VLOG_IF(1, !s.ok()) << "RESP TLS connection ended: " << s.message();
      close(pair[1]);
    }
  }
  if (ssl != nullptr) SSL_free(ssl);
  absl::MutexLock lock(&mu_);
  // Closed under the lock: Stop() shuts down only descriptors still open.
  close(fd);
  conn->fd = -1;
  conn->done = true;
  --active_;
}

}  // namespace server
}  // namespace kvstore
