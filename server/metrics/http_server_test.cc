// Copyright 2026 The kvstore Authors.
//
// Starts MetricsHttpServer on an ephemeral loopback port and scrapes it over a
// real socket. The body is also checked by Prometheus' own linter,
// `promtool check metrics` (Debian package prometheus): with CI=true a missing
// promtool fails the test; elsewhere that check is skipped, loudly.

#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/exposition.h"
#include "common/metrics/registry.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace kvstore {
namespace metrics {
namespace {

using ::kvstore::testing::Eventually;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Bazel's test environment is minimal (no PATH lookup to rely on), so the
// Debian location is used as is.
constexpr char kPromtool[] = "/usr/bin/promtool";

// CI=true (or 1), as .ci/run sets it; the BUILD rule passes CI through
// with env_inherit, since Bazel's test environment drops it otherwise.
bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && (std::string(ci) == "true" || std::string(ci) == "1");
}

// A registry shaped like kvserver's: labelled counters, a gauge, a callback
// gauge, a histogram with data, and text that needs escaping. The callback
// series lives as long as the returned handle.
[[nodiscard]] CallbackHandle Populate(Registry* r) {
  r->AddCounter("kvstore_requests_total", "Requests served, by transport and operation.",
                {{"transport", "rdma"}, {"op", "get"}})
      ->Increment(42);
  r->AddCounter("kvstore_requests_total", "Requests served, by transport and operation.",
                {{"transport", "resp"}, {"op", "set"}})
      ->Increment(7);
  r->AddGauge("kvstore_connections", "Open client connections.\nSecond line with a \\.")->Set(3);
  r->AddGauge("kvstore_label_escaping", "A label value with quote, backslash and newline.",
              {{"value", "a\"b\\c\nd"}})
      ->Set(1);
  Histogram* h = r->AddHistogram("kvstore_request_duration_seconds", "Request latency.",
                                 {{"transport", "rdma"}, {"op", "get"}});
  h->ObserveMicros(2);
  h->ObserveMicros(3);
  h->Observe(absl::Milliseconds(12));
  h->Observe(absl::Seconds(30));
  return r->AddCallbackGauge("kvstore_pool_used_bytes", "Pool bytes in use.", {{"pool", "main"}},
                             [] { return int64_t{1} << 30; });
}

// GET http://127.0.0.1:port/path over a real TCP connection. Returns the body
// (or the client error text, with *status = -1 when no response came).
std::string Get(int port, const std::string& path, int* status, std::string* content_type) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get(path.c_str());
  if (!res) {
    *status = -1;
    return httplib::to_string(res.error());
  }
  *status = res->status;
  *content_type = res->get_header_value("Content-Type");
  return res->body;
}

// The endpoint's whole contract: 200 with the exposition and its content
// type on /metrics, fresh values per scrape, 404 elsewhere, gone after Stop.
TEST(MetricsHttpServerTest, ServesMetricsAnd404Elsewhere) {
  Registry registry;
  CallbackHandle pool = Populate(&registry);
  MetricsHttpServer server(&registry);
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  EXPECT_EQ(server.port(), *port);

  int status = 0;
  std::string content_type;
  const std::string body = Get(*port, "/metrics", &status, &content_type);
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(content_type, "text/plain; version=0.0.4");
  EXPECT_EQ(body, FormatPrometheusText(registry.TakeSnapshot()));
  EXPECT_THAT(body, HasSubstr("kvstore_requests_total{op=\"get\",transport=\"rdma\"} 42\n"));
  EXPECT_THAT(body, HasSubstr("kvstore_pool_used_bytes{pool=\"main\"} 1073741824\n"));

  // Values are read per scrape, not cached at start.
  registry
      .AddCounter("kvstore_requests_total", "Requests served, by transport and operation.",
                  {{"transport", "rdma"}, {"op", "get"}})
      ->Increment();
  EXPECT_THAT(Get(*port, "/metrics", &status, &content_type),
              HasSubstr("kvstore_requests_total{op=\"get\",transport=\"rdma\"} 43\n"));

  Get(*port, "/", &status, &content_type);
  EXPECT_EQ(status, 404);
  Get(*port, "/metrics/extra", &status, &content_type);
  EXPECT_EQ(status, 404);

  server.Stop();
  EXPECT_EQ(server.port(), 0);
  Get(*port, "/metrics", &status, &content_type);
  EXPECT_EQ(status, -1) << "still serving after Stop()";
}

