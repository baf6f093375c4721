// Copyright 2026 The kvstore Authors.
//
// RespLoop's watches: descriptors other layers lend it (net/fd_watch.h; the
// replication streams' sockets, whose backups' replies finish parked SETs),
// and serving them while the loop waits for a lock (ServeFor). Kept apart
// from resp_loop.cc, which serves connections.

#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "glog/logging.h"
#include "server/net/batch_scope.h"
#include "server/resp/resp_loop.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// A descriptor another layer lent us (the replication stream's socket).
bool RespLoop::Watch(std::shared_ptr<net::FdWatch> watch) {
  absl::MutexLock lock(&adopt_mu_);
  if (watching_closed_) return false;
  to_watch_.push_back(std::move(watch));
  uint64_t one = 1;
  (void)!write(adopt_fd_, &one, sizeof(one));
  return true;
}

void RespLoop::AddQueuedWatches() {
  std::vector<std::shared_ptr<net::FdWatch>> watches;
  {
    absl::MutexLock lock(&adopt_mu_);
    watches.swap(to_watch_);
  }
  for (std::shared_ptr<net::FdWatch>& w : watches) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = w->fd();
    if (watches_.count(w->fd()) != 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, w->fd(), &ev) != 0) {
      LOG(WARNING) << "cannot watch descriptor " << w->fd() << ": " << std::strerror(errno);
      w->OnUnwatched();
      continue;
    }
    watches_[w->fd()] = std::move(w);
  }
}

bool RespLoop::OnWatched(int fd) {
  auto it = watches_.find(fd);
  if (it == watches_.end()) return false;
  if (!it->second->OnReadable()) {
    // Looked up again: OnReadable() may have run code that watched more.
    it = watches_.find(fd);
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    watches_.erase(it);
  }
  return true;
}

void RespLoop::Unwatch() {
  std::vector<std::shared_ptr<net::FdWatch>> queued;
  {
    absl::MutexLock lock(&adopt_mu_);
    watching_closed_ = true;
    queued.swap(to_watch_);
  }
  for (auto& [fd, w] : watches_) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    w->OnUnwatched();
  }
  watches_.clear();
  for (auto& w : queued) w->OnUnwatched();
}

// Why: a write this loop runs itself (DEL, INCR, MSET, SET with options)
// takes its key's locks, and the holder may be a SET parked from another
// connection of this loop, whose round ends only when its backup's reply
// is read, here. Sleeping on the lock would stall the loop until the
// replication timeout broke the stream (and failed the backup).
//
// Only the watches are served: connections are not (the one whose request
// waits is mid-command), and the Done of what the replies finish is queued
// for Run() (CommitPool::FinishedOnLoop). The writes this thread holds
// back for its batch (batch_scope.h) go first: the holder may be one.
void RespLoop::ServeFor(absl::Duration wait) {
  net::BatchScope::RunDeferred();
  AddQueuedWatches();  // a stream may have lent its socket since the last epoll_wait
  std::vector<pollfd> fds;
  fds.reserve(watches_.size());
  for (const auto& [fd, w] : watches_) fds.push_back(pollfd{fd, POLLIN | POLLRDHUP, 0});
  const int ms = static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(wait), 0, 1000));
  if (fds.empty()) {
    // Nothing to read here: the holder finishes elsewhere.
    absl::SleepFor(wait);
    return;
  }
  if (poll(fds.data(), fds.size(), ms) <= 0) return;
  for (const pollfd& p : fds) {
    if (p.revents != 0) OnWatched(p.fd);
  }
  counters_->lock_waits_served->Increment();
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
