// Copyright 2026 The kvstore Authors.
//
// Dial() connects (non-blocking connect with a timeout, then blocking);
// Authenticate() does the one AUTH round trip on the fresh socket.

#include "client/internal/tcp/resp_dial.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/protocol/resp.h"
#include "common/status_macros.h"
#include "common/tls/tls_pump.h"
#include "glog/logging.h"

namespace kvstore {
namespace client {

namespace {

// A connected, blocking TCP socket to "host:port", trying each address the
// name resolves to in turn; `timeout` bounds each attempt. kUnavailable with
// the last attempt's error when none connects.
absl::StatusOr<int> Dial(const std::string& address, absl::Duration timeout) {
  std::pair<std::string, std::string> hp = absl::StrSplit(address, absl::MaxSplits(':', 1));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(hp.first.c_str(), hp.second.c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", address, ": ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", address));
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    // Non-blocking for the connect only: a blocking connect() to an
    // unreachable host waits out the kernel's SYN retries, far beyond any
    // timeout a caller asks for. CLOEXEC: the socket is not inherited by a
    // child the application may exec.
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      // Writable means the handshake ended; SO_ERROR says how. poll() timing
      // out (rc 0) is reported as ETIMEDOUT.
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (rc == 1 && err == 0) {
        rc = 0;
      } else {
        errno = rc == 0 ? ETIMEDOUT : err;
        rc = -1;
      }
    }
    if (rc == 0) {
      // Blocking from here on: the reader thread sleeps in recv() and
      // senders in sendmsg(). NODELAY: a pipelined request is usually one
      // small write, which Nagle's algorithm would hold back until the
      // previous one is acknowledged.
      int flags = fcntl(fd, F_GETFL, 0);
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      freeaddrinfo(res);
      return fd;
    }
    last = absl::UnavailableError(absl::StrCat("connect ", address, ": ", std::strerror(errno)));
    close(fd);
  }
  freeaddrinfo(res);
  return last;
}

// Writes all of `data`, retrying on EINTR and short writes. MSG_NOSIGNAL: a
// peer that has gone away is an EPIPE error, not a SIGPIPE.
absl::Status SendAll(int fd, absl::string_view data, const std::string& address) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(absl::StrCat("send to ", address, ": ", std::strerror(errno)));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Reads one whole reply by `deadline`. Only one request was sent, so a
// well-behaved server sends nothing after it; bytes beyond the reply mean
// the framing cannot be trusted.
// `command` names the request in errors ("AUTH").
absl::StatusOr<resp::Reply> ReadOneReply(int fd, absl::Time deadline, const std::string& address,
                                         absl::string_view command) {
  std::string buf;
  char chunk[4096];
  // An AUTH or READONLY reply is one short line; bound what a hostile peer
  // can send.
  resp::ReplyLimits limits;
  limits.max_bulk_bytes = 1 << 16;
  limits.max_elements = 16;
  for (;;) {
    absl::StatusOr<resp::ParsedReply> parsed = resp::ParseReply(buf, limits);
    if (!parsed.ok()) {
      return absl::InternalError(absl::StrCat("malformed reply to ", command, " from ", address,
                                              ": ", parsed.status().message()));
    }
    resp::ParsedReply& r = *parsed;
    if (r.complete) {
      if (r.consumed != buf.size()) {
        return absl::InternalError(
            absl::StrCat("unexpected bytes after ", command, " reply from ", address));
      }
      return std::move(r.reply);
    }
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    pollfd p{fd, POLLIN, 0};
    const int rc = left > 0 ? poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30))) : 0;
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) {
      return absl::DeadlineExceededError(absl::StrCat("no reply to ", command, " from ", address));
    }
    const ssize_t n = rc < 0 ? -1 : recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("connection to ", address, " lost during ", command,
                       n < 0 ? absl::StrCat(": ", std::strerror(errno)) : ""));
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
}

