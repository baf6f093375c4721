// Copyright 2026 The kvstore Authors.

#include "server/resp/resp_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/protocol/resp.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {

namespace {

using resp::CommandIs;

constexpr size_t kReadChunk = 64 * 1024;
constexpr int kMaxIov = 64;

// RESP error text for a Status. The first word is the error code, as in
// Redis: "OOM" for a full store, "DATALOSS" for an entry that failed its
// checksum, "TRYAGAIN" for a transient condition, "ERR" otherwise. Messages
// name the limit for over-limit requests.
std::string ErrorText(const absl::Status& s) {
  const char* prefix = "ERR ";
  switch (s.code()) {
    case absl::StatusCode::kResourceExhausted:
      prefix = "OOM ";
      break;
    case absl::StatusCode::kDataLoss:
      prefix = "DATALOSS ";
      break;
    case absl::StatusCode::kUnavailable:
      prefix = "TRYAGAIN ";
      break;
    default:
      break;
  }
  return absl::StrCat(prefix, s.message());
}

absl::StatusOr<int> Listen(const std::string& address, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  // SO_REUSEADDR only: a restarted server can rebind at once, but a second
  // server on the same port fails instead of silently sharing it.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", address));
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1024) != 0) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("bind/listen on ", address, ":", port, ": ", std::strerror(errno)));
    close(fd);
    return s;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

}  // namespace

// Shared counters, updated by every loop.
struct RespServer::Counters {
  std::atomic<uint64_t> accepted{0}, active{0}, commands{0}, gets{0}, sets{0}, protocol_errors{0},
      timeouts{0}, bytes_in{0}, bytes_out{0};
};

// ---------------------------------------------------------------------------

class RespServer::Loop {
 public:
  Loop(KvStore* store, const RespServerOptions& options, Counters* counters, int listen_fd)
      : store_(store), options_(options), counters_(counters), listen_fd_(listen_fd) {
    limits_.max_bulk_bytes =
        std::max<uint64_t>(store->limits().max_value_bytes, store->limits().max_key_bytes);
    limits_.max_args = 2 * store->limits().max_batch_keys + 1;
    limits_.max_buffered_bytes = store->limits().max_value_bytes + (1 << 20);
  }
  ~Loop();

  absl::Status Init();
  void Run();
  void Wake() {
    uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof(one));
  }

 private:
  struct OutChunk {
    std::string owned;
    PinnedValue pinned;  // when set, `view` points into pool memory
    absl::string_view view;
    size_t sent = 0;
    absl::string_view data() const {
      return pinned.value().data() ? view : absl::string_view(owned);
    }
  };

  enum class State { kCommands, kValue, kValueCrlf, kDiscard };

  struct Conn {
    int fd = -1;
    std::string in;  // received, unparsed bytes are in[start, in.size())
    size_t start = 0;
    State state = State::kCommands;
    Reservation reservation;  // kValue/kValueCrlf: the SET's entry
    uint64_t value_done = 0;  // value bytes received so far
    uint64_t value_len = 0;
    uint64_t discard_left = 0;
    std::deque<OutChunk> out;
    size_t out_bytes = 0;
    bool close_after_flush = false;
    bool reading = true;
    bool want_write = false;
    absl::Time last_activity;
    absl::Time request_started = absl::InfiniteFuture();
  };

  void Accept();
  void OnEvent(Conn* c, uint32_t events);
  // Returns false once the connection has been closed.
  bool ReadSome(Conn* c);
  void Process(Conn* c);
  void Execute(Conn* c, const std::vector<absl::string_view>& args);
  void BeginSet(Conn* c, absl::string_view key, uint64_t value_len);
  void FinishSet(Conn* c);
  bool Flush(Conn* c);
  void UpdateInterest(Conn* c);
  void Close(Conn* c);
  void CheckTimeouts();
  void ProtocolError(Conn* c, absl::string_view msg);

  // Reply helpers.
  std::string& Tail(Conn* c);
  void Reply(Conn* c, absl::string_view raw) {
    Tail(c).append(raw.data(), raw.size());
    c->out_bytes += raw.size();
  }
  void ReplyError(Conn* c, absl::string_view msg);
  void ReplyValue(Conn* c, PinnedValue v);
  void ReplyStatus(Conn* c, const absl::Status& s) {
    if (s.ok())
      Reply(c, "+OK\r\n");
    else
      ReplyError(c, ErrorText(s));
  }

  KvStore* const store_;
  const RespServerOptions& options_;
  Counters* const counters_;
  const int listen_fd_;
  resp::RequestLimits limits_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::unique_ptr<KvStore::Writer> writer_;
  absl::flat_hash_map<int, std::unique_ptr<Conn>> conns_;
};