// A plain text source, a refused double Start, and a second Start after Stop.
TEST(MetricsHttpServerTest, TextSourceAndRestart) {
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); });
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    int status = 0;
    std::string content_type;
    EXPECT_EQ(Get(*port, "/metrics", &status, &content_type), "kvstore_up 1\n");
    EXPECT_EQ(status, 200);
    // A second Start while running is refused, not a second listener.
    absl::StatusOr<int> again = server.Start("127.0.0.1", 0);
    EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
    server.Stop();
    server.Stop();  // idempotent
  }
}

TEST(MetricsHttpServerTest, StopRightAfterStartDoesNotHang) {
  // Guards the start-up race: stop() before the accept loop runs would be
  // lost and the join would hang (the test would time out).
  MetricsHttpServer server([] { return std::string(); });
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
    server.Stop();
  }
}

// A taken port is a FailedPrecondition that says so and names the port.
TEST(MetricsHttpServerTest, PortInUseIsAClearError) {
  // Hold a port with a plain listening socket, as another process would.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int taken = ntohs(addr.sin_port);

  MetricsHttpServer server([] { return std::string(); });
  absl::StatusOr<int> port = server.Start("127.0.0.1", taken);
  EXPECT_EQ(port.status().code(), absl::StatusCode::kFailedPrecondition) << port.status();
  EXPECT_THAT(std::string(port.status().message()), HasSubstr("already in use"));
  EXPECT_THAT(std::string(port.status().message()), HasSubstr(absl::StrCat(":", taken)));
  close(fd);

  // Two of our own servers on one port: the second must fail too (with
  // cpp-httplib's default SO_REUSEPORT it would bind and share the port).
  MetricsHttpServer first([] { return std::string(); });
  absl::StatusOr<int> p1 = first.Start("127.0.0.1", 0);
  ASSERT_TRUE(p1.ok()) << p1.status();
  MetricsHttpServer second([] { return std::string(); });
  EXPECT_EQ(second.Start("127.0.0.1", *p1).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Arguments that cannot work are refused before any socket is bound.
TEST(MetricsHttpServerTest, BadArguments) {
  MetricsHttpServer server([] { return std::string(); });
  EXPECT_EQ(server.Start("127.0.0.1", 70000).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.Start("127.0.0.1", -1).status().code(), absl::StatusCode::kInvalidArgument);
  // Not numeric: refused without a DNS query.
  absl::StatusOr<int> bad = server.Start("localhost.invalid", 0);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not a numeric IP address"));
  // 192.0.2.1 (TEST-NET-1) is no address of this machine: bind fails, and no
  // packet is sent anywhere.
  absl::StatusOr<int> foreign = server.Start("192.0.2.1", 0);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition) << foreign.status();
  EXPECT_THAT(std::string(foreign.status().message()), HasSubstr("not an address of this machine"));
}

// --- Hostile clients. The port needs no credential, so whoever reaches it
// must not be able to grow the process or keep scrapes out.

// A blocking TCP socket to 127.0.0.1:port; receives time out after 30 s so a
// broken test fails instead of hanging (a correct one never waits that long).
int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close first: that is its right
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Everything the server sends until it closes (or the 30 s receive timeout).
std::string ReadToEnd(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// True once the server has closed `fd` (EOF or reset); false while it is
// open with nothing to read. Never blocks.
bool ClosedByServer(int fd) {
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
  if (n == 0) return true;
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  return false;  // bytes: a reply, which this helper's callers never expect
}

// The peak resident set of this process (VmHWM), in KiB: the server runs in
// this process, so whatever it buffered shows here, even if freed since.
int64_t PeakRssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    int64_t kib = 0;
    absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 6 - 3)), &kib);
    return kib;
  }
  return -1;
}

// `inflated` zero bytes as one gzip member: a few hundred KiB on the wire.
std::string GzipOfZeros(size_t inflated) {
  z_stream z{};
  // 15 + 16: a gzip wrapper rather than zlib's.
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  const std::string zeros(1 << 20, '\0');
  std::string out;
  char buf[1 << 16];
  size_t left = inflated;
  int flush = Z_NO_FLUSH;
  do {
    if (z.avail_in == 0 && flush == Z_NO_FLUSH) {
      const size_t n = std::min(left, zeros.size());
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
      z.avail_in = static_cast<uInt>(n);
      left -= n;
      if (left == 0) flush = Z_FINISH;
    }
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    const int rc = deflate(&z, flush);
    out.append(buf, sizeof(buf) - z.avail_out);
    if (rc == Z_STREAM_END) break;
  } while (true);
  deflateEnd(&z);
  return out;
}

