// Copyright 2026 The kvstore Authors.

#include "server/metrics/http_server.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/exposition.h"
#include "httplib.h"

namespace kvstore {
namespace metrics {

namespace {

// Two workers: scrapes are rare (seconds apart) and cheap, and cpp-httplib's
// default pool (one thread per core, at least eight) would idle in every
// kvserver. Two let a stuck client not block the next scrape.
constexpr size_t kWorkerThreads = 2;

// Bounds how long Stop() waits for an idle keep-alive connection: cpp-httplib
// checks for shutdown only between requests. Scrapers reconnect every
// interval anyway, so a short keep-alive costs nothing.
constexpr time_t kKeepAliveSeconds = 1;
constexpr time_t kReadWriteTimeoutSeconds = 5;

// How long Start() waits for the accept loop to come up after a successful
// bind. It normally takes well under a millisecond; the bound turns a wedged
// thread into an error instead of a hang.
constexpr absl::Duration kStartTimeout = absl::Seconds(5);

// "host:port", with brackets for IPv6 literals, for error messages.
std::string HostPort(absl::string_view address, int port) {
  if (address.find(':') != absl::string_view::npos) return absl::StrCat("[", address, "]:", port);
  return absl::StrCat(address, ":", port);
}

// Checks that `address` is a numeric IPv4 or IPv6 address, to tell a bad
// address apart from a failed bind (cpp-httplib reports both as "false").
// Numeric only: a bind address names an interface, and resolving a host name
// would make start-up wait on DNS.
absl::Status CheckNumericAddress(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(address.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics HTTP server: '", address,
        "' is not a numeric IP address (e.g. 127.0.0.1, 0.0.0.0, ::): ", gai_strerror(rc)));
  }
  freeaddrinfo(result);
  return absl::OkStatus();
}

// Socket options for the listening socket, replacing cpp-httplib's default
// (SO_REUSEPORT), with which two servers share a port without an error.
// SO_REUSEADDR still lets a restarted kvserver bind while old connections
// linger in TIME_WAIT.
void SetListenSocketOptions(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
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

}  // namespace

MetricsHttpServer::MetricsHttpServer(const Registry* registry)
    : source_([registry] { return FormatPrometheusText(registry->TakeSnapshot()); }) {}

MetricsHttpServer::MetricsHttpServer(TextSource source) : source_(std::move(source)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::StatusOr<int> MetricsHttpServer::Start(absl::string_view address, int port) {
  if (server_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "metrics HTTP server: already serving on port ", port_.load(), "; Stop() it first"));
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics HTTP server: port ", port, " is outside 0..65535"));
  }
  const std::string host(address);
  if (absl::Status s = CheckNumericAddress(host); !s.ok()) return s;

  // A fresh httplib::Server per Start(): its stop() leaves state behind that
  // a later listen does not reset in every version.
  auto server = std::make_unique<httplib::Server>();
  server->new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  server->set_socket_options(SetListenSocketOptions);
  server->set_keep_alive_timeout(kKeepAliveSeconds);
  server->set_read_timeout(kReadWriteTimeoutSeconds, 0);
  server->set_write_timeout(kReadWriteTimeoutSeconds, 0);
  // Copy of the source, not `this`: handlers then stay valid whatever
  // happens to this object's members while a request runs.
  TextSource source = source_;
  server->Get("/metrics", [source](const httplib::Request&, httplib::Response& res) {
    res.set_content(source(), std::string(kPrometheusTextContentType));
  });

  // cpp-httplib returns only success or failure; bind's errno is still set
  // when it returns (the cleanup it does afterwards, close and freeaddrinfo,
  // does not fail), so read it at once.
  errno = 0;
  int bound = 0;
  if (port == 0) {
    bound = server->bind_to_any_port(host);
  } else {
    bound = server->bind_to_port(host, port) ? port : -1;
  }
  if (bound < 0) return BindError(errno, host, port);

  // The listener thread sets `exited` when the accept loop returns, so that
  // the wait below ends also when the loop fails at once.
  auto exited = std::make_shared<std::atomic<bool>>(false);
  httplib::Server* raw = server.get();
  listener_ = std::thread([raw, exited] {
    raw->listen_after_bind();
    exited->store(true);
  });
  // stop() is a no-op until the accept loop has marked itself running, so
  // Start() returns only after that: a Stop() right after Start() then
  // always takes effect instead of leaving the thread serving forever.
  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (!raw->is_running() && !exited->load() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  if (!raw->is_running()) {
    raw->stop();
    // If the loop is wedged rather than exited, joining would hang; detach
    // and leak the server instead (it references no member of ours).
    if (exited->load()) {
      listener_.join();
    } else {
      listener_.detach();
      (void)server.release();
    }
    return absl::InternalError(absl::StrCat("metrics HTTP server: accept loop on ",
                                            HostPort(host, bound), " did not start"));
  }
  server_ = std::move(server);
  port_.store(bound);
  return bound;
}

void MetricsHttpServer::Stop() {
  if (server_ == nullptr) return;
  // stop() closes the listening socket; the accept loop then drains the
  // worker pool (requests in progress finish) and returns.
  server_->stop();
  if (listener_.joinable()) listener_.join();
  server_.reset();
  port_.store(0);
}

}  // namespace metrics
}  // namespace kvstore
