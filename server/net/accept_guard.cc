// Copyright 2026 The kvstore Authors.

#include "server/net/accept_guard.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/time/clock.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {
namespace net {

namespace {

// How many pending connections one call may accept and close before it
// reports EAGAIN (a flood must not keep one gRPC poller thread forever).
constexpr int kMaxShedPerCall = 1024;

// How many ports are guarded: with none, accept4 costs one atomic load more
// than the C library's.
std::atomic<int> guarded_ports{0};

int RawAccept4(int fd, sockaddr* addr, socklen_t* addr_len, int flags) {
  return static_cast<int>(syscall(SYS_accept4, fd, addr, addr_len, flags));
}

int LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

ino_t InodeOf(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) ? st.st_ino : 0;
}

}  // namespace

AcceptGuard& AcceptGuard::Get() {
  static AcceptGuard* guard = new AcceptGuard();
  return *guard;
}

bool AcceptGuard::Interposed() {
  // The first accept4 in the global lookup order is the one every shared
  // library binds to: it must be the one defined below.
  return dlsym(RTLD_DEFAULT, "accept4") == reinterpret_cast<void*>(&accept4);
}

void AcceptGuard::LimitPort(int port, int max_connections) {
  CHECK_GE(max_connections, 1);
  absl::MutexLock lock(&mu_);
  if (reserve_fd_ < 0) reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto [it, inserted] = ports_.try_emplace(port);
  it->second.max_connections = max_connections;
  if (inserted) guarded_ports.fetch_add(1, std::memory_order_release);
}

void AcceptGuard::ForgetPort(int port) {
  absl::MutexLock lock(&mu_);
  if (ports_.erase(port) > 0) guarded_ports.fetch_sub(1, std::memory_order_release);
}

GuardedPortStats AcceptGuard::Stats(int port) {
  absl::MutexLock lock(&mu_);
  auto it = ports_.find(port);
  if (it == ports_.end()) return GuardedPortStats();
  Prune(&it->second.open);
  GuardedPortStats s = it->second.stats;
  s.open = it->second.open.size();
  return s;
}

void AcceptGuard::Prune(std::vector<Conn>* open) {
  std::vector<Conn> kept;
  kept.reserve(open->size());
  for (const Conn& c : *open) {
    // A closed descriptor fails fstat; a reused one names another inode
    // (socket inodes are not reused while the old socket may be open).
    if (c.ino != 0 && InodeOf(c.fd) == c.ino) kept.push_back(c);
  }
  open->swap(kept);
}

bool AcceptGuard::ShedWithReserve(int listen_fd) {
  if (reserve_fd_ < 0) reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (reserve_fd_ < 0) return false;
  close(reserve_fd_);
  // Another thread may take the freed slot first; then nothing is shed.
  const int fd = RawAccept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) close(fd);
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd >= 0;
}

void AcceptGuard::LogRateLimited(int port, int err) {
  const absl::Time now = absl::Now();
  if (now - last_log_ < absl::Seconds(10)) {
    ++unlogged_;
    return;
  }
  LOG(WARNING) << "accept4 on port " << port << ": " << std::strerror(err)
               << "; pending connections are closed and the listener stays armed (" << unlogged_
               << " more since the last report; logged at most every 10 s)";
  last_log_ = now;
  unlogged_ = 0;
}

int AcceptGuard::Accept4(int listen_fd, sockaddr* addr, socklen_t* addr_len, int flags) {
  if (guarded_ports.load(std::memory_order_acquire) == 0) {
    return RawAccept4(listen_fd, addr, addr_len, flags);
  }
  const int port = LocalPort(listen_fd);
  bool guarded;
  {
    absl::MutexLock lock(&mu_);
    guarded = port > 0 && ports_.contains(port);
  }
  // Never under mu_: a blocking listener's accept waits for a connection.
  if (!guarded) return RawAccept4(listen_fd, addr, addr_len, flags);
  for (int round = 0; round < kMaxShedPerCall; ++round) {
    const int fd = RawAccept4(listen_fd, addr, addr_len, flags);
    const int err = errno;
    absl::MutexLock lock(&mu_);
    auto it = ports_.find(port);
    if (it == ports_.end()) {  // forgotten meanwhile: no longer ours to judge
      errno = err;
      return fd;
    }
    Port& p = it->second;
    if (fd >= 0) {
      const size_t cap = static_cast<size_t>(p.max_connections);
      if (p.open.size() >= cap) Prune(&p.open);
      if (p.open.size() >= cap) {
        close(fd);
        ++p.stats.refused_at_cap;
        continue;
      }
      p.open.push_back(Conn{fd, InodeOf(fd)});
      return fd;
    }
    switch (err) {
      case EMFILE:
      case ENFILE:
        LogRateLimited(port, err);
        if (ShedWithReserve(listen_fd)) {
          ++p.stats.refused_no_fd;
          continue;
        }
        errno = EAGAIN;
        return -1;
      case ECONNABORTED:
      case EPROTO:
        // That one connection is gone; the next may be fine.
        ++p.stats.transient_errors;
        continue;
      case ENOBUFS:
      case ENOMEM:
      case EPERM:
        ++p.stats.transient_errors;
        LogRateLimited(port, err);
        errno = EAGAIN;
        return -1;
      default:
        // EAGAIN, EINTR, and the errors that mean the listener is gone.
        errno = err;
        return -1;
    }
  }
  errno = EAGAIN;
  return -1;
}

}  // namespace net
}  // namespace server
}  // namespace kvstore

// Takes precedence over the C library's accept4 for the whole process
// (accept_guard.h says why).
extern "C" int accept4(int fd, sockaddr* addr, socklen_t* addr_len, int flags) {
  return kvstore::server::net::AcceptGuard::Get().Accept4(fd, addr, addr_len, flags);
}
