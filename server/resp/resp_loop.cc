// Copyright 2026 The kvstore Authors.

#include "server/resp/resp_loop.h"

#include <fcntl.h>
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
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "server/net/batch_scope.h"

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
// Reads of one event whose room filled up, each parsed before the next;
// bounded for the same reason.
constexpr int kRereads = 4;
// Workers a loop's parked SETs may use at once (commit_pool.h): each
// waits out one replication round, so this bounds the SETs per loop in
// flight, which is what lets the replication stream batch them.
constexpr size_t kMaxParkedCommits = 64;

}  // namespace

RespLoop::RespLoop(KvStore* store, const RespServerOptions& options, const auth::Identities* ids,
                   Counters* counters, SharedBudgets* budgets, int listen_fd,
                   ClientRegistry* clients)
    : store_(store),
      options_(options),
      ids_(ids),
      counters_(counters),
      budgets_(budgets),
      listen_fd_(listen_fd),
      clients_(clients) {
  // Each loop keeps its own share of the unauthenticated cap, so that it
  // can always make room by closing one of its own (a loop cannot close
  // another loop's connections).
  const int cap = options.limits.max_unauthenticated_clients;
  const int threads = std::max(1, options.threads);
  unauth_cap_ = cap <= 0 ? std::numeric_limits<size_t>::max()
                         : static_cast<size_t>(std::max(1, (cap + threads - 1) / threads));
  // A bulk string is a key or a value; a request is at most one batch of
  // key/value pairs (MSET) plus its name; SET values are streamed, so the
  // buffered bytes are bounded by one value plus slack for the rest.
  limits_.max_bulk_bytes =
      std::max<uint64_t>(store->limits().max_value_bytes, store->limits().max_key_bytes);
  limits_.max_args = 2 * store->limits().max_batch_keys + 1;
  limits_.max_buffered_bytes = store->limits().max_value_bytes + (1 << 20);
  if (options.limits.max_query_buffer != 0) {
    limits_.max_buffered_bytes =
        std::min<uint64_t>(limits_.max_buffered_bytes, options.limits.max_query_buffer);
  }
  // "HELLO 2 AUTH default <token> SETNAME <name>" is 7 arguments; a token
  // is far below 16 KiB. Anything bigger before AUTH is not a login.
  unauth_limits_.max_args = 8;
  unauth_limits_.max_bulk_bytes = 16 << 10;
  unauth_limits_.max_buffered_bytes = 64 << 10;
}

// Runs after Run() has returned (RespServer joins the thread first), so no
// event can arrive while connections are torn down.
RespLoop::~RespLoop() {
  Unwatch();      // a loop whose Run() never ran still owes its watches that
  StopParking();  // first: parked writes hold entries of the writers
  for (auto& [fd, c] : conns_) {
    if (sets_ != nullptr) sets_->Abandon(c.get());
    close(fd);
    // Unauthenticated connections hold no max_clients slot.
    if (!c->in_unauth_list) budgets_->clients.Give(1);
  }
  // Connections first: their queued replies pin entries the writer's
  // segments hold.
  conns_.clear();
  sets_.reset();
  writer_.reset();
  command_writer_.reset();  // the workers that used it are joined above
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
  if (adopt_fd_ >= 0) close(adopt_fd_);
  if (kill_fd_ >= 0) close(kill_fd_);
  if (commit_fd_ >= 0) close(commit_fd_);
  absl::MutexLock lock(&adopt_mu_);
  for (const Adopted& a : adopted_) close(a.fd);
  adopted_.clear();
  if (reserve_fd_ >= 0) close(reserve_fd_);
}

