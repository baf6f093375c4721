// Copyright 2026 The kvstore Authors.
//
// resp_floor: a RESP responder that stores nothing, to measure the floor of
// server CPU per request that the kernel's TCP path sets on this machine.
//
// It speaks just enough RESP for redis-benchmark's SET and GET rows: every
// request is parsed with the same codec kvserver uses (common/protocol/resp.h),
// SET values are read and dropped, GET answers a fixed --get_bytes value,
// CONFIG an empty array, PING +PONG, anything else +OK. One thread, one
// epoll set, non-blocking sockets, replies written with write() once per
// readable event: the fewest system calls a request/response server on
// epoll can make.
//
// tests/bench/resp_vs_redis.sh runs it beside kvserver and redis-server and
// reports its CPU per operation as the "floor" row: what any server pays
// for the same requests through the socket API before doing any work of
// its own. It is a measuring instrument, never a store: it keeps no data.
//
//   resp_floor --port=N [--get_bytes=4096] [--ready_file=PATH]

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/protocol/resp.h"

ABSL_FLAG(int, port, 0, "TCP port to listen on, on 127.0.0.1 (0: any free port)");
ABSL_FLAG(int, get_bytes, 4096, "size of the value every GET returns");
ABSL_FLAG(std::string, ready_file, "",
          "when set, \"port=N\" is written here once the socket listens");

namespace {

using kvstore::resp::ParsedRequest;

struct Conn {
  std::string in;         // received, unparsed bytes
  std::string out;        // encoded replies not yet written
  uint64_t skip = 0;      // bytes of a SET value (and its CRLF) still to drop
  bool want_out = false;  // registered for EPOLLOUT
};

class Floor {
 public:
  explicit Floor(int get_bytes) {
    kvstore::resp::AppendBulk(&get_reply_, std::string(get_bytes, 'v'));
  }

  // Listens and serves until a fatal error; returns the exit status.
  int Run(int port, const std::string& ready_file);

 private:
  void Accept();
  // Reads what is there, answers every complete request, writes the replies.
  // False when the connection must be closed.
  bool OnReadable(int fd, Conn& c);
  bool Flush(int fd, Conn& c);
  // Answers every complete request at the front of `in`; returns how many
  // of its bytes were used (the rest is an unfinished request).
  size_t Answer(absl::string_view in, Conn& c);

  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  std::string get_reply_;
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;
  kvstore::resp::RequestLimits limits_;
};

int Floor::Run(int port, const std::string& ready_file) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      listen(listen_fd_, 1024) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::fprintf(stderr, "resp_floor: cannot listen on 127.0.0.1:%d: %s\n", port,
                 std::strerror(errno));
    return 1;
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  if (!ready_file.empty()) {
    std::ofstream(ready_file) << "port=" << ntohs(addr.sin_port) << "\n";
  }
  epoll_event events[256];
  for (;;) {
    const int n = epoll_wait(epoll_fd_, events, 256, -1);
    if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "resp_floor: epoll_wait: %s\n", std::strerror(errno));
      return 1;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        Accept();
        continue;
      }
      Conn& c = *conns_[fd];
      const bool ok = (events[i].events & EPOLLIN) ? OnReadable(fd, c) : Flush(fd, c);
      if (!ok) {
        close(fd);  // also leaves the epoll set
        conns_.erase(fd);
      }
    }
  }
}

void Floor::Accept() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: no more pending connections
    const int one = 1;
    // As kvserver and Redis do: replies go out at once, not after Nagle's wait.
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    conns_[fd] = std::make_unique<Conn>();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

bool Floor::OnReadable(int fd, Conn& c) {
  char buf[64 << 10];
  const ssize_t r = read(fd, buf, sizeof(buf));
  if (r == 0) return false;
  if (r < 0) return errno == EAGAIN || errno == EINTR;
  // Parsed where it was read: only an unfinished request's bytes are kept
  // for the next read, so a SET value is never copied (a server that
  // stores nothing need not touch it), only skipped.
  absl::string_view input(buf, static_cast<size_t>(r));
  if (!c.in.empty()) {
    c.in.append(input.data(), input.size());
    input = c.in;
  }
  const size_t used = Answer(input, c);
  std::string rest(input.substr(used));
  c.in.swap(rest);
  return Flush(fd, c);
}

size_t Floor::Answer(absl::string_view in, Conn& c) {
  size_t pos = 0;
  for (;;) {
    if (c.skip > 0) {
      const uint64_t take = std::min<uint64_t>(c.skip, in.size() - pos);
      pos += take;
      c.skip -= take;
      if (c.skip > 0) break;
    }
    ParsedRequest req = kvstore::resp::ParseRequest(in.substr(pos), limits_);
    if (req.kind == ParsedRequest::Kind::kNeedMore) break;
    if (req.kind == ParsedRequest::Kind::kError) {
      kvstore::resp::AppendError(&c.out, req.error);
      return in.size();
    }
    pos += req.consumed;
    if (req.kind == ParsedRequest::Kind::kEmptyLine) continue;  // an empty inline line
    if (req.kind == ParsedRequest::Kind::kSetValue) {
      c.skip = req.value_len + 2;  // the value and its CRLF are dropped
      kvstore::resp::AppendOk(&c.out);
    } else if (kvstore::resp::CommandIs(req.args[0], "GET")) {
      c.out += get_reply_;
    } else if (kvstore::resp::CommandIs(req.args[0], "CONFIG")) {
      kvstore::resp::AppendArrayHeader(&c.out, 0);
    } else if (kvstore::resp::CommandIs(req.args[0], "PING")) {
      kvstore::resp::AppendSimple(&c.out, "PONG");
    } else {
      kvstore::resp::AppendOk(&c.out);
    }
  }
  return pos;
}

bool Floor::Flush(int fd, Conn& c) {
  while (!c.out.empty()) {
    const ssize_t w = write(fd, c.out.data(), c.out.size());
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN) return false;
    if (w <= 0) break;
    c.out.erase(0, static_cast<size_t>(w));
  }
  // EPOLLOUT only while replies are waiting, so the common case makes no
  // epoll_ctl call.
  const bool want_out = !c.out.empty();
  if (want_out != c.want_out) {
    epoll_event ev{};
    ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0u);
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
    c.want_out = want_out;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A RESP responder that stores nothing: the kernel's floor of server CPU per request.\n"
      "SET values are dropped, GET returns --get_bytes bytes. For tests/bench/resp_vs_redis.sh.");
  absl::ParseCommandLine(argc, argv);
  const int get_bytes = absl::GetFlag(FLAGS_get_bytes);
  if (get_bytes < 0 || get_bytes > (64 << 20)) {
    std::fprintf(stderr, "resp_floor: --get_bytes must be 0..67108864, got %d\n", get_bytes);
    return 2;
  }
  Floor floor(get_bytes);
  return floor.Run(absl::GetFlag(FLAGS_port), absl::GetFlag(FLAGS_ready_file));
}