// One AUTH round trip. Any error reply is an authentication failure: the
// server refused this token (or has none and refuses AUTH), and sending the
// same token again cannot succeed, so the caller must not retry.
absl::Status Authenticate(int fd, absl::string_view token, absl::Time deadline,
                          const std::string& address) {
  // Multi-bulk rather than inline: the token is sent byte for byte.
  KV_RETURN_IF_ERROR(SendAll(
      fd, absl::StrCat("*2\r\n$4\r\nAUTH\r\n$", token.size(), "\r\n", token, "\r\n"), address));
  KV_ASSIGN_OR_RETURN(resp::Reply reply, ReadOneReply(fd, deadline, address, "AUTH"));
  if (reply.type == resp::Reply::Type::kError) {
    return absl::UnauthenticatedError(
        absl::StrCat("the RESP port ", address, " refused the token: ", reply.str));
  }
  if (reply.type == resp::Reply::Type::kSimple && reply.str == "OK") return absl::OkStatus();
  return absl::InternalError(absl::StrCat("unexpected reply to AUTH from ", address));
}

// One READONLY round trip (cluster replica reads). An error reply is not
// fatal: a server that does not know READONLY answers a backup's reads with
// a kMoved refusal, and the cluster client then reads from the primary.
absl::Status ReadOnly(int fd, absl::Time deadline, const std::string& address) {
  KV_RETURN_IF_ERROR(SendAll(fd, "*1\r\n$8\r\nREADONLY\r\n", address));
  KV_ASSIGN_OR_RETURN(resp::Reply reply, ReadOneReply(fd, deadline, address, "READONLY"));
  if (reply.type == resp::Reply::Type::kError) {
    LOG_FIRST_N(WARNING, 1) << "kvstore client: " << address
                            << " refused READONLY (replica reads fall back to primaries): "
                            << reply.str;
  }
  return absl::OkStatus();
}

// TLS over the connected socket `fd` (closed on error): handshake, then a
// detached bridge thread between it and one end of a socketpair; returns
// the other end, blocking.
absl::StatusOr<int> StartTls(int fd, const std::string& address, absl::Duration timeout,
                             const RespTls& tls) {
  SSL* ssl = SSL_new(tls.context.get());
  std::string host = tls.server_name;
  if (host.empty()) {
    host = std::string(address.substr(0, address.rfind(':')));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
  }
  absl::Status s = ssl == nullptr ? absl::InternalError("SSL_new failed") : absl::OkStatus();
  if (s.ok()) s = tls::ConfigureClient(ssl, host);
  int pair[2] = {-1, -1};
  if (s.ok()) {
    SSL_set_fd(ssl, fd);
    SSL_set_connect_state(ssl);
    tls::SetNonBlocking(fd);
    s = tls::Handshake(ssl, fd, absl::Now() + timeout);
    if (!s.ok()) {
      s = absl::UnavailableError(absl::StrCat("RESP ", address, ": ", s.message()));
    }
  }
  if (s.ok() && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    s = absl::UnavailableError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  if (!s.ok()) {
    if (ssl != nullptr) SSL_free(ssl);
    close(fd);
    return s;
  }
  tls::SetNonBlocking(pair[1]);
  // The thread owns ssl, fd and pair[1], and keeps the context alive.
  std::thread([ssl, fd, bridge = pair[1], context = tls.context] {
    (void)tls::Pump(ssl, fd, bridge);
    SSL_free(ssl);
    close(fd);
    close(bridge);
  }).detach();
  return pair[0];
}

}  // namespace

absl::StatusOr<int> DialResp(const std::string& address, absl::Duration timeout,
                             absl::string_view auth_token, bool readonly, const RespTls* tls) {
  KV_ASSIGN_OR_RETURN(int fd, Dial(address, timeout));
  if (tls != nullptr) {
    KV_ASSIGN_OR_RETURN(fd, StartTls(fd, address, timeout, *tls));
  }
  absl::Status s;
  if (!auth_token.empty()) s = Authenticate(fd, auth_token, absl::Now() + timeout, address);
  if (s.ok() && readonly) s = ReadOnly(fd, absl::Now() + timeout, address);
  if (!s.ok()) {
    close(fd);
    return s;
  }
  return fd;
}

}  // namespace client
}  // namespace kvstore
