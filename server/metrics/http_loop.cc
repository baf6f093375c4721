// Copyright 2026 The kvstore Authors.

#include "server/metrics/http_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/metrics/http_exchange.h"

namespace kvstore {
namespace metrics {
namespace http_internal {

namespace {

constexpr int kMaxEvents = 64;
// epoll data of the two descriptors that are not connections.
constexpr uint64_t kListenTag = ~uint64_t{0};
constexpr uint64_t kWakeTag = ~uint64_t{0} - 1;

}  // namespace

HttpLoop::HttpLoop(int listen_fd, const MetricsHttpOptions& options,
                   MetricsHttpServer::TextSource source)
    : listen_fd_(listen_fd),
      options_(options),
      source_(std::move(source)),
      refusal_delay_(std::min(options.refusal_delay, options.exchange_timeout / 2)) {}

HttpLoop::~HttpLoop() {
  for (Conn& c : conns_) close(c.fd);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
  close(listen_fd_);
}

absl::Status HttpLoop::Init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || event_fd_ < 0) {
    return absl::InternalError(
        absl::StrCat("metrics HTTP server: epoll/eventfd: ", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) != 0) {
    return absl::InternalError(
        absl::StrCat("metrics HTTP server: epoll_ctl: ", std::strerror(errno)));
  }
  ev.data.u64 = kWakeTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev);
  return absl::OkStatus();
}

// A failed write means a wake-up is already pending (counter overflow).
void HttpLoop::Wake() {
  const uint64_t one = 1;
  (void)!write(event_fd_, &one, sizeof(one));
}

MetricsHttpServer::Stats HttpLoop::stats() const {
  MetricsHttpServer::Stats s;
  s.accepted = accepted_.load();
  s.dropped_at_cap = dropped_at_cap_.load();
  s.timed_out = timed_out_.load();
  s.answered = answered_.load();
  s.refusals_delayed = refusals_delayed_.load();
  s.open = open_.load();
  return s;
}

void HttpLoop::Run() {
  epoll_event events[kMaxEvents];
  while (!stop_.load()) {
    const int n = epoll_wait(epoll_fd_, events, kMaxEvents, WaitMillis(absl::Now()));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kListenTag) {
        Accept();
        continue;
      }
      if (tag == kWakeTag) {
        stop_ = true;
        continue;
      }
      // Looked up, not cached: an earlier event of this batch (an accept at
      // the cap) may have closed this connection, and its descriptor number
      // may even be reused by a newer one, which then just gets a check.
      auto found = by_fd_.find(static_cast<int>(tag));
      if (found == by_fd_.end()) continue;
      const ConnList::iterator it = found->second;
      if (it->held) {
        Close(it);  // a held refusal is watched only for errors (a reset)
      } else if (it->out.empty()) {
        OnReadable(it);
      } else {
        OnWritable(it);
      }
    }
    const absl::Time now = absl::Now();
    ReleaseDue(now);
    ExpireOld(now);
  }
}

int HttpLoop::WaitMillis(absl::Time now) const {
  if (conns_.empty()) return 1000;
  absl::Time next = conns_.front().deadline;
  if (!delayed_.empty()) next = std::min(next, delayed_.front().due);
  const int64_t ms = absl::ToInt64Milliseconds(next - now) + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1000));
}

// Accepts until the backlog is empty. At the cap the oldest connection goes
// first; nothing waits in a queue of ours.
void HttpLoop::Accept() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // EAGAIN: drained. Out of descriptors: the next readiness event
      // retries; the cap keeps this endpoint's own share small, so the
      // shortage is someone else's and not worth a spin here.
      return;
    }
    accepted_.fetch_add(1);
    if (static_cast<int>(conns_.size()) >= options_.max_connections) {
      dropped_at_cap_.fetch_add(1);
      Close(conns_.begin());
    }
    Conn c;
    c.fd = fd;
    c.id = next_id_++;
    c.deadline = absl::Now() + options_.exchange_timeout;
    conns_.push_back(std::move(c));
    by_fd_[fd] = std::prev(conns_.end());
    open_.store(static_cast<int>(conns_.size()));
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = static_cast<uint64_t>(fd);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

// Reads no more than the head may take; once AnswerHttp decides, reading
// stops for good, whatever else the client sends (a body stays unread).
void HttpLoop::OnReadable(ConnList::iterator it) {
  Conn& c = *it;
  bool ended = false;  // EOF (the client may still read) or an error
  for (;;) {
    const size_t room = options_.max_head_bytes - c.in.size();
    if (room == 0) break;
    const size_t old = c.in.size();
    c.in.resize(old + room);
    const ssize_t n = recv(c.fd, &c.in[old], room, 0);
    c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    ended = true;
    break;
  }
  // A client that shut down its side after a whole request still gets the
  // answer; one that ended before a whole head gets nothing.
  std::optional<HttpAnswer> answer = AnswerHttp(c.in, options_.max_head_bytes, source_);
  if (!answer.has_value()) {
    if (ended) Close(it);
    return;
  }
  c.out = std::move(answer->bytes);
  std::string().swap(c.in);
  if (answer->status != 200 && refusal_delay_ > absl::ZeroDuration()) {
    // Held: no longer read (a body stays unread) and written by
    // ReleaseDue(). Only errors are watched (epoll always reports them): a
    // client that half-closed may still read its answer.
    c.held = true;
    delayed_.push_back(Delayed{c.fd, c.id, absl::Now() + refusal_delay_});
    refusals_delayed_.fetch_add(1);
    epoll_event ev{};
    ev.events = 0;
    ev.data.u64 = static_cast<uint64_t>(c.fd);
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.u64 = static_cast<uint64_t>(c.fd);
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  // Most answers fit the socket buffer: try at once.
  OnWritable(it);
}

void HttpLoop::OnWritable(ConnList::iterator it) {
  Conn& c = *it;
  while (c.sent < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Close(it);  // the client went away
    return;
  }
  answered_.fetch_add(1);
  // FIN after the answer. Unread bytes (a refused body) make close() send a
  // reset instead, which a client that waits for the answer before sending
  // its body never sees.
  shutdown(c.fd, SHUT_WR);
  Close(it);
}

void HttpLoop::ReleaseDue(absl::Time now) {
  while (!delayed_.empty() && delayed_.front().due <= now) {
    const Delayed d = delayed_.front();
    delayed_.pop_front();
    auto found = by_fd_.find(d.fd);
    // Closed meanwhile (hang-up, cap, deadline), maybe with its number
    // reused by a newer connection.
    if (found == by_fd_.end() || found->second->id != d.id) continue;
    const ConnList::iterator it = found->second;
    it->held = false;
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u64 = static_cast<uint64_t>(it->fd);
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, it->fd, &ev);
    OnWritable(it);
  }
}

void HttpLoop::ExpireOld(absl::Time now) {
  while (!conns_.empty() && conns_.front().deadline <= now) {
    timed_out_.fetch_add(1);
    Close(conns_.begin());
  }
}

void HttpLoop::Close(ConnList::iterator it) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->fd, nullptr);
  close(it->fd);
  by_fd_.erase(it->fd);
  conns_.erase(it);
  open_.store(static_cast<int>(conns_.size()));
}

}  // namespace http_internal
}  // namespace metrics
}  // namespace kvstore