RespServer::Loop::~Loop() {
  for (auto& [fd, c] : conns_) {
    if (c->reservation.ptr != nullptr) writer_->Done(c->reservation);
    close(fd);
  }
  conns_.clear();
  writer_.reset();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
}

absl::Status RespServer::Loop::Init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || event_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll/eventfd: ", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.events = EPOLLIN;
  ev.data.fd = event_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev);
  writer_ = store_->NewWriter();
  return absl::OkStatus();
}

void RespServer::Loop::Run() {
  epoll_event events[256];
  absl::Time next_timeout_check = absl::Now() + absl::Seconds(1);
  while (!stop_.load(std::memory_order_relaxed)) {
    int n = epoll_wait(epoll_fd_, events, 256, 250);
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
        OnEvent(it->second.get(), events[i].events);
      }
    }
    if (absl::Now() >= next_timeout_check) {
      CheckTimeouts();
      next_timeout_check = absl::Now() + absl::Seconds(1);
    }
  }
}

void RespServer::Loop::Accept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        LOG(WARNING) << "accept4: " << std::strerror(errno);
      }
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->last_activity = absl::Now();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    conns_[fd] = std::move(c);
    counters_->accepted++;
    counters_->active++;
  }
}

void RespServer::Loop::OnEvent(Conn* c, uint32_t events) {
  if (events & EPOLLOUT) {
    if (!Flush(c)) return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
    if (!c->reading && !(events & (EPOLLHUP | EPOLLERR))) return;
    if (!ReadSome(c)) return;
    Process(c);
    if (conns_.count(c->fd) == 0) return;
    Flush(c);
  }
}