// A request that announces a body is refused from its head alone: the
// server answers without waiting for (or reading) a byte of the body.
TEST(MetricsHttpServerTest, RequestsWithABodyAreRefusedBeforeTheBody) {
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  struct Case {
    std::string head;
    std::string status_line;
  };
  const std::vector<Case> cases = {
      {"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n", "HTTP/1.1 405 "},
      {"PUT /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 405 "},
      {"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
       "Content-Length: 1000000\r\n\r\n",
       "HTTP/1.1 405 "},
      // GET with a body is as unwelcome as a POST.
      {"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n", "HTTP/1.1 413 "},
      {"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 413 "},
  };
  for (const Case& c : cases) {
    const int fd = ConnectTo(*port);
    SendAll(fd, c.head);
    // No body follows: an answer can only come from the head.
    const std::string reply = ReadToEnd(fd);
    EXPECT_THAT(reply, StartsWith(c.status_line)) << "for:\n" << c.head;
    close(fd);
  }
}

// A refusal is written refusal_delay late (a client refused in a loop gets
// a few answers a second), a scrape at once; a client that half-closed
// after its request still reads its refusal. Only lower bounds on time are
// checked: a loaded machine makes answers late, never early.
TEST(MetricsHttpServerTest, RefusalsAreSentLate) {
  MetricsHttpOptions options;
  options.refusal_delay = absl::Milliseconds(300);
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); }, options);
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  for (const char* head : {"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n",
                           "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"}) {
    const int fd = ConnectTo(*port);
    const absl::Time start = absl::Now();
    SendAll(fd, head);
    shutdown(fd, SHUT_WR);
    const std::string reply = ReadToEnd(fd);
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(300)) << head;
    EXPECT_THAT(reply, ::testing::AnyOf(StartsWith("HTTP/1.1 405 "), StartsWith("HTTP/1.1 404 ")))
        << head;
    close(fd);
  }
  const int fd = ConnectTo(*port);
  SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(ReadToEnd(fd), StartsWith("HTTP/1.1 200 "));
  close(fd);
  EXPECT_EQ(server.stats().refusals_delayed, 2u);
}

// 256 MiB of zeros as a gzip body of a few hundred KiB: the server must not
// inflate (or even buffer) it. Measured on this process's peak RSS, since
// the server runs here.
TEST(MetricsHttpServerTest, GzipBombDoesNotGrowTheServer) {
  const std::string bomb = GzipOfZeros(size_t{256} << 20);
  ASSERT_LT(bomb.size(), size_t{1} << 20);
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  const int64_t before = PeakRssKiB();
  ASSERT_GT(before, 0);
  for (const char* method : {"POST", "GET"}) {
    const int fd = ConnectTo(*port);
    const std::string head = absl::StrCat(method,
                                          " /metrics HTTP/1.1\r\nHost: x\r\n"
                                          "Content-Encoding: gzip\r\nContent-Length: ",
                                          bomb.size(), "\r\n\r\n");
    // The body goes out from another thread while this one waits for the
    // answer, as a client that does not wait for 100-continue would send it.
    std::thread sender([&] { SendAll(fd, head + bomb); });
    const std::string reply = ReadToEnd(fd);
    sender.join();
    // The refusal usually arrives; a reset racing it is also a refusal.
    if (!reply.empty()) {
      EXPECT_THAT(reply, ::testing::AnyOf(StartsWith("HTTP/1.1 405 "), StartsWith("HTTP/1.1 413 ")))
          << reply.substr(0, 200);
    }
    close(fd);
  }
  // A scrape still works afterwards.
  int status = 0;
  std::string content_type;
  EXPECT_EQ(Get(*port, "/metrics", &status, &content_type), "kvstore_up 1\n");
  const int64_t grown_kib = PeakRssKiB() - before;
  std::cout << "peak RSS grew by " << grown_kib << " KiB" << std::endl;
  // Inflating would cost 256 MiB; the refusal costs next to nothing.
  EXPECT_LT(grown_kib, 32 << 10) << "the server buffered or inflated the body";
}

