// Copyright 2026 The kvstore Authors.

#include "server/resp/resp_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "server/resp/commands.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr int kMaxIov = 64;
constexpr int kMaxEvents = 256;
// Reads per wakeup for one connection: several, but bounded so one client
// cannot starve the others on the loop.
constexpr int kReadRounds = 16;

}  // namespace

RespLoop::RespLoop(KvStore* store, const RespServerOptions& options, Counters* counters,
                   int listen_fd)
    : store_(store), options_(options), counters_(counters), listen_fd_(listen_fd) {
  // A bulk string is a key or a value; a request is at most one batch of
  // key/value pairs (MSET) plus its name; SET values are streamed, so the
  // buffered bytes are bounded by one value plus slack for the rest.
  limits_.max_bulk_bytes =
      std::max<uint64_t>(store->limits().max_value_bytes, store->limits().max_key_bytes);
  limits_.max_args = 2 * store->limits().max_batch_keys + 1;
  limits_.max_buffered_bytes = store->limits().max_value_bytes + (1 << 20);
}

// Runs after Run() has returned (RespServer joins the thread first), so no
// event can arrive while connections are torn down.
RespLoop::~RespLoop() {
  for (auto& [fd, c] : conns_) {
    if (sets_ != nullptr) sets_->Abandon(c.get());
    close(fd);
  }
  // Connections first: their queued replies pin entries the writer's
  // segments hold.
  conns_.clear();
  sets_.reset();
  writer_.reset();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
}

// Separate from the constructor so a failure is a Status, not a half-built
// object; RespServer initialises every loop before starting any thread.
absl::Status RespLoop::Init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || event_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll/eventfd: ", std::strerror(errno)));
  }
  epoll_event ev{};
  // EPOLLEXCLUSIVE: a new connection wakes one of the loops sharing the
  // listening socket, not all of them.
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  // The eventfd only exists to interrupt epoll_wait for Wake().
  ev.events = EPOLLIN;
  ev.data.fd = event_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev);
  // Writers are not thread-safe: one per loop, used only on its thread.
  writer_ = store_->NewWriter();
  sets_ = std::make_unique<StreamedSet>(store_, writer_.get(), counters_);
  return absl::OkStatus();
}

// Any thread: writing the eventfd makes the loop's epoll_wait return, and
// Run() sees the eventfd and stops. A failed write (counter overflow) means a
// wake-up is already pending, hence the ignored result.
void RespLoop::Wake() {
  uint64_t one = 1;
  (void)!write(event_fd_, &one, sizeof(one));
}

// The loop proper: wait, dispatch each ready fd, and once a second expire
// stale connections. stop_ is set here, when Wake()'s eventfd fires.
void RespLoop::Run() {
  epoll_event events[kMaxEvents];
  absl::Time next_timeout_check = absl::Now() + absl::Seconds(1);
  while (!stop_.load(std::memory_order_relaxed)) {
    // 250 ms at most, so timeouts are checked even on a quiet loop.
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, 250);
    if (n < 0 && errno != EINTR) {
      LOG(ERROR) << "epoll_wait: " << std::strerror(errno);
      break;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        Accept();
      } else if (fd == event_fd_) {
        stop_ = true;
      } else if (auto it = conns_.find(fd); it != conns_.end()) {
        // Looked up, not cached: an earlier event in this batch may have
        // closed the connection.
        OnEvent(it->second.get(), events[i].events);
      }
    }
    if (absl::Now() >= next_timeout_check) {
      CheckTimeouts();
      next_timeout_check = absl::Now() + absl::Seconds(1);
    }
  }
}

// Accepts until the backlog is empty. Several loops may be woken for the
// same burst; whichever accepts a connection owns it from then on.
void RespLoop::Accept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // EAGAIN: drained (or another loop took it); anything else is logged
      // and retried on the next wakeup.
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        LOG(WARNING) << "accept4: " << std::strerror(errno);
      }
      return;
    }
    int one = 1;
    // Replies are small and pipelined; Nagle would only add latency.
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Connection>(fd);
    c->last_activity = absl::Now();
    epoll_event ev{};
    // Level-triggered; EPOLLRDHUP reports a peer that shut down its side
    // even while reading is paused.
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    conns_[fd] = std::move(c);
    counters_->accepted->Increment();
    counters_->active->Add(1);
  }
}

// Output first: draining replies may lift the backpressure that stops
// reading, and Flush() closes connections that were only waiting to flush.
void RespLoop::OnEvent(Connection* c, uint32_t events) {
  if (events & EPOLLOUT) {
    if (!Flush(c)) return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
    // Not reading (output limit or closing): leave the input in the socket
    // unless the peer is gone.
    if (!c->reading && !(events & (EPOLLHUP | EPOLLERR))) return;
    if (!ReadSome(c)) return;
    Process(c);
    if (conns_.count(c->fd) == 0) return;
    // Replies go out in the same wakeup: most clients wait for them.
    Flush(c);
  }
}

