// Copyright 2026 The kvstore Authors.
//
// Three parts: DialResp() (resp_dial.h) makes one socket and authenticates
// it; RespConnection pipelines requests
// over it, with a reader thread that matches replies to waiters in order;
// TcpDataPath turns each DataPath operation into RESP commands.

#include "client/internal/tcp/tcp_data_path.h"

#ifdef KV_TCP_FAILPOINTS
#include "client/internal/tcp/tcp_failpoints.h"
#endif

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/internal/tcp/resp_dial.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace client {

// Test-only failpoints (tcp_failpoints.h). Compiled in only for the test
// variant of this library (KV_TCP_FAILPOINTS); elsewhere the macro is empty.
#ifdef KV_TCP_FAILPOINTS
namespace tcp_failpoints {
namespace {
absl::Mutex hooks_mu;
std::function<void()> before_queue ABSL_GUARDED_BY(hooks_mu);
std::function<void()> after_drain ABSL_GUARDED_BY(hooks_mu);
void Run(std::function<void()>* hook) {
  std::function<void()> f;
  {
    absl::MutexLock lock(&hooks_mu);
    f = *hook;
  }
  if (f) f();
}
}  // namespace
void SetBeforeQueueForTest(std::function<void()> f) {
  absl::MutexLock lock(&hooks_mu);
  before_queue = std::move(f);
}
void SetAfterDrainForTest(std::function<void()> f) {
  absl::MutexLock lock(&hooks_mu);
  after_drain = std::move(f);
}
}  // namespace tcp_failpoints
#define KV_TCP_FAILPOINT(name) tcp_failpoints::Run(&tcp_failpoints::name)
#else
#define KV_TCP_FAILPOINT(name) \
  do {                         \
  } while (0)
#endif

// One TCP connection with pipelining: requests are written in the order
// their waiters are queued, and replies complete waiters in that order.
//
// send_mu_ serialises senders and guards the socket and the reader thread
// (connect, reconnect, teardown); queue_mu_, taken after it, guards the
// waiter queue that the reader thread shares. A sender queues its waiters
// and writes its bytes under send_mu_, so the queue order is the wire order
// and a reply never arrives before its waiter is queued. The reader thread
// never takes send_mu_, so joining it under send_mu_ cannot deadlock.
class RespConnection {
 public:
  // `auth_token`: sent as AUTH on every (re)connect; empty for none.
  // `tls`: null for plaintext.
  RespConnection(std::string address, absl::Duration connect_timeout, std::string auth_token,
                 bool readonly, std::shared_ptr<const RespTls> tls)
      : address_(std::move(address)),
        connect_timeout_(connect_timeout),
        auth_token_(std::move(auth_token)),
        readonly_(readonly),
        tls_(std::move(tls)) {}
  ~RespConnection() {
    absl::MutexLock lock(&send_mu_);
    Teardown();
  }

  // Connects now rather than on the first request, so that Connect() reports
  // an unreachable server at once.
  absl::Status Open() {
    absl::MutexLock lock(&send_mu_);
    return EnsureConnected();
  }

  // Sends every request in `requests` (each a list of wire pieces) in one
  // burst and returns their replies in order.
  std::vector<absl::StatusOr<resp::Reply>> Call(
      const std::vector<std::vector<absl::string_view>>& requests, absl::Time deadline) {
    // Shared with the queue: the reader may complete a waiter after its
    // caller gave up at the deadline, so neither side alone may free it.
    std::vector<std::shared_ptr<Waiter>> waiters;
    {
      absl::MutexLock lock(&send_mu_);
      absl::Status s = EnsureConnected();
      KV_TCP_FAILPOINT(before_queue);
      // The reader may have failed since EnsureConnected() looked: then it
      // has closed the queue, and a waiter queued now would never be
      // answered. Connect again (broken_ is set by then) and queue on the
      // new reader; a second failure is the caller's kUnavailable.
      if (s.ok() && !Enqueue(requests.size(), &waiters)) {
        s = EnsureConnected();
        if (s.ok() && !Enqueue(requests.size(), &waiters)) {
          s = NotSent(absl::UnavailableError(absl::StrCat("connection to ", address_, " lost")));
        }
      }
      if (s.ok()) {
        // Gathered writes for the whole burst; the pieces are the caller's
        // memory (a PUT's value included), copied only by the kernel. Empty
        // pieces add nothing to the wire.
        std::vector<iovec> iov;
        for (const auto& req : requests) {
          for (absl::string_view p : req) {
            if (!p.empty()) iov.push_back({const_cast<char*>(p.data()), p.size()});
          }
        }
        s = SendAll(iov);
        if (!s.ok()) {
          // The reader fails every queued waiter once the socket is shut down.
          shutdown(fd_, SHUT_RDWR);
        }
      }
      // No waiters means the connection could not be made and nothing was
      // sent: every request gets that error.
      if (!s.ok() && waiters.empty()) {
        return std::vector<absl::StatusOr<resp::Reply>>(requests.size(), s);
      }
    }
    // Waiting happens outside send_mu_, so other senders keep pipelining.
    std::vector<absl::StatusOr<resp::Reply>> out;
    out.reserve(waiters.size());
    for (auto& w : waiters) {
      absl::MutexLock lock(&w->mu);
      auto done = [&w]() ABSL_SHARED_LOCKS_REQUIRED(w->mu) { return w->done; };
      if (!w->mu.AwaitWithDeadline(absl::Condition(&done), deadline)) {
        // The waiter stays queued: its reply, when it comes, completes it
        // and is dropped, so the replies behind it still reach their own
        // waiters. A slow reply does not cost the connection.
        w->abandoned = true;
        out.push_back(absl::DeadlineExceededError(
            absl::StrCat("no reply from ", address_, " before the deadline")));
        continue;
      }
      out.push_back(std::move(w->result));
    }
    return out;
  }

 private:
  // One request's place in the reply order. The reader fills `result` and
  // sets `done`; `abandoned` records that the caller stopped waiting (the
  // reader completes the waiter either way).
  struct Waiter {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    bool abandoned ABSL_GUARDED_BY(mu) = false;
    absl::StatusOr<resp::Reply> result ABSL_GUARDED_BY(mu);
  };

  // Queues `n` waiters, in request order, unless the reader has closed the
  // queue (it failed and drained it); returns whether it queued them.
  bool Enqueue(size_t n, std::vector<std::shared_ptr<Waiter>>* waiters)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_) {
    absl::MutexLock q(&queue_mu_);
    if (queue_closed_) return false;
    for (size_t i = 0; i < n; ++i) {
      waiters->push_back(std::make_shared<Waiter>());
      pending_.push_back(waiters->back());
    }
    return true;
  }

  // Reconnects lazily: a connection the reader found lost is replaced on the
  // next request, which is why the path never reports itself broken. Once
  // the server refused the token, every later request gets that refusal
  // without dialling: the token cannot change, so retrying would only load
  // the server (and its auth-failure counters) for nothing.
  absl::Status EnsureConnected() ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_) {
    if (fd_ >= 0 && !broken_.load()) return absl::OkStatus();
    if (!refused_.ok()) return refused_;
    // The old reader has failed (or is failing) its waiters; join it first.
    Teardown();
    absl::StatusOr<int> fd =
        DialResp(address_, connect_timeout_, auth_token_, readonly_, tls_.get());
    if (absl::IsUnauthenticated(fd.status())) refused_ = fd.status();
    // No request has been written on a connection that does not exist:
    // callers may send a write elsewhere (cluster failover).
    if (!fd.ok()) return NotSent(fd.status());
    fd_ = *fd;
    broken_ = false;
    {
      // The old reader is joined: nothing can close the queue behind us.
      absl::MutexLock q(&queue_mu_);
      queue_closed_ = false;
    }
    // The reader gets the descriptor by value: fd_ is guarded by send_mu_,
    // which the reader never takes.
    reader_ = std::thread([this, fd = fd_] { ReadLoop(fd); });
    return absl::OkStatus();
  }

  // shutdown() wakes the reader out of recv(); the descriptor is closed only
  // after the join, so its number cannot be reused while the reader still
  // reads from it.
  void Teardown() ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_) {
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  // Writes every byte of `iov`, adjusting it as it goes: sendmsg() takes at
  // most IOV_MAX pieces and may send less than it was given. MSG_NOSIGNAL: a
  // peer that has gone away is an EPIPE error here, not a SIGPIPE that kills
  // the application.
  absl::Status SendAll(std::vector<iovec>& iov) ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_) {
    size_t i = 0;
    while (i < iov.size()) {
      msghdr msg{};
      msg.msg_iov = &iov[i];
      msg.msg_iovlen = std::min<size_t>(iov.size() - i, IOV_MAX);
      ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return absl::UnavailableError(
            absl::StrCat("send to ", address_, ": ", std::strerror(errno)));
      }
      // Skip the pieces sent whole, then trim the one sent in part.
      size_t left = static_cast<size_t>(n);
      while (i < iov.size() && left >= iov[i].iov_len) left -= iov[i++].iov_len;
      if (i < iov.size()) {
        iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
        iov[i].iov_len -= left;
      }
    }
    return absl::OkStatus();
  }

  // RESP answers pipelined requests in order, so each reply (or the failure
  // of the connection) belongs to the oldest waiter.
  void Complete(absl::StatusOr<resp::Reply> result) {
    std::shared_ptr<Waiter> w;
    {
      absl::MutexLock q(&queue_mu_);
      if (pending_.empty()) return;  // a reply nobody asked for: ignore
      w = std::move(pending_.front());
      pending_.pop_front();
    }
    absl::MutexLock lock(&w->mu);
    w->result = std::move(result);
    w->done = true;
  }

  // The reader thread of one socket: runs until the socket fails or is shut
  // down or a reply is malformed, then fails every waiter still queued.
  void ReadLoop(int fd) {
    // buf[start, size) holds bytes received but not yet parsed.
    std::string buf;
    size_t start = 0;
    // The server's replies are not trusted either: the default limits bound
    // what one reply can make the client allocate.
    resp::ReplyLimits limits;
    absl::Status failure;
    for (;;) {
      // Parse every complete reply in the buffer.
      for (;;) {
        auto r = resp::ParseReply(absl::string_view(buf).substr(start), limits);
        if (!r.ok()) {
          // Framing is lost: no later reply could be matched to its waiter,
          // so the connection is given up.
          failure = absl::InternalError(
              absl::StrCat("malformed reply from ", address_, ": ", r.status().message()));
          break;
        }
        // ParseReply() keeps no state: an incomplete reply is parsed again
        // from its first byte once more bytes have arrived.
        if (!r->complete) break;
        start += r->consumed;
        Complete(std::move(r->reply));
      }
      if (!failure.ok()) break;
      // Drop parsed bytes when that is cheap (all parsed), or when they are
      // over 1 MiB and most of the buffer, so the move is amortised.
      if (start == buf.size()) {
        buf.clear();
        start = 0;
      } else if (start > (1 << 20) && start > buf.size() / 2) {
        buf.erase(0, start);
        start = 0;
      }
      // Receive straight into the buffer's tail, up to 256 KiB at a time.
      const size_t old = buf.size();
      buf.resize(old + 256 * 1024);
      ssize_t n = recv(fd, &buf[old], 256 * 1024, 0);
      buf.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      // 0 is the end of the stream: the server closed the connection, or
      // Teardown() shut it down.
      failure = absl::UnavailableError(
          absl::StrCat("connection to ", address_, " lost",
                       n < 0 ? absl::StrCat(": ", std::strerror(errno)) : ""));
      break;
    }
    // Set before the queue is closed, so the next sender reconnects.
    broken_ = true;
    // Close the queue and take every waiter in one step under queue_mu_: a
    // sender queues only while the queue is open (Enqueue), so none can slip
    // in behind this drain and wait for a reply that never comes.
    std::deque<std::shared_ptr<Waiter>> orphans;
    {
      absl::MutexLock q(&queue_mu_);
      queue_closed_ = true;
      orphans.swap(pending_);
    }
    for (auto& w : orphans) {
      absl::MutexLock lock(&w->mu);
      w->result = failure;
      w->done = true;
    }
    KV_TCP_FAILPOINT(after_drain);
  }

  const std::string address_;
  const absl::Duration connect_timeout_;
  const std::string auth_token_;
  // Send READONLY after AUTH on every (re)connect (cluster replica reads).
  const bool readonly_;
  const std::shared_ptr<const RespTls> tls_;  // null: plaintext
  absl::Mutex send_mu_;
  int fd_ ABSL_GUARDED_BY(send_mu_) = -1;
  // The server's refusal of auth_token_, once it happened (sticky).
  absl::Status refused_ ABSL_GUARDED_BY(send_mu_);
  std::thread reader_ ABSL_GUARDED_BY(send_mu_);
  // Set by the reader when its socket fails, read by senders without a lock.
  std::atomic<bool> broken_{false};
  absl::Mutex queue_mu_ ABSL_ACQUIRED_AFTER(send_mu_);
  std::deque<std::shared_ptr<Waiter>> pending_ ABSL_GUARDED_BY(queue_mu_);
  // Set by a reader that failed and drained pending_; cleared when a new
  // reader starts. No waiter is queued while it is set.
  bool queue_closed_ ABSL_GUARDED_BY(queue_mu_) = false;
};