// Separate from the constructor so a failure is a Status, not a half-built
// object; RespServer initialises every loop before starting any thread.
absl::Status RespLoop::Init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  adopt_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  kill_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || event_fd_ < 0 || adopt_fd_ < 0 || kill_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll/eventfd: ", std::strerror(errno)));
  }
  epoll_event ev{};
  // EPOLLEXCLUSIVE: a new connection wakes one of the loops sharing the
  // listening socket, not all of them.
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.fd = listen_fd_;
  // No listener when only the TLS port serves: connections come by Adopt().
  if (listen_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  // The eventfd only exists to interrupt epoll_wait for Wake().
  ev.events = EPOLLIN;
  ev.data.fd = event_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev);
  ev.data.fd = adopt_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, adopt_fd_, &ev);
  ev.data.fd = kill_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, kill_fd_, &ev);
  // Writers are not thread-safe: one per loop, used only on its thread.
  writer_ = store_->NewWriter();
  if (store_->options().write_hook != nullptr) {
    commit_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (commit_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
    ev.data.fd = commit_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, commit_fd_, &ev);
    parking_ = std::make_unique<CommitPool>(store_, commit_fd_, kMaxParkedCommits);
    command_writer_ = store_->NewSharedWriter();
  }
  sets_ =
      std::make_unique<StreamedSet>(store_, writer_.get(), counters_, &budgets_->inflight_set_bytes,
                                    options_.cluster, parking_.get());
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
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
  const net::WatchingThreadScope watching;  // see Watch()
  const ServeWhileWaiting serve(this);      // see ServeFor()
  const CommitPool::LoopScope loop_scope(parking_.get());
  epoll_event events[kMaxEvents];
  const int quiet_timeout_ms = static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(options_.timeout_check_interval), 1, 250));
  // The checks are paced in real time; what expires is decided on loop time.
  absl::Time next_timeout_check = absl::Now() + options_.timeout_check_interval;
  SetWakeTime();  // never InfinitePast once running
  while (!stop_.load(std::memory_order_relaxed)) {
    // SETs this thread finished itself (it read their replies: a watch, or
    // a synchronous write waiting on the loop) wrote no eventfd: answered
    // before the loop may sleep, and again if answering finished more.
    while (parking_ != nullptr && parking_->FinishedOnLoop()) Unpark(/*read_eventfd=*/false);
    // 250 ms at most, so timeouts are checked even on a quiet loop; 50 ms
    // while the listener is paused, to resume it on time.
    // 2 ms while SETs are held back for space (RetryHeldBack).
    const int timeout_ms = !held_back_.empty() ? 2 : listener_paused_ ? 50 : quiet_timeout_ms;
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
    if (n < 0 && errno != EINTR) {
      LOG(ERROR) << "epoll_wait: " << std::strerror(errno);
      break;
    }
    SetWakeTime();
    // Group commit: the replicated SETs of every connection served in this
    // iteration go to each backup as one batch, started when the scope ends
    // (batch_scope.h). Under load one wake-up serves many connections; an
    // idle SET is alone in its iteration and is not delayed.
    net::BatchScope batch;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        Accept();
      } else if (fd == event_fd_) {
        stop_ = true;
      } else if (fd == adopt_fd_) {
        TakeAdopted();
      } else if (fd == kill_fd_) {
        CloseKilled();
      } else if (fd == commit_fd_) {
        Unpark();
      } else if (auto it = conns_.find(fd); it != conns_.end()) {
        // Looked up, not cached: an earlier event in this batch may have
        // closed the connection.
        OnEvent(it->second.get(), events[i].events);
      } else {
        OnWatched(fd);
      }
    }
    if (listener_paused_) MaybeResumeListener(absl::Now());
    if (!held_back_.empty()) RetryHeldBack();
    if (absl::Now() >= next_timeout_check) {
      CheckTimeouts();
      next_timeout_check = absl::Now() + options_.timeout_check_interval;
    }
  }
  Unwatch();
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
    {
      // The replicated SETs of everything read here go to each backup as
      // one batch, started when the scope ends (batch_scope.h).
      net::BatchScope batch;
      for (int read = 0;; ++read) {
        if (!ReadSome(c)) return;
        Process(c);
        if (conns_.count(c->fd) == 0) return;
        // A read that filled its room may have left the rest of a pipeline
        // in the socket (16 pipelined 4 KiB SETs are more than one read):
        // read it now rather than after another epoll_wait, so that the
        // pipeline's SETs are replicated and answered together.
        if (!c->read_filled || !WantsInput(*c) || read + 1 >= kRereads) break;
      }
    }
    // Replies go out in the same wakeup: most clients wait for them.
    Flush(c);
  }
}

