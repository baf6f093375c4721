// Copyright 2026 The kvstore Authors.

#include "tests/testing/counting_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace kvstore {
namespace testing {

namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace

CountingRelay::CountingRelay(int target_port) : target_port_(target_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = Loopback(0);
  socklen_t len = sizeof(a);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(listen_fd_, 64) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::cerr << "CountingRelay: cannot listen: " << std::strerror(errno) << "\n";
    std::abort();
  }
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

CountingRelay::~CountingRelay() {
  stop_ = true;
  // shutdown() wakes the blocked accept() and recv() calls; the descriptors
  // are closed only once no thread can still use them.
  shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  std::vector<std::thread> pumps;
  {
    absl::MutexLock lock(&mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    pumps.swap(pumps_);
  }
  for (std::thread& t : pumps) t.join();
  absl::MutexLock lock(&mu_);
  for (int fd : fds_) close(fd);
  close(listen_fd_);
}

void CountingRelay::AcceptLoop() {
  while (!stop_) {
    int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR) continue;
      return;
    }
    int target = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = Loopback(target_port_);
    if (target < 0 || connect(target, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(client);
      if (target >= 0) close(target);
      continue;
    }
    absl::MutexLock lock(&mu_);
    fds_.push_back(client);
    fds_.push_back(target);
    pumps_.emplace_back([this, client, target] { Pump(client, target, true); });
    pumps_.emplace_back([this, client, target] { Pump(target, client, false); });
  }
}

void CountingRelay::Pump(int from, int to, bool count) {
  char buf[64 << 10];
  for (;;) {
    ssize_t n = recv(from, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    // Counted once the target's kernel took it, so the count is what the
    // target let in, not what the client offered.
    for (ssize_t off = 0; off < n;) {
      ssize_t w = send(to, buf + off, n - off, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        n = -1;
        break;
      }
      off += w;
      if (count) client_bytes_ += static_cast<uint64_t>(w);
    }
    if (n < 0) break;
  }
  // Either side ending ends the relayed connection.
  shutdown(from, SHUT_RDWR);
  shutdown(to, SHUT_RDWR);
}

}  // namespace testing
}  // namespace kvstore