// ---------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TcpDataPath>> TcpDataPath::Connect(
    const std::string& address, int connections, const Limits& limits,
    absl::Duration connect_timeout, const std::string& auth_token, bool readonly,
    std::shared_ptr<const RespTls> tls) {
  // On a failure `path` is destroyed, closing the connections made so far.
  std::unique_ptr<TcpDataPath> path(new TcpDataPath(address, limits, connect_timeout));
  for (int i = 0; i < std::max(1, connections); ++i) {
    auto conn =
        std::make_unique<RespConnection>(address, connect_timeout, auth_token, readonly, tls);
    KV_RETURN_IF_ERROR(conn->Open());
    path->conns_.push_back(std::move(conn));
  }
  return path;
}

TcpDataPath::TcpDataPath(std::string address, const Limits& limits, absl::Duration connect_timeout)
    : address_(std::move(address)), limits_(limits), connect_timeout_(connect_timeout) {}

// Each RespConnection's destructor shuts its socket down and joins its reader.
TcpDataPath::~TcpDataPath() = default;

namespace {

// One request as wire pieces. Arguments are referenced, not copied (a PUT's
// value goes to the socket from the caller's buffer); only the small length
// headers are owned here. Parts() is built on demand so a Request can move.
class Request {
 public:
  void Add(absl::string_view arg) {
    lengths_.push_back(absl::StrCat("$", arg.size(), "\r\n"));
    args_.push_back(arg);
  }
  std::vector<absl::string_view> Parts() {
    header_ = absl::StrCat("*", args_.size(), "\r\n");
    std::vector<absl::string_view> parts;
    parts.reserve(1 + 3 * args_.size());
    parts.push_back(header_);
    for (size_t i = 0; i < args_.size(); ++i) {
      parts.push_back(lengths_[i]);
      parts.push_back(args_[i]);
      parts.push_back("\r\n");
    }
    return parts;
  }

