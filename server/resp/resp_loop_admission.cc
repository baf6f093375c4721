// Copyright 2026 The kvstore Authors.
//
// RespLoop, who gets in and who is thrown out: accepting connections, the
// two connection caps (max_clients for authenticated clients,
// max_unauthenticated_clients for the rest, with the oldest stranger
// dropped to make room), the move from one to the other at login, running
// out of file descriptors, closing what CLIENT KILL marked, and a streamed
// SET's start, which is where a SET without the right to write is turned
// away (its value skipped or the connection closed). Kept apart
// from resp_loop.cc, which moves bytes for connections already in.

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "glog/logging.h"
#include "server/resp/auth_commands.h"
#include "server/resp/commands.h"
#include "server/resp/resp_loop.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// Accepts until the backlog is empty. Several loops may be woken for the
// same burst; whichever accepts a connection owns it from then on.
void RespLoop::Accept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      AddConnection(fd);
      continue;
    }
    // EAGAIN: drained (or another loop took it).
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    // A connection reset while in the backlog, or a signal: try the next.
    if (errno == EINTR || errno == ECONNABORTED) continue;
    OnAcceptError(errno);
    return;
  }
}

// A connection whose TLS another thread terminates (RespServer's TLS
// front) arrives as a socket of its own, handed over from that thread.
void RespLoop::Adopt(int fd, std::string addr, std::string laddr) {
  absl::MutexLock lock(&adopt_mu_);
  adopted_.push_back(Adopted{fd, std::move(addr), std::move(laddr)});
  uint64_t one = 1;
  (void)!write(adopt_fd_, &one, sizeof(one));
}

void RespLoop::TakeAdopted() {
  uint64_t count;
  (void)!read(adopt_fd_, &count, sizeof(count));
  std::vector<Adopted> fds;
  {
    absl::MutexLock lock(&adopt_mu_);
    fds.swap(adopted_);
  }
  for (Adopted& a : fds) AddConnection(a.fd, std::move(a.addr), std::move(a.laddr));
  AddQueuedWatches();  // resp_loop_watches.cc
}

// The marks are set by any loop's CLIENT KILL (client_registry.h); this
// loop alone may close its connections. Collected first: Close() erases
// from the map being walked.
void RespLoop::CloseKilled() {
  uint64_t count;
  (void)!read(kill_fd_, &count, sizeof(count));
  std::vector<Connection*> killed;
  for (auto& [fd, c] : conns_) {
    const ClientEntry* e = c->client.get();
    if (e != nullptr && e->kill_requested.load(std::memory_order_relaxed))
      killed.push_back(c.get());
  }
  for (Connection* c : killed) Close(c);
}

