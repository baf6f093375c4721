// Copyright 2026 The kvstore Authors.

#include "server/cluster/peer/peer_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/base/internal/endian.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kvstore {
namespace server {
namespace {

constexpr size_t kLengthBytes = 4;
// The buffer's first size, and how much a recv() asks for at least: one
// batch of a few 4 KiB writes in one call.
constexpr size_t kMinBuffer = 256 << 10;

// poll() on `fd` for `events` (and on `cancel_fd` for input) until
// `deadline`. 1: ready; 0: the deadline passed; -2: cancelled; -1: error.
int WaitFor(int fd, short events, absl::Time deadline, int cancel_fd = -1) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return 0;
    pollfd p[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    const int timeout = static_cast<int>(std::min<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
    const int n = poll(p, cancel_fd >= 0 ? 2 : 1, timeout);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) continue;  // re-checks the deadline
    if (cancel_fd >= 0 && (p[1].revents & POLLIN) != 0) return -2;
    return 1;
  }
}

}  // namespace

void TunePeerSocket(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  const int idle = 15, interval = 5, count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  // Unacknowledged sends fail after as long as probes take to give up.
  const unsigned int user_timeout_ms = (idle + interval * count) * 1000;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

void AppendFrame(const google::protobuf::MessageLite& msg, std::string* out) {
  const size_t size = msg.ByteSizeLong();
  const size_t at = out->size();
  out->resize(at + kLengthBytes + size);
  absl::little_endian::Store32(&(*out)[at], static_cast<uint32_t>(size));
  msg.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(&(*out)[at + kLengthBytes]));
}

ssize_t FrameReader::Receive(int fd, int flags) {
  // Room for the whole frame being received, or kMinBuffer more. The bytes
  // not yet taken move to the front only when room is short, so a batch
  // read in pieces is moved at most once.
  const size_t need = std::max(want_, kLengthBytes);
  if (cap_ - end_ < kMinBuffer / 4 || cap_ - start_ < need) {
    const size_t left = end_ - start_;
    const size_t required = std::max(need, left) + kMinBuffer / 4;
    if (required > cap_) {
      const size_t cap = std::max(kMinBuffer, required);
      std::unique_ptr<char[]> grown(new char[cap]);
      if (left > 0) memcpy(grown.get(), buf_.get() + start_, left);
      buf_ = std::move(grown);
      cap_ = cap;
    } else if (start_ > 0 && left > 0) {
      memmove(buf_.get(), buf_.get() + start_, left);
    }
    start_ = 0;
    end_ = left;
  }
  ssize_t n;
  do {
    n = recv(fd, buf_.get() + end_, cap_ - end_, flags);
  } while (n < 0 && errno == EINTR);
  if (n > 0) end_ += static_cast<size_t>(n);
  return n;
}

absl::StatusOr<std::optional<absl::string_view>> FrameReader::Next() {
  const size_t have = end_ - start_;
  if (have < kLengthBytes) return std::nullopt;
  const uint32_t len = absl::little_endian::Load32(buf_.get() + start_);
  if (len > kMaxPeerFrameBytes) {
    return absl::DataLossError(
        absl::StrCat("peer socket frame of ", len, " bytes: the most is ", kMaxPeerFrameBytes));
  }
  want_ = kLengthBytes + len;
  if (have < want_) return std::nullopt;
  absl::string_view payload(buf_.get() + start_ + kLengthBytes, len);
  start_ += want_;
  want_ = 0;
  if (start_ == end_) start_ = end_ = 0;  // empty: the next recv() starts at the front
  return payload;
}

absl::StatusOr<int> ConnectTo(const std::string& host_port, absl::Time deadline, int cancel_fd) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(host_port.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer address '", host_port, "' is not host:port"));
  }
  const std::string host = host_port.substr(0, colon);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.c_str(), nullptr, &hints, &found); e != 0 || found == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve peer host '", host, "': ", gai_strerror(e)));
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket(): ", strerror(errno)));
  TunePeerSocket(fd);
  auto fail = [&](absl::string_view what) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to peer ", host_port, ": ", what));
  };
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) return fail(strerror(errno));
    const int w = WaitFor(fd, POLLOUT, deadline, cancel_fd);
    if (w == 0) return fail("timed out");
    if (w == -2) return fail("cancelled");
    int err = 0;
    socklen_t len = sizeof(err);
    if (w < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return fail(strerror(err));
  }
  return fd;
}

absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline, int cancel_fd) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("peer socket send: ", strerror(errno)));
    }
    const int w = WaitFor(fd, POLLOUT, deadline, cancel_fd);
    if (w == -2) return absl::CancelledError("peer socket: cancelled");
    if (w == 0) return absl::DeadlineExceededError("peer socket: no room to send by the deadline");
    if (w < 0) return absl::UnavailableError(absl::StrCat("peer socket poll: ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ReadFrame(int fd, FrameReader& reader, google::protobuf::MessageLite* msg,
                       absl::Time deadline, int cancel_fd) {
  absl::StatusOr<absl::string_view> frame = NextFrame(fd, reader, deadline, cancel_fd);
  if (!frame.ok()) return frame.status();
  if (!msg->ParseFromArray(frame->data(), static_cast<int>(frame->size()))) {
    return absl::DataLossError("peer socket frame does not parse");
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::string_view> NextFrame(int fd, FrameReader& reader, absl::Time deadline,
                                            int cancel_fd) {
  for (;;) {
    absl::StatusOr<std::optional<absl::string_view>> frame = reader.Next();
    if (!frame.ok()) return frame.status();
    if (frame->has_value()) return **frame;
    const ssize_t n = reader.Receive(fd);
    if (n == 0) return absl::UnavailableError("the peer closed the socket");
    if (n > 0) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("peer socket recv: ", strerror(errno)));
    }
    const int w = WaitFor(fd, POLLIN, deadline, cancel_fd);
    if (w == -2) return absl::CancelledError("peer socket: cancelled");
    if (w == 0) return absl::DeadlineExceededError("peer socket: no frame by the deadline");
    if (w < 0) return absl::UnavailableError(absl::StrCat("peer socket poll: ", strerror(errno)));
  }
}

}  // namespace server
}  // namespace kvstore