ssize_t RespLoop::ReceiveBuffered(Connection* c) {
  // Keep the buffer from growing without bound: reset it when everything
  // was parsed, drop the parsed front once it is larger than one read.
  if (c->start == c->in.size()) {
    c->in.clear();
    c->start = 0;
    // Nothing pending: borrow the loop's buffer (see spare_) rather than
    // growing this connection's own.
    if (c->in.capacity() < spare_.capacity()) c->in.swap(spare_);
  } else if (c->start > kReadChunk) {
    c->in.EraseFront(c->start);
    c->start = 0;
  }
  // recv() straight into the buffer's spare room (not zero-filled first:
  // see InputBuffer), then count what arrived.
  char* room = c->in.Prepare(kReadChunk);
  const ssize_t n = recv(c->fd, room, kReadChunk, 0);
  if (n > 0) c->in.Commit(static_cast<size_t>(n));
  c->read_filled = n == static_cast<ssize_t>(kReadChunk);
  return n;
}

// Either the zero-copy receive of a SET value (as long as nothing else is
// buffered ahead of it) or an ordinary buffered read; then the usual
// end-of-stream / EAGAIN / error handling for both.
bool RespLoop::ReadSome(Connection* c) {
  c->read_filled = false;
  for (int round = 0; round < kReadRounds; ++round) {
    ssize_t n;
    if (c->state == InputState::kValue && c->start == c->in.size() && StreamedSet::Reserved(*c)) {
      // A SET value with nothing buffered: straight into its pool entry,
      // and keep reading while the value lasts.
      n = sets_->ReceiveDirect(c);
      if (n > 0) {
        counters_->bytes_in->Increment(n);
        c->last_activity = wake_time_;
        NoteInteraction(*c);
        continue;
      }
    } else {
      n = ReceiveBuffered(c);
      if (n > 0) {
        counters_->bytes_in->Increment(n);
        c->last_activity = wake_time_;
        NoteInteraction(*c);
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
      if (it->held) break;  // a parked SET's place: nothing after it goes yet
      absl::string_view d = it->data();
      if (d.size() == it->sent) continue;
      iov[n].iov_base = const_cast<char*>(d.data()) + it->sent;
      iov[n].iov_len = d.size() - it->sent;
      ++n;
    }
    if (n == 0) {
      // Everything before the first held reply (or at all) was sent.
      while (!c->out.empty() && !c->out.front().held) c->out.pop_front();
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
    // The wake-up's time, as a read records it: the idle and output
    // timeouts count seconds, and an iteration's age is far less.
    c->last_activity = wake_time_;
    size_t left = static_cast<size_t>(w);
    // out_bytes is approximate (see Connection), so never let it wrap.
    c->out_bytes -= std::min(c->out_bytes, left);
    // Drop what was written completely; note how far into the next it got.
    while (left > 0 && !c->out.empty()) {
      OutChunk& f = c->out.front();
      const size_t rest = f.data().size() - f.sent;
      if (left >= rest) {
        left -= rest;
        if (f.pinned.value().data() == nullptr) c->RecycleOwned(std::move(f.owned));
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
bool RespLoop::WantsInput(const Connection& c) const {
  return c.reading && c.out_bytes <= options_.max_pending_output && !c.held_back() &&
         !c.blocked_on_park;
}

void RespLoop::UpdateInterest(Connection* c) {
  const bool want_write = c->Writable();
  const bool want_read = WantsInput(*c);
  const uint32_t events = (want_read ? (EPOLLIN | EPOLLRDHUP) : 0) | (want_write ? EPOLLOUT : 0);
  // Usually unchanged (read interest, nothing left to write): then the
  // registration is already right and the system call would be wasted.
  if (events == c->epoll_events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  c->epoll_events = events;
}

// Ends a connection at once, dropping unsent output. `c` is destroyed:
// callers must not touch it afterwards (they check conns_ instead).
void RespLoop::Close(Connection* c) {
  sets_->Abandon(c);
  held_back_.erase(c->fd);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  counters_->active->Add(-1);
  if (c->in_unauth_list) {
    unauth_.erase(c->unauth_pos);
  } else {
    budgets_->clients.Give(1);
  }
  conns_.erase(c->fd);  // destroys c, releasing pinned replies
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
