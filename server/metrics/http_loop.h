// Copyright 2026 The kvstore Authors.
//
// HttpLoop: the metrics endpoint's event loop, on one thread of its own.
// It accepts from a listening socket, reads each connection's request head
// (at most MetricsHttpOptions::max_head_bytes of it), hands it to
// AnswerHttp (http_exchange.h), writes the answer and closes. Internal to
// server/metrics; MetricsHttpServer owns it.
//
// Why a loop and not a pool of workers: the port needs no credential, so a
// handful of sockets that send nothing, or dribble a byte at a time, must
// not occupy whatever serves the scrape. Here no connection blocks another;
// the bounds are
//   * max_connections open at once: at the cap, a new connection first
//     closes the oldest one. The oldest is the slowest (every exchange has
//     the same deadline), while a scraper sends its whole request at once,
//     so a flood of idle sockets sheds itself and scrapes still get in;
//   * exchange_timeout from accept to the last byte of the answer, however
//     the bytes trickle in or out;
//   * max_head_bytes read per connection, nothing after the head (no body
//     is ever read, so no upload can make the process buffer or inflate
//     anything).
// Nothing is queued: every accepted socket is either being served or
// closed. A refusal (any answer but 200) waits refusal_delay before it is
// written, on a connection that is no longer read (its deadline and the
// cap still apply), so a client that calls again as soon as it is refused
// makes a few calls a second.
//
// Thread safety: construct and Init() on one thread, Run() on the loop's
// thread; Wake() and stats() from any thread. The destructor closes every
// socket (the listening one included) and must run after Run() returned.

#ifndef KVSTORE_SERVER_METRICS_HTTP_LOOP_H_
#define KVSTORE_SERVER_METRICS_HTTP_LOOP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/metrics/http_server.h"

namespace kvstore {
namespace metrics {
namespace http_internal {

class HttpLoop {
 public:
  // Takes ownership of `listen_fd` (bound, listening, non-blocking).
  HttpLoop(int listen_fd, const MetricsHttpOptions& options, MetricsHttpServer::TextSource source);
  ~HttpLoop();
  HttpLoop(const HttpLoop&) = delete;
  HttpLoop& operator=(const HttpLoop&) = delete;

  // Creates the epoll set and the wake-up eventfd. Internal on failure.
  absl::Status Init();
  // Serves until Wake(). Blocks; call on the loop's own thread.
  void Run();
  // Makes Run() return within one wait. Any thread; idempotent.
  void Wake();
  MetricsHttpServer::Stats stats() const;

 private:
  struct Conn {
    int fd = -1;
    absl::Time deadline;
    std::string in;   // the request head so far (at most max_head_bytes)
    std::string out;  // the answer, once decided
    size_t sent = 0;
    uint64_t id = 0;    // unique per accept: descriptor numbers are reused
    bool held = false;  // a refusal waiting for its time (delayed_)
  };
  // A refusal held back: the connection (by descriptor and id) and when
  // its answer is written. Constant delay, so in time order.
  struct Delayed {
    int fd;
    uint64_t id;
    absl::Time due;
  };
  using ConnList = std::list<Conn>;

  void Accept();
  // Reads what the socket has and answers once the head is decided.
  void OnReadable(ConnList::iterator it);
  // Writes the rest of the answer; closes once it is all out.
  void OnWritable(ConnList::iterator it);
  // Closes connections past their deadline (the oldest come first).
  void ExpireOld(absl::Time now);
  // Starts writing the held refusals whose time has come.
  void ReleaseDue(absl::Time now);
  void Close(ConnList::iterator it);
  // How long epoll_wait may sleep: until the oldest deadline, at most 1 s.
  int WaitMillis(absl::Time now) const;

  const int listen_fd_;
  const MetricsHttpOptions options_;
  const MetricsHttpServer::TextSource source_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::atomic<bool> stop_{false};
  // In accept order, which is also deadline order; the cap drops the front.
  ConnList conns_;
  absl::flat_hash_map<int, ConnList::iterator> by_fd_;
  std::deque<Delayed> delayed_;
  uint64_t next_id_ = 1;
  // options_.refusal_delay, at most half of exchange_timeout.
  const absl::Duration refusal_delay_;

  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> dropped_at_cap_{0};
  std::atomic<uint64_t> timed_out_{0};
  std::atomic<uint64_t> answered_{0};
  std::atomic<uint64_t> refusals_delayed_{0};
  std::atomic<int> open_{0};
};

}  // namespace http_internal
}  // namespace metrics
}  // namespace kvstore

#endif  // KVSTORE_SERVER_METRICS_HTTP_LOOP_H_