bool RespServer::Loop::ReadSome(Conn* c) {
  // Several reads per wakeup, but bounded so one client cannot starve others.
  for (int round = 0; round < 16; ++round) {
    ssize_t n;
    if (c->state == State::kValue && c->start == c->in.size()) {
      // Straight into the pool entry: the zero-copy receive.
      char* dst = c->reservation.ptr + layout::kEntryHeaderBytes;
      layout::EntryHeader h;
      std::memcpy(&h, c->reservation.ptr, sizeof(h));
      dst += h.key_len + c->value_done;
      n = recv(c->fd, dst, c->value_len - c->value_done, 0);
      if (n > 0) {
        c->value_done += static_cast<uint64_t>(n);
        counters_->bytes_in += n;
        c->last_activity = absl::Now();
        if (c->value_done == c->value_len) c->state = State::kValueCrlf;
        continue;
      }
    } else {
      if (c->start > 0 && c->start == c->in.size()) {
        c->in.clear();
        c->start = 0;
      } else if (c->start > kReadChunk) {
        c->in.erase(0, c->start);
        c->start = 0;
      }
      const size_t old = c->in.size();
      c->in.resize(old + kReadChunk);
      n = recv(c->fd, &c->in[old], kReadChunk, 0);
      c->in.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
      if (n > 0) {
        counters_->bytes_in += n;
        c->last_activity = absl::Now();
        if (static_cast<size_t>(n) < kReadChunk) return true;
        // A full chunk: process before growing the buffer further.
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
    Close(c);
    return false;
  }
  return true;
}

void RespServer::Loop::ProtocolError(Conn* c, absl::string_view msg) {
  counters_->protocol_errors++;
  ReplyError(c, absl::StrCat("ERR ", msg));
  c->close_after_flush = true;
  c->reading = false;
  c->in.clear();
  c->start = 0;
}

void RespServer::Loop::Process(Conn* c) {
  while (!c->close_after_flush) {
    absl::string_view buf(c->in.data() + c->start, c->in.size() - c->start);
    if (c->state == State::kValue) {
      const uint64_t take = std::min<uint64_t>(buf.size(), c->value_len - c->value_done);
      if (take > 0) {
        layout::EntryHeader h;
        std::memcpy(&h, c->reservation.ptr, sizeof(h));
        std::memcpy(c->reservation.ptr + layout::kEntryHeaderBytes + h.key_len + c->value_done,
                    buf.data(), take);
        c->value_done += take;
        c->start += take;
      }
      if (c->value_done < c->value_len) break;
      c->state = State::kValueCrlf;
      continue;
    }
    if (c->state == State::kValueCrlf) {
      if (buf.size() < 2) break;
      if (buf[0] != '\r' || buf[1] != '\n') {
        writer_->Done(c->reservation);
        c->state = State::kCommands;
        ProtocolError(c, "Protocol error: SET value not terminated by CRLF");
        break;
      }
      c->start += 2;
      FinishSet(c);
      continue;
    }
    if (c->state == State::kDiscard) {
      const uint64_t take = std::min<uint64_t>(buf.size(), c->discard_left);
      c->start += take;
      c->discard_left -= take;
      if (c->discard_left > 0) break;
      c->state = State::kCommands;
      continue;
    }
    if (buf.empty()) {
      c->request_started = absl::InfiniteFuture();
      break;
    }
    if (c->out_bytes > options_.max_pending_output) break;  // resume after a flush
    resp::ParsedRequest req = resp::ParseRequest(buf, limits_);
    switch (req.kind) {
      case resp::ParsedRequest::Kind::kNeedMore:
        if (c->request_started == absl::InfiniteFuture()) c->request_started = absl::Now();
        return;
      case resp::ParsedRequest::Kind::kError:
        ProtocolError(c, req.error);
        return;
      case resp::ParsedRequest::Kind::kSetValue:
        c->start += req.consumed;
        c->request_started = absl::Now();
        counters_->commands++;
        BeginSet(c, req.args[1], req.value_len);
        continue;
      case resp::ParsedRequest::Kind::kCommand:
        counters_->commands++;
        // Views into c->in stay valid: nothing below moves the buffer.
        Execute(c, req.args);
        c->start += req.consumed;
        c->request_started = absl::InfiniteFuture();
        continue;
    }
  }
}

void RespServer::Loop::BeginSet(Conn* c, absl::string_view key, uint64_t value_len) {
  counters_->sets++;
  absl::Status s = store_->limits().CheckKey(key);
  if (s.ok()) s = store_->limits().CheckValueLength(value_len);
  if (!s.ok()) {
    if (value_len > store_->limits().max_value_bytes) {
      // Not worth reading what would be thrown away: answer and close.
      counters_->protocol_errors++;
      ReplyError(c, ErrorText(s));
      c->close_after_flush = true;
      c->reading = false;
      return;
    }
    ReplyError(c, ErrorText(s));
    c->state = State::kDiscard;
    c->discard_left = value_len + 2;
    return;
  }
  auto r = writer_->Reserve(key.size(), value_len);
  if (!r.ok()) {
    ReplyError(c, ErrorText(r.status()));
    c->state = State::kDiscard;
    c->discard_left = value_len + 2;
    return;
  }
  c->reservation = *r;
  layout::BeginEntry(r->ptr, key, static_cast<uint32_t>(value_len), store_->Version());
  c->value_len = value_len;
  c->value_done = 0;
  c->state = value_len == 0 ? State::kValueCrlf : State::kValue;
}

void RespServer::Loop::FinishSet(Conn* c) {
  layout::SealEntry(c->reservation.ptr);
  // SealEntry() just computed the checksum over these very bytes.
  absl::Status s =
      store_->Commit(c->reservation.offset, c->reservation.size, /*verify_checksum=*/false);
  writer_->Done(c->reservation);
  c->state = State::kCommands;
  c->request_started = absl::InfiniteFuture();
  ReplyStatus(c, s);
}

std::string& RespServer::Loop::Tail(Conn* c) {
  if (c->out.empty() || c->out.back().pinned.value().data() != nullptr) c->out.emplace_back();
  return c->out.back().owned;
}

void RespServer::Loop::ReplyError(Conn* c, absl::string_view msg) {
  // RESP error lines cannot carry CR/LF.
  std::string clean(msg);
  for (char& ch : clean) {
    if (ch == '\r' || ch == '\n') ch = ' ';
  }
  Reply(c, absl::StrCat("-", clean, "\r\n"));
}

void RespServer::Loop::ReplyValue(Conn* c, PinnedValue v) {
  const absl::string_view value = v.value();
  Reply(c, absl::StrCat("$", value.size(), "\r\n"));
  if (!value.empty()) {
    OutChunk chunk;
    chunk.view = value;
    chunk.pinned = std::move(v);
    c->out.push_back(std::move(chunk));
    c->out_bytes += value.size();
  }
  Reply(c, "\r\n");
  counters_->gets++;
}

void RespServer::Loop::Execute(Conn* c, const std::vector<absl::string_view>& args) {
  const absl::string_view cmd = args[0];
  const size_t argc = args.size();
  auto arity_error = [&] {
    ReplyError(c, absl::StrCat("ERR wrong number of arguments for '", absl::AsciiStrToLower(cmd),
                               "' command"));
  };
  if (CommandIs(cmd, "GET")) {
    if (argc != 2) return arity_error();
    if (absl::Status s = store_->limits().CheckKey(args[1]); !s.ok()) {
      return ReplyError(c, ErrorText(s));
    }
    auto v = store_->Get(args[1]);
    if (v.ok()) return ReplyValue(c, std::move(*v));
    counters_->gets++;
    if (v.status().code() == absl::StatusCode::kNotFound) return Reply(c, "$-1\r\n");
    return ReplyError(c, ErrorText(v.status()));
  }
  if (CommandIs(cmd, "SET")) {
    // SET key value is streamed (kSetValue); anything else has options.
    if (argc < 3) return arity_error();
    return ReplyError(c, "ERR syntax error: SET options (EX, PX, NX, XX, ...) are not supported");
  }
  if (CommandIs(cmd, "PING")) {
    if (argc > 2) return arity_error();
    if (argc == 2) {
      std::string out;
      resp::AppendBulk(&out, args[1]);
      return Reply(c, out);
    }
    return Reply(c, "+PONG\r\n");
  }
  if (CommandIs(cmd, "ECHO")) {
    if (argc != 2) return arity_error();
    std::string out;
    resp::AppendBulk(&out, args[1]);
    return Reply(c, out);
  }
  if (CommandIs(cmd, "DEL") || CommandIs(cmd, "UNLINK") || CommandIs(cmd, "EXISTS")) {
    if (argc < 2) return arity_error();
    const bool del = !CommandIs(cmd, "EXISTS");
    int64_t n = 0;
    for (size_t i = 1; i < argc; ++i) {
      if (absl::Status s = store_->limits().CheckKey(args[i]); !s.ok()) {
        return ReplyError(c, ErrorText(s));
      }
    }
    for (size_t i = 1; i < argc; ++i) {
      n += del ? store_->Delete(args[i]).ok() : store_->Exists(args[i]);
    }
    return Reply(c, absl::StrCat(":", n, "\r\n"));
  }
  if (CommandIs(cmd, "MGET")) {
    if (argc < 2) return arity_error();
    Reply(c, absl::StrCat("*", argc - 1, "\r\n"));
    for (size_t i = 1; i < argc; ++i) {
      auto v = store_->limits().CheckKey(args[i]).ok()
                   ? store_->Get(args[i])
                   : absl::StatusOr<PinnedValue>(absl::NotFoundError(""));
      if (v.ok()) {
        ReplyValue(c, std::move(*v));
      } else {
        Reply(c, "$-1\r\n");
      }
    }
    return;
  }
  if (CommandIs(cmd, "MSET")) {
    if (argc < 3 || argc % 2 != 1) return arity_error();
    for (size_t i = 1; i < argc; i += 2) {
      absl::Status s = store_->limits().CheckKey(args[i]);
      if (s.ok()) s = store_->limits().CheckValueLength(args[i + 1].size());
      if (!s.ok()) return ReplyError(c, ErrorText(s));
    }
    for (size_t i = 1; i < argc; i += 2) {
      absl::Status s = store_->Put(writer_.get(), args[i], args[i + 1]);
      counters_->sets++;
      if (!s.ok()) return ReplyError(c, ErrorText(s));
    }
    return Reply(c, "+OK\r\n");
  }
  if (CommandIs(cmd, "DBSIZE")) {
    return Reply(c, absl::StrCat(":", store_->size(), "\r\n"));
  }
  if (CommandIs(cmd, "SCAN")) {
    if (argc < 2 || argc % 2 != 0) return arity_error();
    uint64_t cursor;
    if (!absl::SimpleAtoi(args[1], &cursor)) return ReplyError(c, "ERR invalid cursor");
    std::string prefix;
    uint64_t count = 10;
    for (size_t i = 2; i + 1 < argc; i += 2) {
      if (CommandIs(args[i], "MATCH")) {
        absl::string_view pattern = args[i + 1];
        // Only prefix patterns ("user:*", "*") are supported: the index is a
        // hash table, so anything else would be a full scan in disguise.
        if (pattern.empty() || pattern.back() != '*' ||
            pattern.substr(0, pattern.size() - 1).find_first_of("*?[\\") !=
                absl::string_view::npos) {
          return ReplyError(c, "ERR only prefix MATCH patterns ending in '*' are supported");
        }
        prefix = std::string(pattern.substr(0, pattern.size() - 1));
      } else if (CommandIs(args[i], "COUNT")) {
        if (!absl::SimpleAtoi(args[i + 1], &count) || count == 0) {
          return ReplyError(c, "ERR value is not an integer or out of range");
        }
        count = std::min<uint64_t>(count, 10000);
      } else {
        return ReplyError(c, "ERR syntax error");
      }
    }
    std::vector<std::string> keys;
    uint64_t next = store_->Scan(cursor, count, prefix, &keys);
    std::string out = "*2\r\n";
    resp::AppendBulk(&out, absl::StrCat(next));
    resp::AppendArrayHeader(&out, keys.size());
    for (const auto& k : keys) resp::AppendBulk(&out, k);
    return Reply(c, out);
  }
  if (CommandIs(cmd, "INFO")) {
    std::string text = options_.info ? options_.info() : "";
    absl::StrAppend(&text, "# Keyspace\r\ndb0:keys=", store_->size(), ",expires=0\r\n");
    std::string out;
    resp::AppendBulk(&out, text);
    return Reply(c, out);
  }
  if (CommandIs(cmd, "COMMAND")) {
    // redis-cli asks for COMMAND DOCS to drive its hints; an empty answer is
    // valid and keeps it working.
    if (argc >= 2 && CommandIs(args[1], "COUNT")) return Reply(c, ":0\r\n");
    return Reply(c, "*0\r\n");
  }
  if (CommandIs(cmd, "HELLO")) {
    if (argc >= 2 && args[1] != "2") {
      return ReplyError(c, "NOPROTO this server speaks RESP2 only");
    }
    std::string out;
    resp::AppendArrayHeader(&out, 14);
    resp::AppendBulk(&out, "server");
    resp::AppendBulk(&out, "kvstore");
    resp::AppendBulk(&out, "version");
    resp::AppendBulk(&out, "0.1.0");
    resp::AppendBulk(&out, "proto");
    resp::AppendInteger(&out, 2);
    resp::AppendBulk(&out, "id");
    resp::AppendInteger(&out, c->fd);
    resp::AppendBulk(&out, "mode");
    resp::AppendBulk(&out, "standalone");
    resp::AppendBulk(&out, "role");
    resp::AppendBulk(&out, "master");
    resp::AppendBulk(&out, "modules");
    resp::AppendArrayHeader(&out, 0);
    return Reply(c, out);
  }
  if (CommandIs(cmd, "CONFIG")) {
    // redis-benchmark reads "save" and "appendonly" at start-up.
    if (argc == 3 && CommandIs(args[1], "GET")) {
      std::string out = "*2\r\n";
      resp::AppendBulk(&out, args[2]);
      resp::AppendBulk(&out, CommandIs(args[2], "appendonly") ? "no" : "");
      return Reply(c, out);
    }
    return ReplyError(c, "ERR only CONFIG GET is supported");
  }
  if (CommandIs(cmd, "AUTH")) {
    return ReplyError(c, "ERR AUTH called without any password configured");
  }
  if (CommandIs(cmd, "SELECT")) {
    if (argc == 2 && args[1] == "0") return Reply(c, "+OK\r\n");
    return ReplyError(c, "ERR only database 0 exists");
  }
  if (CommandIs(cmd, "CLIENT")) return Reply(c, "+OK\r\n");
  if (CommandIs(cmd, "QUIT")) {
    Reply(c, "+OK\r\n");
    c->close_after_flush = true;
    c->reading = false;
    return;
  }
  std::string name(cmd.substr(0, 64));
  for (char& ch : name) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(ch))) ch = '?';
  }
  ReplyError(c, absl::StrCat("ERR unknown command '", name, "'"));
}

