// Copyright 2026 The kvstore Authors.

#include "server/cluster/peer/peer_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auth/token.h"
#include "common/grpc_status.h"
#include "common/sync/thread_name.h"
#include "glog/logging.h"
#include "proto/kv_cluster.pb.h"

namespace kvstore {
namespace server {

PeerListener::PeerListener(PeerListenerOptions options, metrics::Registry* registry,
                           absl::flat_hash_map<std::string, Handler> handlers)
    : options_(std::move(options)), handlers_(std::move(handlers)) {
  accepted_ = registry->AddCounter("kvstore_peer_socket_accepted_total",
                                   "Peer socket connections admitted (--replication_port).");
  refused_ = registry->AddCounter("kvstore_peer_socket_refused_total",
                                  "Peer socket connections refused: wrong secret, unknown "
                                  "purpose, no hello in time, or too many connections.");
}

absl::StatusOr<std::unique_ptr<PeerListener>> PeerListener::Start(
    PeerListenerOptions options, metrics::Registry* registry,
    absl::flat_hash_map<std::string, Handler> handlers) {
  if (options.secret.empty()) {
    return absl::InvalidArgumentError("the peer socket needs the cluster secret");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  if (inet_pton(AF_INET, options.bind_address.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", options.bind_address));
  }
  std::unique_ptr<PeerListener> l(
      new PeerListener(std::move(options), registry, std::move(handlers)));
  l->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  l->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (l->listen_fd_ < 0 || l->stop_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("peer socket: ", strerror(errno)));
  }
  const int one = 1;
  setsockopt(l->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(l->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(l->listen_fd_, 128) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for peers on ",
                                               l->options_.bind_address, ":", l->options_.port,
                                               " (--replication_port): ", strerror(errno)));
  }
  socklen_t len = sizeof(addr);
  getsockname(l->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  l->port_ = ntohs(addr.sin_port);
  l->accept_thread_ = std::thread([p = l.get()] {
    NameThread("kv-peer-accept");
    p->AcceptLoop();
  });
  return l;
}

PeerListener::~PeerListener() {
  Stop();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void PeerListener::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    // Reads and sends in progress end; the handlers return.
    for (Conn& c : conns_) shutdown(c.fd, SHUT_RDWR);
  }
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof(one));
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<Conn> conns;
  {
    absl::MutexLock lock(&mu_);
    conns.swap(conns_);
  }
  for (Conn& c : conns) c.thread.join();
}

void PeerListener::Refused(const std::string& why) {
  refused_->Increment();
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (now - last_log_ < absl::Seconds(10)) return;
  last_log_ = now;
  LOG(WARNING) << "peer socket refused: " << why;
}

void PeerListener::Reap() {
  std::list<Conn> ended;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      auto next = std::next(it);
      if (it->done) ended.splice(ended.end(), conns_, it);
      it = next;
    }
  }
  for (Conn& c : ended) c.thread.join();
}

void PeerListener::AcceptLoop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) {
      LOG(ERROR) << "peer socket: poll: " << strerror(errno);
      return;
    }
    if ((p[1].revents & POLLIN) != 0) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors and the like: wait a little rather than spin.
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
        Refused(absl::StrCat("accept: ", strerror(errno)));
        poll(p + 1, 1, 100);
      }
      continue;
    }
    Reap();
    bool full;
    {
      absl::MutexLock lock(&mu_);
      full = stopping_ || conns_.size() >= static_cast<size_t>(options_.max_connections);
      if (!full) {
        conns_.emplace_back();
        Conn* c = &conns_.back();
        c->fd = fd;
        c->thread = std::thread([this, c] {
          NameThread("kv-peer-conn");
          Serve(c);
        });
      }
    }
    if (full) {
      close(fd);
      Refused("too many peer connections");
    }
  }
}

void PeerListener::Serve(Conn* conn) {
  const int fd = conn->fd;
  TunePeerSocket(fd);
  FrameReader reader;
  v1::PeerSocketHello hello;
  absl::Status admitted = ReadFrame(fd, reader, &hello, absl::Now() + options_.hello_timeout);
  const Handler* handler = nullptr;
  if (admitted.ok() && !auth::TokenEquals(options_.secret, hello.secret())) {
    admitted = absl::UnauthenticatedError("wrong cluster secret");
  }
  if (admitted.ok()) {
    auto it = handlers_.find(hello.purpose());
    if (it == handlers_.end()) {
      admitted = absl::InvalidArgumentError(
          absl::StrCat("no peer socket service '", hello.purpose().substr(0, 64), "'"));
    } else {
      handler = &it->second;
    }
  }
  v1::PeerSocketWelcome welcome;
  if (!admitted.ok()) welcome.set_status(StatusToBytes(admitted));
  std::string out;
  AppendFrame(welcome, &out);
  // Best effort for a refusal: the caller may be gone already.
  const absl::Status sent = SendAll(fd, out, absl::Now() + options_.hello_timeout);
  if (!admitted.ok()) {
    Refused(absl::StrCat(admitted.ToString(), " (from ", hello.node_id().substr(0, 128), ")"));
  } else if (sent.ok()) {
    accepted_->Increment();
    // From here the handler's reads and sends block: one stream, one
    // thread; Stop() shuts the socket down to end them.
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    (*handler)(fd, reader, hello.node_id());
  }
  absl::MutexLock lock(&mu_);
  close(fd);
  conn->fd = -1;
  conn->done = true;
}

}  // namespace server
}  // namespace kvstore
