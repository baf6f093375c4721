// Copyright 2026 The kvstore Authors.

#include "server/metrics/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/metrics/exposition.h"
#include "common/sync/thread_name.h"
#include "server/metrics/http_loop.h"

namespace kvstore {
namespace metrics {

namespace {

// Connections the kernel holds until the loop accepts them. The loop
// accepts as fast as they come, so this only absorbs a burst.
constexpr int kListenBacklog = 128;

// "host:port", with brackets for IPv6 literals, for error messages.
std::string HostPort(absl::string_view address, int port) {
  if (address.find(':') != absl::string_view::npos) return absl::StrCat("[", address, "]:", port);
  return absl::StrCat(address, ":", port);
}

// Turns the errno of a failed bind into a status that tells the operator
// what to change.
absl::Status BindError(int err, absl::string_view address, int port) {
  const std::string where = HostPort(address, port);
  switch (err) {
    case EADDRINUSE:
      return absl::FailedPreconditionError(
          absl::StrCat("metrics HTTP server: cannot listen on ", where,
                       ": address already in use (another kvserver or exporter on this port?); "
                       "choose another port, or 0 for any free one"));
    case EADDRNOTAVAIL:
      return absl::FailedPreconditionError(absl::StrCat("metrics HTTP server: cannot listen on ",
                                                        where, ": not an address of this machine"));
    case EACCES:
      return absl::FailedPreconditionError(absl::StrCat("metrics HTTP server: cannot listen on ",
                                                        where,
                                                        ": permission denied (ports below "
                                                        "1024 need privileges)"));
    case 0:
      return absl::InternalError(
          absl::StrCat("metrics HTTP server: cannot listen on ", where, " (no error code)"));
    default:
      return absl::InternalError(
          absl::StrCat("metrics HTTP server: cannot listen on ", where, ": ", std::strerror(err)));
  }
}

// Resolves `address` as a numeric IPv4 or IPv6 address only (a bind address
// names an interface, and resolving a host name would make start-up wait on
// DNS), then binds and listens. Returns the non-blocking listening socket.
absl::StatusOr<int> Listen(const std::string& address, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(address.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics HTTP server: '", address,
        "' is not a numeric IP address (e.g. 127.0.0.1, 0.0.0.0, ::): ", gai_strerror(rc)));
  }
  const int fd = socket(result->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    freeaddrinfo(result);
    return absl::InternalError(absl::StrCat("metrics HTTP server: socket: ", std::strerror(err)));
  }
  // SO_REUSEADDR lets a restarted kvserver bind while old connections linger
  // in TIME_WAIT; not SO_REUSEPORT, with which a second server would bind
  // the same port without an error and take half the scrapes.
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  int err = 0;
  if (bind(fd, result->ai_addr, result->ai_addrlen) != 0 || listen(fd, kListenBacklog) != 0) {
    err = errno;
  }
  freeaddrinfo(result);
  if (err != 0) {
    close(fd);
    return BindError(err, address, port);
  }
  return fd;
}

// The port the kernel picked for a socket bound to port 0.
int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(const Registry* registry, MetricsHttpOptions options)
    : source_([registry] { return FormatPrometheusText(registry->TakeSnapshot()); }),
      options_(options) {}

MetricsHttpServer::MetricsHttpServer(TextSource source, MetricsHttpOptions options)
    : source_(std::move(source)), options_(options) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::StatusOr<int> MetricsHttpServer::Start(absl::string_view address, int port) {
  if (loop_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "metrics HTTP server: already serving on port ", port_.load(), "; Stop() it first"));
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics HTTP server: port ", port, " is outside 0..65535"));
  }
  // 64 bytes hold the shortest useful request line and a Host field.
  if (options_.max_connections < 1 || options_.max_head_bytes < 64 ||
      options_.exchange_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "metrics HTTP server: max_connections must be >= 1, max_head_bytes >= 64 and "
        "exchange_timeout > 0");
  }
  const std::string host(address);
  absl::StatusOr<int> fd = Listen(host, port);
  if (!fd.ok()) return fd.status();
  const int bound = port == 0 ? BoundPort(*fd) : port;
  // The loop owns the socket from here (it closes it even if Init() fails).
  auto loop = std::make_unique<http_internal::HttpLoop>(*fd, options_, source_);
  if (absl::Status s = loop->Init(); !s.ok()) return s;
  if (bound <= 0) {
    return absl::InternalError(absl::StrCat("metrics HTTP server: getsockname on ",
                                            HostPort(host, port), ": ", std::strerror(errno)));
  }
  // The socket listens already: a connection made before the thread runs
  // waits in the backlog, so Start() need not wait for the loop.
  loop_ = std::move(loop);
  http_internal::HttpLoop* raw = loop_.get();
  thread_ = std::thread([raw] {
    NameThread("kv-metrics-http");
    raw->Run();
  });
  port_.store(bound);
  return bound;
}

void MetricsHttpServer::Stop() {
  if (loop_ == nullptr) return;
  // The eventfd stays readable until the loop reads it, so a Stop() right
  // after Start() is never lost.
  loop_->Wake();
  if (thread_.joinable()) thread_.join();
  loop_.reset();  // closes every socket, the listening one included
  port_.store(0);
}

MetricsHttpServer::Stats MetricsHttpServer::stats() const {
  return loop_ != nullptr ? loop_->stats() : Stats();
}

}  // namespace metrics
}  // namespace kvstore