bool RespServer::Loop::Flush(Conn* c) {
  while (!c->out.empty()) {
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
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      Close(c);
      return false;
    }
    counters_->bytes_out += w;
    c->last_activity = absl::Now();
    size_t left = static_cast<size_t>(w);
    c->out_bytes -= std::min(c->out_bytes, left);
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
    if (c->reading && c->start < c->in.size() && c->state == State::kCommands) {
      Process(c);
      if (conns_.count(c->fd) == 0) return false;
      if (!c->out.empty()) return Flush(c);
    }
  }
  UpdateInterest(c);
  return true;
}

void RespServer::Loop::UpdateInterest(Conn* c) {
  const bool want_write = !c->out.empty();
  const bool want_read = c->reading && c->out_bytes <= options_.max_pending_output;
  epoll_event ev{};
  ev.events = (want_read ? (EPOLLIN | EPOLLRDHUP) : 0) | (want_write ? EPOLLOUT : 0);
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
}

void RespServer::Loop::Close(Conn* c) {
  if (c->reservation.ptr != nullptr) writer_->Done(c->reservation);  // uncommitted: dead space
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  counters_->active--;
  conns_.erase(c->fd);  // destroys c, releasing pinned replies
}

void RespServer::Loop::CheckTimeouts() {
  const absl::Time now = absl::Now();
  std::vector<Conn*> expired;
  for (auto& [fd, c] : conns_) {
    const bool mid_request = c->state != State::kCommands || c->start < c->in.size();
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
  for (Conn* c : expired) {
    counters_->timeouts++;
    // Best effort: tell the client why, then close.
    static constexpr char kMsg[] = "-ERR connection timed out\r\n";
    (void)!send(c->fd, kMsg, sizeof(kMsg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    Close(c);
  }
}

// ---------------------------------------------------------------------------

RespServer::RespServer(KvStore* store, const RespServerOptions& options)
    : store_(store), options_(options) {}

absl::StatusOr<std::unique_ptr<RespServer>> RespServer::Start(KvStore* store,
                                                              const RespServerOptions& options) {
  if (options.threads < 1) return absl::InvalidArgumentError("--resp_threads must be at least 1");
  std::unique_ptr<RespServer> server(new RespServer(store, options));
  server->counters_ = std::make_unique<Counters>();
  Counters* counters = server->counters_.get();
  // One listening socket shared by every loop (EPOLLEXCLUSIVE wakes one
  // loop per connection), owned by the server.
  auto fd = Listen(options.bind_address, options.port);
  if (!fd.ok()) return fd.status();
  server->listen_fd_ = *fd;
  server->port_ = BoundPort(*fd);
  for (int i = 0; i < options.threads; ++i) {
    auto loop = std::make_unique<Loop>(store, server->options_, counters, *fd);
    if (absl::Status s = loop->Init(); !s.ok()) return s;
    server->loops_.push_back(std::move(loop));
  }
  for (auto& loop : server->loops_) {
    server->threads_.emplace_back([l = loop.get()] { l->Run(); });
  }
  return server;
}

void RespServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& loop : loops_) loop->Wake();
  for (auto& t : threads_) t.join();
  threads_.clear();
  loops_.clear();
}

RespServer::~RespServer() {
  Stop();
  if (listen_fd_ >= 0) close(listen_fd_);
}

RespServerCounters RespServer::counters() const {
  const Counters* c = counters_.get();
  RespServerCounters out;
  out.connections_accepted = c->accepted;
  out.connections_active = c->active;
  out.commands = c->commands;
  out.gets = c->gets;
  out.sets = c->sets;
  out.protocol_errors = c->protocol_errors;
  out.timeouts = c->timeouts;
  out.bytes_in = c->bytes_in;
  out.bytes_out = c->bytes_out;
  return out;
}

}  // namespace server
}  // namespace kvstore