 private:
  std::string header_;
  std::vector<std::string> lengths_;
  std::vector<absl::string_view> args_;
};

// A request of a few arguments, e.g. MakeRequest({"GET", key}).
Request MakeRequest(std::initializer_list<absl::string_view> args) {
  Request r;
  for (absl::string_view a : args) r.Add(a);
  return r;
}

// The value of a GET reply or of one MGET element: a bulk string, or nil for
// an absent key.
absl::StatusOr<std::string> ValueFromReply(absl::StatusOr<resp::Reply> r) {
  if (!r.ok()) return r.status();
  switch (r->type) {
    case resp::Reply::Type::kBulk:
      return std::move(r->str);
    case resp::Reply::Type::kNull:
      return absl::NotFoundError("key not found");
    case resp::Reply::Type::kError:
      return resp::RespErrorToStatus(r->str);
    default:
      return absl::InternalError("unexpected reply type to GET");
  }
}

// A SET reply: "+OK", or the error it carries.
absl::Status OkFromReply(const absl::StatusOr<resp::Reply>& r) {
  if (!r.ok()) return r.status();
  if (r->type == resp::Reply::Type::kError) return resp::RespErrorToStatus(r->str);
  if (r->type == resp::Reply::Type::kSimple && r->str == "OK") return absl::OkStatus();
  return absl::InternalError("unexpected reply to SET");
}

// The count a DEL or EXISTS reply carries.
absl::StatusOr<int64_t> IntFromReply(const absl::StatusOr<resp::Reply>& r) {
  if (!r.ok()) return r.status();
  if (r->type == resp::Reply::Type::kError) return resp::RespErrorToStatus(r->str);
  if (r->type != resp::Reply::Type::kInteger)
    return absl::InternalError("expected an integer reply");
  return r->integer;
}

}  // namespace

