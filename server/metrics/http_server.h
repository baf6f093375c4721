// Copyright 2026 The kvstore Authors.
//
// MetricsHttpServer: the Prometheus scrape endpoint. Serves GET /metrics (and
// HEAD) with Content-Type "text/plain; version=0.0.4" and the text a source
// produces, normally FormatPrometheusText(registry.TakeSnapshot()); every
// other path is 404. Runs on its own threads (one accepting, two serving), so
// a slow scraper never touches the data path.
//
// Built on Debian's cpp-httplib (@system//:cpp_httplib), kept out of this
// header so that users do not compile OpenSSL headers.

#ifndef KVSTORE_SERVER_METRICS_HTTP_SERVER_H_
#define KVSTORE_SERVER_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/metrics/registry.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace kvstore {
namespace metrics {

// Thread-safety: Start() and Stop() must not run concurrently with each
// other (call them from the thread that owns the server); the text source is
// called on the server's threads, possibly by two scrapes at once, and must be
// thread-safe. port() may be called from any thread.
class MetricsHttpServer {
 public:
  // Returns the body of one GET /metrics.
  using TextSource = std::function<std::string()>;

  // Serves FormatPrometheusText(registry.TakeSnapshot()) on every scrape.
  // `registry` is not owned and must outlive this server.
  explicit MetricsHttpServer(const Registry* registry);
  // Serves whatever `source` returns (tests, or a process that merges text).
  explicit MetricsHttpServer(TextSource source);

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  // Stops the server if it runs.
  ~MetricsHttpServer();

  // Binds `address` (a numeric IP: "127.0.0.1", "0.0.0.0", "::") and `port`
  // (0 picks a free ephemeral port), starts serving, and returns the bound
  // port once the server accepts connections. Errors:
  //   InvalidArgument     port outside 0..65535, or an address that is not
  //                       a numeric IPv4/IPv6 address
  //   FailedPrecondition  already started; the port is in use (the message
  //                       says so); the address is not one of this machine;
  //                       the port needs privileges
  //   Internal            any other failure to bind or to start serving
  // The socket is bound with SO_REUSEADDR only (not cpp-httplib's default
  // SO_REUSEPORT, with which a second server on the same port would bind
  // successfully and take half the scrapes).
  absl::StatusOr<int> Start(absl::string_view address, int port);

  // Stops accepting, waits for requests in progress (at most about a second
  // for an idle keep-alive connection) and joins the threads. Idempotent; the
  // server may be started again afterwards.
  void Stop();

  // The bound port while running, 0 otherwise.
  int port() const { return port_.load(); }

 private:
  TextSource source_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  std::atomic<int> port_{0};
};

}  // namespace metrics
}  // namespace kvstore

#endif  // KVSTORE_SERVER_METRICS_HTTP_SERVER_H_