// Slow clients that dribble a request head never finish it; however many
// there are, a scrape from another socket is answered. `n` is 2 (as many
// as the old worker pool had threads) and 300 (far over the connection cap).
void SlowSocketsDoNotBlockAScrape(int n) {
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  std::vector<int> slow;
  for (int i = 0; i < n; ++i) {
    slow.push_back(ConnectTo(*port));
    SendAll(slow.back(), "GET /metrics HTTP/1.1\r\n");
  }
  // Keep them dribbling one header byte at a time while the scrape runs, so
  // that a per-read timeout alone would never free them.
  std::atomic<bool> done{false};
  std::thread dribbler([&] {
    while (!done.load()) {
      for (int fd : slow) (void)!send(fd, "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      absl::SleepFor(absl::Milliseconds(500));
    }
  });
  httplib::Client client("127.0.0.1", *port);
  client.set_connection_timeout(30, 0);
  client.set_read_timeout(30, 0);
  auto res = client.Get("/metrics");
  done = true;
  dribbler.join();
  ASSERT_TRUE(res) << "scrape failed with " << n
                   << " slow sockets open: " << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "kvstore_up 1\n");
  for (int fd : slow) close(fd);
}

TEST(MetricsHttpServerTest, TwoSlowSocketsDoNotBlockAScrape) { SlowSocketsDoNotBlockAScrape(2); }

TEST(MetricsHttpServerTest, ThreeHundredSlowSocketsDoNotBlockAScrape) {
  SlowSocketsDoNotBlockAScrape(300);
}

// Connections beyond the cap are not queued: the server keeps at most the
// cap open, dropping the oldest, so the newest (where a scraper's request
// is) stay. The clients keep dribbling their request heads, so no timeout
// of the server can be what frees them.
TEST(MetricsHttpServerTest, ConnectionsBeyondTheCapAreClosed) {
  constexpr int kCap = MetricsHttpOptions().max_connections;
  constexpr int kExtra = 100;
  MetricsHttpOptions options;
  // Only the cap may close anything here, never the deadline.
  options.exchange_timeout = absl::Hours(1);
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); }, options);
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  std::vector<int> fds;
  for (int i = 0; i < kCap + kExtra; ++i) {
    fds.push_back(ConnectTo(*port));
    SendAll(fds.back(), "GET /metrics HTTP/1.1\r\n");
  }
  std::atomic<bool> done{false};
  std::thread dribbler([&] {
    while (!done.load()) {
      for (int fd : fds) (void)!send(fd, "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      absl::SleepFor(absl::Milliseconds(500));
    }
  });
  // The oldest kExtra are closed by the server...
  const bool oldest_closed = Eventually([&] {
    for (int i = 0; i < kExtra; ++i) {
      if (!ClosedByServer(fds[i])) return false;
    }
    return true;
  });
  // ...and the newest kCap are still open.
  int open = 0;
  for (int i = kExtra; i < kCap + kExtra; ++i) open += ClosedByServer(fds[i]) ? 0 : 1;
  done = true;
  dribbler.join();
  EXPECT_TRUE(oldest_closed) << "connections over the cap were kept";
  EXPECT_EQ(open, kCap);
  const MetricsHttpServer::Stats stats = server.stats();
  EXPECT_EQ(stats.open, kCap);
  EXPECT_EQ(stats.dropped_at_cap, static_cast<uint64_t>(kExtra));
  EXPECT_EQ(stats.timed_out, 0u);
  for (int fd : fds) close(fd);
}

// A client that never finishes its request head is closed at the deadline,
// however it dribbles. The deadline is short here; the test only waits for
// the close, it does not time it.
TEST(MetricsHttpServerTest, UnfinishedRequestsAreClosedAtTheDeadline) {
  MetricsHttpOptions options;
  options.exchange_timeout = absl::Milliseconds(200);
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); }, options);
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  const int fd = ConnectTo(*port);
  SendAll(fd, "GET /metrics HTTP/1.1\r\n");
  ASSERT_TRUE(Eventually([&] {
    (void)!send(fd, "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    return ClosedByServer(fd);
  }));
  EXPECT_EQ(server.stats().timed_out, 1u);
  EXPECT_EQ(server.stats().answered, 0u);
  close(fd);
}