// Round robin: consecutive requests go to different connections, so a large
// value delays only the requests queued behind it on the same connection.
absl::StatusOr<resp::Reply> TcpDataPath::Call(const std::vector<absl::string_view>& parts,
                                              absl::Time deadline) {
  RespConnection* conn =
      conns_[next_.fetch_add(1, std::memory_order_relaxed) % conns_.size()].get();
  return std::move(conn->Call({parts}, deadline)[0]);
}

// The key is checked here, before anything is sent: a bad key fails locally
// (kInvalidArgument) without a round trip.
absl::StatusOr<std::string> TcpDataPath::Get(absl::string_view key, absl::Time deadline) {
  KV_RETURN_IF_ERROR(limits_.CheckKey(key));
  Request r = MakeRequest({"GET", key});
  return ValueFromReply(Call(r.Parts(), deadline));
}

absl::Status TcpDataPath::Put(absl::string_view key, absl::string_view value, absl::Time deadline) {
  KV_RETURN_IF_ERROR(limits_.CheckKey(key));
  KV_RETURN_IF_ERROR(limits_.CheckValueLength(value.size()));
  // The value goes to the socket straight from the caller's buffer.
  Request r = MakeRequest({"SET", key, value});
  return OkFromReply(Call(r.Parts(), deadline));
}

