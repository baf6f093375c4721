// Copyright 2026 The kvstore Authors.
//
// MetricsHttpServer: the Prometheus scrape endpoint. Serves GET /metrics (and
// HEAD) with Content-Type "text/plain; version=0.0.4" and the text a source
// produces, normally FormatPrometheusText(registry.TakeSnapshot()); any other
// path is 404, any other method 405, and a request announcing a body 413,
// all decided from the request head without reading a body
// (http_exchange.h). Runs one event loop on a thread of its own
// (http_loop.h), so a slow scraper never touches the data path.
//
// The port needs no credential, so it is built to be cheap to abuse: at most
// MetricsHttpOptions::max_connections sockets are held (the oldest is
// dropped for a new one), each must complete its exchange within
// exchange_timeout, and no more than max_head_bytes are read from any.
// kvserver binds it to loopback unless --metrics_listen says otherwise.

#ifndef KVSTORE_SERVER_METRICS_HTTP_SERVER_H_
#define KVSTORE_SERVER_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"

namespace kvstore {
namespace metrics {

namespace http_internal {
class HttpLoop;
}  // namespace http_internal

// Bounds of the endpoint; the defaults suit kvserver (a scrape every few
// seconds from one or two Prometheus servers).
struct MetricsHttpOptions {
  // Sockets held open at once. At the cap a new connection closes the
  // oldest one first (see http_loop.h). At least 1.
  int max_connections = 64;
  // From accept to the last byte of the answer: a client that has not sent
  // its whole request head, or not read the answer, by then is closed.
  absl::Duration exchange_timeout = absl::Seconds(3);
  // The longest request head (request line and headers) read; a longer one
  // is answered 431. A scraper's is a few hundred bytes.
  size_t max_head_bytes = 8 << 10;
  // An answer other than 200 (a wrong path or method, a body, a bad head)
  // is sent this late, and at most half of exchange_timeout: nothing but a
  // scraper has a reason to call, and a client refused in a loop (a POST of
  // a gzip bomb, again and again) then gets a few refusals a second instead
  // of thousands. Zero: at once.
  absl::Duration refusal_delay = absl::Milliseconds(250);
};

// Thread-safety: Start() and Stop() must not run concurrently with each
// other (call them from the thread that owns the server); the text source is
// called on the server's thread (one scrape at a time) and must be safe to
// call from it. port() may be called from any thread, stats() from any
// thread but not during Start() or Stop().
class MetricsHttpServer {
 public:
  // Returns the body of one GET /metrics.
  using TextSource = std::function<std::string()>;

  // What the endpoint has done since Start() (for tests and the log).
  struct Stats {
    uint64_t accepted = 0;
    uint64_t dropped_at_cap = 0;    // closed to make room under max_connections
    uint64_t timed_out = 0;         // closed at exchange_timeout
    uint64_t answered = 0;          // answers written in full, any status
    uint64_t refusals_delayed = 0;  // answers other than 200 held back refusal_delay
    int open = 0;                   // sockets held now
  };

  // Serves FormatPrometheusText(registry.TakeSnapshot()) on every scrape.
  // `registry` is not owned and must outlive this server.
  explicit MetricsHttpServer(const Registry* registry, MetricsHttpOptions options = {});
  // Serves whatever `source` returns (tests, or a process that merges text).
  explicit MetricsHttpServer(TextSource source, MetricsHttpOptions options = {});

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  // Stops the server if it runs.
  ~MetricsHttpServer();

  // Binds `address` (a numeric IP: "127.0.0.1", "0.0.0.0", "::") and `port`
  // (0 picks a free ephemeral port), starts serving, and returns the bound
  // port once the server accepts connections. Errors:
  //   InvalidArgument     port outside 0..65535, an address that is not
  //                       a numeric IPv4/IPv6 address, or options out of
  //                       range (max_connections < 1, max_head_bytes < 64,
  //                       exchange_timeout <= 0)
  //   FailedPrecondition  already started; the port is in use (the message
  //                       says so); the address is not one of this machine;
  //                       the port needs privileges
  //   Internal            any other failure to bind or to start serving
  // The socket is bound with SO_REUSEADDR only (not SO_REUSEPORT, with
  // which a second server on the same port would bind successfully and take
  // half the scrapes).
  absl::StatusOr<int> Start(absl::string_view address, int port);

  // Stops accepting, closes every connection (an answer being written is
  // cut short) and joins the thread. Idempotent; the server may be started
  // again afterwards.
  void Stop();

  // The bound port while running, 0 otherwise.
  int port() const { return port_.load(); }
  // Zeros when not running.
  Stats stats() const;

 private:
  const TextSource source_;
  const MetricsHttpOptions options_;
  std::unique_ptr<http_internal::HttpLoop> loop_;
  std::thread thread_;
  std::atomic<int> port_{0};
};

}  // namespace metrics
}  // namespace kvstore

#endif  // KVSTORE_SERVER_METRICS_HTTP_SERVER_H_