// A head longer than max_head_bytes is answered 431 after that many bytes,
// and nothing more is read.
TEST(MetricsHttpServerTest, OversizedHeadIsRefused) {
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  const int fd = ConnectTo(*port);
  SendAll(fd, "GET /metrics HTTP/1.1\r\nX-Padding: ");
  SendAll(fd, std::string(MetricsHttpOptions().max_head_bytes, 'p'));
  EXPECT_THAT(ReadToEnd(fd), StartsWith("HTTP/1.1 431 "));
  close(fd);
}

// A client may shut down its sending side once the request is out (as
// `printf ... | nc -N` does): the end of its stream does not lose the answer.
TEST(MetricsHttpServerTest, ClientThatHalfClosesStillGetsItsAnswer) {
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  const int fd = ConnectTo(*port);
  SendAll(fd, "GET /metrics HTTP/1.0\r\n\r\n");
  shutdown(fd, SHUT_WR);
  EXPECT_THAT(ReadToEnd(fd), ::testing::EndsWith("\r\n\r\nkvstore_up 1\n"));
  close(fd);
}

// HEAD gets the headers of GET without the body; a query string is allowed.
TEST(MetricsHttpServerTest, HeadAndQueryString) {
  MetricsHttpServer server([] { return std::string("kvstore_up 1\n"); });
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  int fd = ConnectTo(*port);
  SendAll(fd, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ReadToEnd(fd),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: "
            "13\r\nConnection: close\r\n\r\n");
  close(fd);
  fd = ConnectTo(*port);
  SendAll(fd, "GET /metrics?name[]=x HTTP/1.0\r\n\r\n");
  const std::string reply = ReadToEnd(fd);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(reply, ::testing::EndsWith("\r\n\r\nkvstore_up 1\n"));
  close(fd);
}

// Runs `promtool check metrics` on `body`; returns its exit status and puts
// its output (problems, one a line) in *output.
int RunPromtool(const std::string& body, std::string* output) {
  const char* tmpdir = std::getenv("TEST_TMPDIR");
  const std::string dir = tmpdir != nullptr ? tmpdir : "/tmp";
  const std::string in = dir + "/metrics.txt";
  const std::string out = dir + "/promtool.out";
  {
    std::ofstream f(in, std::ios::binary);
    f << body;
  }
  const std::string cmd = absl::StrCat(kPromtool, " check metrics < ", in, " > ", out, " 2>&1");
  const int rc = std::system(cmd.c_str());
  std::ifstream r(out);
  output->assign(std::istreambuf_iterator<char>(r), std::istreambuf_iterator<char>());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// promtool (Prometheus' own parser and linter) accepts a real scrape.
TEST(MetricsHttpServerTest, PromtoolAcceptsTheScrape) {
  // In the log and the XML, so that a run shows whether CI reached the test.
  std::cout << "CI=" << (std::getenv("CI") ? std::getenv("CI") : "(unset)") << std::endl;
  RecordProperty("ci", InCi() ? "true" : "false");
  if (access(kPromtool, X_OK) != 0) {
    if (InCi()) {
      FAIL() << kPromtool << " is missing and CI=true: install Debian's prometheus package "
             << "(deploy/setup.sh does); the exposition format check must run in CI";
    }
    GTEST_SKIP() << "SKIPPED: " << kPromtool << " not installed, so the /metrics body was NOT "
                 << "checked by promtool (apt-get install prometheus, or run deploy/setup.sh)";
  }
  Registry registry;
  CallbackHandle pool = Populate(&registry);
  MetricsHttpServer server(&registry);
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  int status = 0;
  std::string content_type;
  const std::string body = Get(*port, "/metrics", &status, &content_type);
  ASSERT_EQ(status, 200) << body;
  ASSERT_THAT(body, StartsWith("# HELP "));

  std::string output;
  const int rc = RunPromtool(body, &output);
  // promtool exits 0 and prints nothing for a clean exposition; lint
  // findings (bad suffixes, missing help) print a line each and exit 1;
  // a parse error exits 1 too.
  EXPECT_EQ(rc, 0) << "promtool check metrics failed:\n" << output << "\non:\n" << body;
  EXPECT_EQ(output, "") << "on:\n" << body;

  // The check itself must be able to fail, or a clean result means nothing.
  std::string bad_output;
  EXPECT_NE(RunPromtool("# TYPE kvstore_bad counter\nkvstore_bad 1\n", &bad_output), 0)
      << "promtool accepted a counter without _total and help: " << bad_output;
}

}  // namespace
}  // namespace metrics
}  // namespace kvstore