absl::Status TcpDataPath::Delete(absl::string_view key, absl::Time deadline) {
  KV_RETURN_IF_ERROR(limits_.CheckKey(key));
  Request r = MakeRequest({"DEL", key});
  // DEL answers the number of keys it removed: 0 means it was absent.
  KV_ASSIGN_OR_RETURN(int64_t n, IntFromReply(Call(r.Parts(), deadline)));
  return n == 0 ? absl::NotFoundError("key not found") : absl::OkStatus();
}

absl::Status TcpDataPath::PutWithTtl(absl::string_view key, absl::string_view value,
                                     absl::Duration ttl, absl::Time deadline) {
  KV_RETURN_IF_ERROR(limits_.CheckKey(key));
  KV_RETURN_IF_ERROR(limits_.CheckValueLength(value.size()));
  // Whole milliseconds, at least 1: a TTL the server accepts.
  const std::string ms = absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl)));
  Request r = MakeRequest({"SET", key, value, "PX", ms});
  KV_ASSIGN_OR_RETURN(resp::Reply reply, Call(r.Parts(), deadline));
  if (reply.type == resp::Reply::Type::kError) return resp::RespErrorToStatus(reply.str);
  return absl::OkStatus();
}

absl::StatusOr<bool> TcpDataPath::Expire(absl::string_view key, absl::Duration ttl,
                                         absl::Time deadline) {
  KV_RETURN_IF_ERROR(limits_.CheckKey(key));
  const std::string ms = absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl)));
  Request r = ttl == absl::InfiniteDuration() ? MakeRequest({"PERSIST", key})
                                              : MakeRequest({"PEXPIRE", key, ms});
  KV_ASSIGN_OR_RETURN(int64_t n, IntFromReply(Call(r.Parts(), deadline)));
  return n == 1;
}

absl::StatusOr<absl::Duration> TcpDataPath::Ttl(absl::string_view key, absl::Time deadline) {
  KV_RETURN_IF_ERROR(limits_.CheckKey(key));
  Request r = MakeRequest({"PTTL", key});
  KV_ASSIGN_OR_RETURN(int64_t ms, IntFromReply(Call(r.Parts(), deadline)));
  if (ms == -2) return absl::NotFoundError("key not found");
  return ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(ms);
}