ssize_t RespLoop::ReceiveBuffered(Connection* c) {
  // Keep the buffer from growing without bound: reset it when everything
  // was parsed, drop the parsed front once it is larger than one read.
  if (c->start > 0 && c->start == c->in.size()) {
    c->in.clear();
    c->start = 0;
  } else if (c->start > kReadChunk) {
    c->in.erase(0, c->start);
    c->start = 0;
  }
  // recv() into spare capacity, then shrink to what arrived: one buffer,
  // no intermediate copy.
  const size_t old = c->in.size();
  c->in.resize(old + kReadChunk);
  const ssize_t n = recv(c->fd, &c->in[old], kReadChunk, 0);
  c->in.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
  return n;
}

// Either the zero-copy receive of a SET value (as long as nothing else is
// buffered ahead of it) or an ordinary buffered read; then the usual
// end-of-stream / EAGAIN / error handling for both.
bool RespLoop::ReadSome(Connection* c) {
  for (int round = 0; round < kReadRounds; ++round) {
    ssize_t n;
    if (c->state == InputState::kValue && c->start == c->in.size()) {
      // A SET value with nothing buffered: straight into its pool entry,
      // and keep reading while the value lasts.
      n = sets_->ReceiveDirect(c);
      if (n > 0) {
        counters_->bytes_in->Increment(n);
        c->last_activity = absl::Now();
        continue;
      }
    } else {
      n = ReceiveBuffered(c);
      if (n > 0) {
        counters_->bytes_in->Increment(n);
        c->last_activity = absl::Now();
        // Process what arrived before reading (and buffering) more.
        return true;
      }
    }
    if (n == 0) {
      // The peer finished sending: answer what it sent, then close.
      c->reading = false;
      c->close_after_flush = true;
      Flush(c);
      return false;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    if (errno == EINTR) continue;
    // ECONNRESET and the like: nothing can be answered any more.
    Close(c);
    return false;
  }
  return true;
}

// After a framing error the rest of the input cannot be trusted to be
// aligned on a request, so it is dropped and nothing more is read.
void RespLoop::ProtocolError(Connection* c, absl::string_view msg) {
  counters_->protocol_errors->Increment();
  c->ReplyStatus(absl::InvalidArgumentError(msg));  // "ERR <msg>"
  c->close_after_flush = true;
  c->reading = false;
  c->in.clear();
  c->start = 0;
}

// Runs requests until the input is used up, a request is incomplete, the
// output limit is reached or the connection is marked to close. Streamed
// SET values in the input are handed to StreamedSet as they come up.
void RespLoop::Process(Connection* c) {
  while (!c->close_after_flush) {
    if (c->state != InputState::kCommands) {
      switch (sets_->ConsumeBuffered(c)) {
        case StreamedSet::Progress::kNeedMore:
          return;
        case StreamedSet::Progress::kBadTerminator:
          ProtocolError(c, "Protocol error: SET value not terminated by CRLF");
          return;
        case StreamedSet::Progress::kDone:
          continue;
      }
    }
    const absl::string_view buf(c->in.data() + c->start, c->in.size() - c->start);
    if (buf.empty()) {
      c->request_started = absl::InfiniteFuture();
      return;
    }
    // Backpressure: Flush() resumes processing once the client has read.
    if (c->out_bytes > options_.max_pending_output) return;
    resp::ParsedRequest req = resp::ParseRequest(buf, limits_);
    switch (req.kind) {
      case resp::ParsedRequest::Kind::kNeedMore:
        // The request timeout runs from the first incomplete attempt.
        if (c->request_started == absl::InfiniteFuture()) c->request_started = absl::Now();
        return;
      case resp::ParsedRequest::Kind::kError:
        // The parser's text already starts with "Protocol error".
        ProtocolError(c, req.error);
        return;
      case resp::ParsedRequest::Kind::kSetValue:
        c->start += req.consumed;
        c->request_started = absl::Now();
        counters_->commands->Increment();
        // req.args[1] still points into c->in: nothing has moved it.
        sets_->Begin(c, req.args[1], req.value_len);
        continue;
      case resp::ParsedRequest::Kind::kCommand:
        // Views into c->in stay valid: nothing below moves the buffer.
        Execute(c, req);
        c->start += req.consumed;
        c->request_started = absl::InfiniteFuture();
        continue;
    }
  }
}

// Everything except the streamed SET goes through the command table.
void RespLoop::Execute(Connection* c, const resp::ParsedRequest& req) {
  counters_->commands->Increment();
  const CommandContext ctx{store_, writer_.get(), &options_, counters_, c};
  DispatchCommand(ctx, req.args);
}

// Writes as much queued output as the socket takes. Once the queue is
// empty it either closes (QUIT, protocol error, peer EOF) or resumes requests
// that were held back by the output limit; then it updates epoll interest.
bool RespLoop::Flush(Connection* c) {
  while (!c->out.empty()) {
    // Gather up to kMaxIov unsent chunks (owned replies and pinned values)
    // into one writev.
    iovec iov[kMaxIov];
    int n = 0;
    for (auto it = c->out.begin(); it != c->out.end() && n < kMaxIov; ++it) {
      absl::string_view d = it->data();
      if (d.size() == it->sent) continue;
      iov[n].iov_base = const_cast<char*>(d.data()) + it->sent;
      iov[n].iov_len = d.size() - it->sent;
      ++n;
    }
    if (n == 0) {
      c->out.clear();
      break;
    }
    ssize_t w = writev(c->fd, iov, n);
    if (w < 0) {
      // EAGAIN: the socket buffer is full; EPOLLOUT will call us again.
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      Close(c);
      return false;
    }
    counters_->bytes_out->Increment(w);
    c->last_activity = absl::Now();
    size_t left = static_cast<size_t>(w);
    // out_bytes is approximate (see Connection), so never let it wrap.
    c->out_bytes -= std::min(c->out_bytes, left);
    // Drop what was written completely; note how far into the next it got.
    while (left > 0 && !c->out.empty()) {
      OutChunk& f = c->out.front();
      const size_t rest = f.data().size() - f.sent;
      if (left >= rest) {
        left -= rest;
        c->out.pop_front();  // releases a pinned entry
      } else {
        f.sent += left;
        left = 0;
      }
    }
  }
  if (c->out.empty()) {
    c->out_bytes = 0;
    if (c->close_after_flush) {
      Close(c);
      return false;
    }
    // Requests may be waiting behind the output limit.
    if (c->reading && c->start < c->in.size() && c->state == InputState::kCommands) {
      Process(c);
      if (conns_.count(c->fd) == 0) return false;
      if (!c->out.empty()) return Flush(c);
    }
  }
  UpdateInterest(c);
  return true;
}

// Read interest follows the backpressure rule (stop reading while too much
// output is queued); write interest exists only while output is queued, as
// level-triggered EPOLLOUT would otherwise fire on every wait.
void RespLoop::UpdateInterest(Connection* c) {
  const bool want_write = !c->out.empty();
  const bool want_read = c->reading && c->out_bytes <= options_.max_pending_output;
  epoll_event ev{};
  ev.events = (want_read ? (EPOLLIN | EPOLLRDHUP) : 0) | (want_write ? EPOLLOUT : 0);
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
}

// Ends a connection at once, dropping unsent output. `c` is destroyed:
// callers must not touch it afterwards (they check conns_ instead).
void RespLoop::Close(Connection* c) {
  sets_->Abandon(c);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  counters_->active->Add(-1);
  conns_.erase(c->fd);  // destroys c, releasing pinned replies
}

// Three ways a connection expires: a request left incomplete for
// request_timeout, no traffic at all for idle_timeout, or replies the
// client has not read for request_timeout. Collected first, closed after:
// Close() erases from the map being iterated.
void RespLoop::CheckTimeouts() {
  const absl::Time now = absl::Now();
  std::vector<Connection*> expired;
  for (auto& [fd, c] : conns_) {
    const bool mid_request = c->state != InputState::kCommands || c->start < c->in.size();
    if (mid_request && c->request_started != absl::InfiniteFuture() &&
        now - c->request_started > options_.request_timeout) {
      expired.push_back(c.get());
    } else if (options_.idle_timeout > absl::ZeroDuration() &&
               now - c->last_activity > options_.idle_timeout && c->out.empty()) {
      expired.push_back(c.get());
    } else if (!c->out.empty() && now - c->last_activity > options_.request_timeout) {
      // A client that stops reading its replies would otherwise pin the
      // entries being sent (and their segments) forever.
      expired.push_back(c.get());
    }
  }
  if (expired.empty()) return;
  // Best effort: tell the client why, then close. The code word comes from
  // the codec (TIMEOUT for DeadlineExceeded) so the C++ client reads it back
  // as DEADLINE_EXCEEDED, as it did when it matched on "timed out"; redis-cli
  // users still see "connection timed out".
  std::string msg;
  resp::AppendStatusError(&msg, absl::DeadlineExceededError("connection timed out"));
  for (Connection* c : expired) {
    counters_->timeouts->Increment();
    (void)!send(c->fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    Close(c);
  }
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