void RespLoop::AddConnection(int fd, std::string addr, std::string laddr) {
  // With a password a new connection is unauthenticated: it counts against
  // this loop's unauthenticated cap (making room there if need be), not
  // max_clients, so strangers cannot take the slots of clients that log in.
  const bool needs_auth = ids_ != nullptr && !ids_->open();
  if (needs_auth) {
    if (unauth_.size() >= unauth_cap_) DropOldestUnauthenticated();
  } else if (!budgets_->clients.TryTake(1)) {
    // Redis's text; best effort, the socket is new so its buffer is empty.
    static constexpr char kFull[] = "-ERR max number of clients reached\r\n";
    (void)!send(fd, kFull, sizeof(kFull) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    counters_->limit_max_clients->Increment();
    return;
  }
  int one = 1;
  // Replies are small and pipelined; Nagle would only add latency.
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto c = std::make_unique<Connection>(fd);
  c->serial = ++next_serial_;
  c->last_activity = LoopTime(store_->clock());
  c->accepted_at = c->last_activity;
  if (clients_ != nullptr) {
    c->client = clients_->Register(fd, c->accepted_at, kill_fd_, std::move(addr), std::move(laddr));
  }
  // Without users every connection is an admin (Connection's default);
  // with them it is nobody until AUTH names one.
  c->authenticated = !needs_auth;
  if (needs_auth) {
    c->role = auth::Role::kRead;
    c->unauth_pos = unauth_.insert(unauth_.end(), c.get());
    c->in_unauth_list = true;
  }
  epoll_event ev{};
  // Level-triggered; EPOLLRDHUP reports a peer that shut down its side
  // even while reading is paused.
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  c->epoll_events = ev.events;
  conns_[fd] = std::move(c);
  counters_->accepted->Increment();
  counters_->active->Add(1);
}

// The oldest is the one that has had the longest to log in; a client with
// the password sends AUTH at once, so it is rarely the oldest for long.
void RespLoop::DropOldestUnauthenticated() {
  Connection* oldest = unauth_.front();
  counters_->limit_unauthenticated->Increment();
  static constexpr char kDropped[] =
      "-ERR closing connection: not authenticated, and newer connections need the room "
      "(resp_max_unauthenticated_clients)\r\n";
  (void)!send(oldest->fd, kDropped, sizeof(kDropped) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  Close(oldest);
}

// The failed connection stays in the backlog, so the level-triggered
// listener would wake this loop again at once: a busy spin logging at MB/s.
// Out of descriptors, the reserve one is given up to accept the connection
// and refuse it with an error (the client learns why instead of hanging);
// in every case the listener is then paused for a moment.
void RespLoop::OnAcceptError(int err) {
  counters_->accept_errors->Increment();
  const absl::Time now = absl::Now();
  if (now - last_accept_log_ >= absl::Seconds(10)) {
    LOG(WARNING) << "accept4 on the RESP port: " << std::strerror(err) << " ("
                 << accept_errors_unlogged_ << " more since the last report; logged at most "
                 << "every 10 s)";
    last_accept_log_ = now;
    accept_errors_unlogged_ = 0;
  } else {
    ++accept_errors_unlogged_;
  }
  if ((err == EMFILE || err == ENFILE) && reserve_fd_ >= 0) {
    close(reserve_fd_);
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      static constexpr char kNoFd[] =
          "-ERR max number of clients reached (server out of file descriptors)\r\n";
      (void)!send(fd, kNoFd, sizeof(kNoFd) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      close(fd);
      counters_->limit_max_clients->Increment();
    }
    reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  PauseListener();
}

// EPOLLEXCLUSIVE registrations cannot be modified, only removed and added.
void RespLoop::PauseListener() {
  if (listener_paused_) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  listener_paused_ = true;
  listener_resume_ = absl::Now() + absl::Milliseconds(100);
}

void RespLoop::MaybeResumeListener(absl::Time now) {
  if (now < listener_resume_) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  listener_paused_ = false;
}

// The slot is taken before the password is checked, so that a client that
// logs in never finds itself authenticated without one.
void RespLoop::ExecuteLogin(Connection* c, const resp::ParsedRequest& req) {
  if (!budgets_->clients.TryTake(1)) {
    counters_->limit_max_clients->Increment();
    c->ReplyError("ERR max number of clients reached");
    c->close_after_flush = true;
    c->reading = false;
    return;
  }
  const CommandContext ctx{store_, writer_.get(), &options_, counters_, c, ids_};
  DispatchCommand(ctx, req.args);
  if (!c->authenticated) {
    budgets_->clients.Give(1);
    return;
  }
  unauth_.erase(c->unauth_pos);
  c->in_unauth_list = false;
}

// Before AUTH a SET is refused like any command; its value is skipped if
// small, and the connection closed if not (no reading megabytes for a
// client that has not logged in).
void RespLoop::BeginSet(Connection* c, absl::string_view key, uint64_t value_len,
                        const layout::KeyHash* key_hash) {
  if (c->authenticated && auth::Allows(c->role, auth::Permission::kWrite)) {
    sets_->Begin(c, key, value_len, key_hash);
    return;
  }
  if (c->authenticated) {
    // A read-only user: refused as the command table refuses any write,
    // and the value skipped (it is within the authenticated limits).
    const CommandContext ctx{store_, writer_.get(), &options_, counters_, c, ids_};
    RequirePermission(ctx, auth::Permission::kWrite, "set");
    c->state = InputState::kDiscard;
    c->discard_left = value_len + 2;
    return;
  }
  counters_->noauth->Increment();
  c->ReplyError(kNoAuthError);
  if (value_len > unauth_limits_.max_bulk_bytes) {
    c->close_after_flush = true;
    c->reading = false;
    return;
  }
  c->state = InputState::kDiscard;
  c->discard_left = value_len + 2;
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