absl::StatusOr<bool> TcpDataPath::Exists(absl::string_view key, absl::Time deadline) {
  KV_RETURN_IF_ERROR(limits_.CheckKey(key));
  Request r = MakeRequest({"EXISTS", key});
  KV_ASSIGN_OR_RETURN(int64_t n, IntFromReply(Call(r.Parts(), deadline)));
  return n > 0;
}

absl::StatusOr<std::vector<absl::StatusOr<std::string>>> TcpDataPath::MultiGet(
    absl::Span<const std::string> keys, absl::Time deadline) {
  std::vector<absl::StatusOr<std::string>> out;
  out.reserve(keys.size());
  // Every key is checked before the first batch goes out.
  for (const auto& k : keys) KV_RETURN_IF_ERROR(limits_.CheckKey(k));
  // The server bounds a request's arguments by its batch limit, so a longer
  // key list goes out as several MGETs, one at a time.
  const size_t batch = std::max<uint64_t>(1, limits_.max_batch_keys);
  for (size_t begin = 0; begin < keys.size(); begin += batch) {
    const size_t end = std::min(keys.size(), begin + batch);
    Request r;
    r.Add("MGET");
    for (size_t i = begin; i < end; ++i) r.Add(keys[i]);
    absl::StatusOr<resp::Reply> reply = Call(r.Parts(), deadline);
    if (!reply.ok()) return reply.status();
    if (reply->type == resp::Reply::Type::kError) return resp::RespErrorToStatus(reply->str);
    // One element per key, in order, or the results cannot be attributed.
    if (reply->type != resp::Reply::Type::kArray || reply->elements.size() != end - begin) {
      return absl::InternalError("unexpected reply to MGET");
    }
    for (auto& e : reply->elements) out.push_back(ValueFromReply(std::move(e)));
  }
  return out;
}

absl::StatusOr<std::vector<absl::Status>> TcpDataPath::MultiPut(
    absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time deadline) {
  for (const auto& [k, v] : pairs) {
    KV_RETURN_IF_ERROR(limits_.CheckKey(k));
    KV_RETURN_IF_ERROR(limits_.CheckValueLength(v.size()));
  }
  // Pipelined SETs rather than MSET: the server streams each value straight
  // into pool memory instead of buffering the whole batch, and every pair
  // gets a reply of its own.
  // One connection for the whole call, so the server applies the SETs in
  // pair order (a key given twice keeps its last value). Each batch is one
  // burst of writes followed by one wait for all of its replies; batches
  // bound how many requests (and waiters) one burst holds in flight.
  RespConnection* conn =
      conns_[next_.fetch_add(1, std::memory_order_relaxed) % conns_.size()].get();
  const size_t batch = std::max<uint64_t>(1, limits_.max_batch_keys);
  std::vector<absl::Status> out;
  out.reserve(pairs.size());
  for (size_t begin = 0; begin < pairs.size(); begin += batch) {
    const size_t end = std::min(pairs.size(), begin + batch);
    std::vector<Request> reqs;
    reqs.reserve(end - begin);
    std::vector<std::vector<absl::string_view>> parts;
    for (size_t i = begin; i < end; ++i) {
      reqs.push_back(MakeRequest({"SET", pairs[i].first, pairs[i].second}));
    }
    // Parts() only once every Request is in place: the parts point into each
    // Request's strings (a short string's bytes live inside the string
    // object), so a Request must not move after its parts are taken.
    for (auto& r : reqs) parts.push_back(r.Parts());
    bool failed = false;
    for (auto& reply : conn->Call(parts, deadline)) {
      out.push_back(OkFromReply(std::move(reply)));
      failed = failed || !out.back().ok();
    }
    if (failed) break;
  }
  // The pairs of the batches not sent.
  while (out.size() < pairs.size()) {
    out.push_back(NotSent(absl::UnavailableError("not sent: an earlier pair of the batch failed")));
  }
  return out;
}

}  // namespace client
}  // namespace kvstore
