// Copyright 2026 The kvstore Authors.
//
// cache_trace_client: replays one cache trace as a cache-aside client does
// (GET the key; on a miss SET it) and prints one line of JSON:
//   {"trace":..,"target":..,"transport":..,"requests":N,"hits":H,
//    "hit_ratio":H/N,"set_failures":F,"seconds":S,"client":{...}}
// where "client" holds the kvstore client's own counters (GETs the server
// CPU answered instead of one-sided READs, location cache hits/misses/stale,
// ReportReads batches, TCP fallbacks) when the target is kvstore.
//
// The traces are those of tests/bench/cache_bench.py, generated here by a
// generator of our own: the same distributions, NOT the same key sequence
// for a given seed (Python's Mersenne Twister use is not reproduced):
//   zipf  every request names key:<r>, r drawn from Zipf(0.99) over
//         0..keys-1 (rank 0 the most popular) by inverse CDF on a table;
//   scan  each request is, with probability 1/3, the next key of a one-time
//         sequential scan (scan:0, scan:1, ...), else a Zipf draw as above.
// The sequence is a function of --seed, --requests, --keys and --trace
// only (std::mt19937_64 and our own [0,1) mapping: the same on every
// platform), so targets replaying the same flags see the same requests.
//
// Targets:
//   --server=HOST:PORT   the kvstore client library (client/kv_client.h)
//                        with --transport=rdma (GETs are one-sided READs
//                        through the client's location cache; a miss's SET
//                        is a leased RDMA write) or tcp (RESP data port);
//   --resp=HOST:PORT     any RESP server (redis-server, or kvserver's RESP
//                        port) over one plain TCP connection.
// One request at a time in both (no pipelining: cache_bench.py pipelines
// 64 GETs, which can turn a repeat within a batch into a second miss; with
// one at a time a repeat always sees the SET before it).
//
// The client's read reports (ReportReads, 4096 locations per RPC) are always
// on in the library: the server's LRU/LFU sees one-sided reads through them,
// one batch late at most (a final batch under 4096 is never sent).
//
//   bazel run -c opt //tests/bench:cache_trace_client -- --server=127.0.0.1:7300
//       --transport=rdma --trace=zipf --requests=400000 --keys=200000 --seed=1
//
// Exit status: 0 replayed; 1 the target failed (unreachable, a GET error,
// a SET error other than "out of memory"); 2 bad flags.

#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "common/protocol/resp.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, trace, "zipf", "zipf or scan (see the file comment)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the trace");
ABSL_FLAG(int64_t, requests, 400000, "requests in the trace");
ABSL_FLAG(int64_t, keys, 200000, "keys the Zipf draws range over");
ABSL_FLAG(int64_t, value_bytes, 200, "bytes of each value SET on a miss");
ABSL_FLAG(std::string, server, "",
          "kvstore control address HOST:PORT: replay through the kvstore client library");
ABSL_FLAG(std::string, transport, "rdma", "with --server: rdma (one-sided GETs) or tcp");
ABSL_FLAG(std::string, rdma_device, "", "with --transport=rdma: the device (default: the first)");
ABSL_FLAG(uint64_t, lease_bytes, 1 << 20,
          "with --transport=rdma: bytes per write lease (the library's default, 4 MiB, is a "
          "large share of a cache-sized pool)");
ABSL_FLAG(int, connections, 1, "with --server: data connections (one request is in flight)");
ABSL_FLAG(std::string, resp, "", "RESP server HOST:PORT: replay over plain RESP instead");

namespace kvstore {
namespace {

// --- The trace -----------------------------------------------------------------

// A uniform double in [0,1) from the top 53 bits: defined by us, unlike
// std::uniform_real_distribution, so the trace is the same everywhere.
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Zipf(s) over 0..n-1 by inverse CDF: exact, and O(log n) per draw.
class Zipf {
 public:
  Zipf(int64_t n, double s) : cdf_(n) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += 1.0 / std::pow(static_cast<double>(i + 1), s);
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) {
      acc += 1.0 / std::pow(static_cast<double>(i + 1), s) / total;
      cdf_[i] = acc;
    }
  }
  int64_t Draw(std::mt19937_64& rng) const {
    const double u = Uniform(rng);
    const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
    return std::min<int64_t>(it - cdf_.begin(), static_cast<int64_t>(cdf_.size()) - 1);
  }

 private:
  std::vector<double> cdf_;
};

std::vector<std::string> MakeTrace(bool scan, int64_t requests, int64_t keys, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Zipf zipf(keys, 0.99);
  std::vector<std::string> trace;
  trace.reserve(requests);
  int64_t scan_next = 0;
  for (int64_t i = 0; i < requests; ++i) {
    if (scan && Uniform(rng) < 1.0 / 3) {
      trace.push_back(absl::StrCat("scan:", scan_next++));
    } else {
      trace.push_back(absl::StrCat("key:", zipf.Draw(rng)));
    }
  }
  return trace;
}

// --- Targets -------------------------------------------------------------------

// One cache: Get returns true on a hit, false on a miss; Set stores.
class Target {
 public:
  virtual ~Target() = default;
  virtual absl::StatusOr<bool> Get(const std::string& key) = 0;
  virtual absl::Status Set(const std::string& key, absl::string_view value) = 0;
  // Counters worth printing beside the hit ratio.
  virtual nlohmann::json Counters() const { return nlohmann::json::object(); }
};

class KvTarget : public Target {
 public:
  explicit KvTarget(std::unique_ptr<client::KvClient> c) : c_(std::move(c)) {}
  absl::StatusOr<bool> Get(const std::string& key) override {
    absl::StatusOr<std::string> v = c_->Get(key);
    if (v.ok()) return true;
    if (absl::IsNotFound(v.status())) return false;
    return v.status();
  }
  absl::Status Set(const std::string& key, absl::string_view value) override {
    return c_->Put(key, value);
  }
  nlohmann::json Counters() const override;

 private:
  std::unique_ptr<client::KvClient> c_;
};

// Sums the series of each wanted metric (labels kept apart where they say
// something: the location cache's result, the read reports' outcome).
nlohmann::json KvTarget::Counters() const {
  const std::map<std::string, std::string> wanted = {
      {"kvstore_client_server_fallback_gets_total", "server_fallback_gets"},
      {"kvstore_client_location_cache_total{result=\"hit\"}", "location_cache_hits"},
      {"kvstore_client_location_cache_total{result=\"miss\"}", "location_cache_misses"},
      {"kvstore_client_location_cache_total{result=\"stale\"}", "location_cache_stale"},
      {"kvstore_client_read_reports_total{result=\"ok\"}", "read_reports_ok"},
      {"kvstore_client_read_reports_total{result=\"error\"}", "read_reports_failed"},
      {"kvstore_client_checksum_retries_total", "checksum_retries"},
      {"kvstore_client_tcp_fallbacks_total", "tcp_fallbacks"},
      {"kvstore_client_reconnects_total", "reconnects"}};
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [series, value] : c_->metrics()) {
    auto it = wanted.find(series);
    if (it != wanted.end()) out[it->second] = value;
  }
  out["transport_in_use"] = c_->transport_name();
  return out;
}

// A blocking RESP connection, one command and one reply at a time.
class RespTarget : public Target {
 public:
  static absl::StatusOr<std::unique_ptr<RespTarget>> Dial(absl::string_view address);
  ~RespTarget() override { close(fd_); }
  absl::StatusOr<bool> Get(const std::string& key) override;
  absl::Status Set(const std::string& key, absl::string_view value) override;

 private:
  explicit RespTarget(int fd) : fd_(fd) {}
  absl::StatusOr<resp::Reply> Call(const std::vector<absl::string_view>& args);
  int fd_;
  std::string in_;
};

absl::StatusOr<std::unique_ptr<RespTarget>> RespTarget::Dial(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--resp=", address, ": want HOST:PORT"));
  }
  const std::string host(address.substr(0, colon)), port(address.substr(colon + 1));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); e != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--resp=", address, ": ", gai_strerror(e)));
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
  return std::unique_ptr<RespTarget>(new RespTarget(fd));
}

absl::StatusOr<resp::Reply> RespTarget::Call(const std::vector<absl::string_view>& args) {
  std::string out;
  resp::AppendCommand(&out, args);
  for (size_t sent = 0; sent < out.size();) {
    const ssize_t n = send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return absl::UnavailableError("RESP server closed the connection (send)");
    sent += n;
  }
  char buf[16384];
  for (;;) {
    absl::StatusOr<resp::ParsedReply> p = resp::ParseReply(in_, resp::ReplyLimits());
    if (!p.ok()) return p.status();
    if (p->complete) {
      in_.erase(0, p->consumed);
      return std::move(p->reply);
    }
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return absl::UnavailableError("RESP server closed the connection (recv)");
    in_.append(buf, n);
  }
}

absl::StatusOr<bool> RespTarget::Get(const std::string& key) {
  absl::StatusOr<resp::Reply> r = Call({"GET", key});
  if (!r.ok()) return r.status();
  if (r->type == resp::Reply::Type::kBulk) return true;
  if (r->type == resp::Reply::Type::kNull) return false;
  return absl::InternalError(absl::StrCat("GET ", key, ": unexpected reply ", r->str));
}

// -OOM (the server could not make room) is a refused SET, not a broken
// target: the caller counts it, as a cache-aside client would carry on.
absl::Status RespTarget::Set(const std::string& key, absl::string_view value) {
  absl::StatusOr<resp::Reply> r = Call({"SET", key, value});
  if (!r.ok()) return r.status();
  if (r->type != resp::Reply::Type::kError) return absl::OkStatus();
  if (absl::StartsWith(r->str, "OOM")) return absl::ResourceExhaustedError(r->str);
  return absl::InternalError(absl::StrCat("SET ", key, ": ", r->str));
}

// --- Flags and the replay ------------------------------------------------------

struct Config {
  bool scan = false;
  std::string target_name;  // "kvstore" or "resp"
  std::string transport;    // "rdma", "tcp" (kvstore) or "resp"
};

absl::StatusOr<Config> CheckFlags() {
  Config c;
  const std::string trace = absl::GetFlag(FLAGS_trace);
  if (trace != "zipf" && trace != "scan") {
    return absl::InvalidArgumentError(absl::StrCat("--trace=", trace, ": want zipf or scan"));
  }
  c.scan = trace == "scan";
  if (absl::GetFlag(FLAGS_requests) < 1)
    return absl::InvalidArgumentError("--requests must be >= 1");
  if (absl::GetFlag(FLAGS_keys) < 1 || absl::GetFlag(FLAGS_keys) > (int64_t{1} << 28)) {
    return absl::InvalidArgumentError("--keys must be 1..268435456");
  }
  if (absl::GetFlag(FLAGS_value_bytes) < 0 || absl::GetFlag(FLAGS_value_bytes) > (64 << 20)) {
    return absl::InvalidArgumentError("--value_bytes must be 0..67108864");
  }
  const bool kv = !absl::GetFlag(FLAGS_server).empty(), raw = !absl::GetFlag(FLAGS_resp).empty();
  if (kv == raw) return absl::InvalidArgumentError("give exactly one of --server and --resp");
  c.target_name = kv ? "kvstore" : "resp";
  c.transport = kv ? absl::GetFlag(FLAGS_transport) : "resp";
  if (kv) {
    if (absl::Status s = client::ValidateServerAddress(absl::GetFlag(FLAGS_server)); !s.ok()) {
      return s;
    }
  }
  if (kv && c.transport != "rdma" && c.transport != "tcp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--transport=", c.transport, ": want rdma or tcp"));
  }
  if (absl::GetFlag(FLAGS_lease_bytes) == 0) {
    return absl::InvalidArgumentError("--lease_bytes must be a positive byte count");
  }
  if (absl::GetFlag(FLAGS_connections) < 1) {
    return absl::InvalidArgumentError("--connections must be >= 1");
  }
  return c;
}

absl::StatusOr<std::unique_ptr<Target>> Open(const Config& c) {
  if (c.target_name == "resp") {
    auto t = RespTarget::Dial(absl::GetFlag(FLAGS_resp));
    if (!t.ok()) return t.status();
    return std::unique_ptr<Target>(std::move(*t));
  }
  client::Options o;
  o.servers = {absl::GetFlag(FLAGS_server)};
  // kRdma, never kAuto: a silent fall back to TCP would measure the wrong path.
  o.transport = c.transport == "rdma" ? client::TransportMode::kRdma : client::TransportMode::kTcp;
  o.rdma_device = absl::GetFlag(FLAGS_rdma_device);
  o.lease_bytes = absl::GetFlag(FLAGS_lease_bytes);
  o.connections_per_server = absl::GetFlag(FLAGS_connections);
  auto kv = client::KvClient::Connect(o);
  if (!kv.ok()) return kv.status();
  if ((*kv)->transport_name() != c.transport) {
    return absl::FailedPreconditionError(
        absl::StrCat("asked for ", c.transport, ", the client uses ", (*kv)->transport_name()));
  }
  return std::unique_ptr<Target>(new KvTarget(std::move(*kv)));
}

int Main() {
  absl::StatusOr<Config> c = CheckFlags();
  if (!c.ok()) {
    std::fprintf(stderr, "cache_trace_client: %s (see --help)\n",
                 std::string(c.status().message()).c_str());
    return 2;
  }
  const std::vector<std::string> trace = MakeTrace(
      c->scan, absl::GetFlag(FLAGS_requests), absl::GetFlag(FLAGS_keys), absl::GetFlag(FLAGS_seed));
  absl::StatusOr<std::unique_ptr<Target>> target = Open(*c);
  if (!target.ok()) {
    std::fprintf(stderr, "cache_trace_client: %s\n", target.status().ToString().c_str());
    return 1;
  }
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'x');
  int64_t hits = 0, set_failures = 0;
  const absl::Time t0 = absl::Now();
  for (const std::string& key : trace) {
    absl::StatusOr<bool> hit = (*target)->Get(key);
    if (!hit.ok()) {
      std::fprintf(stderr, "cache_trace_client: GET %s: %s\n", key.c_str(),
                   hit.status().ToString().c_str());
      return 1;
    }
    if (*hit) {
      ++hits;
      continue;
    }
    absl::Status s = (*target)->Set(key, value);
    if (absl::IsResourceExhausted(s)) {
      ++set_failures;
    } else if (!s.ok()) {
      std::fprintf(stderr, "cache_trace_client: SET %s: %s\n", key.c_str(), s.ToString().c_str());
      return 1;
    }
  }
  const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
  nlohmann::json out = {{"trace", absl::GetFlag(FLAGS_trace)},
                        {"target", c->target_name},
                        {"transport", c->transport},
                        {"seed", absl::GetFlag(FLAGS_seed)},
                        {"keys", absl::GetFlag(FLAGS_keys)},
                        {"value_bytes", absl::GetFlag(FLAGS_value_bytes)},
                        {"requests", trace.size()},
                        {"hits", hits},
                        {"hit_ratio", static_cast<double>(hits) / trace.size()},
                        {"set_failures", set_failures},
                        {"seconds", secs},
                        {"client", (*target)->Counters()}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace kvstore

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "cache_trace_client (--server=HOST:PORT [--transport=rdma|tcp] | --resp=HOST:PORT) "
      "[--trace=zipf|scan] [--seed=S] [--requests=N] [--keys=N] [--value_bytes=N]: replays "
      "cache_bench.py's cache-aside trace and prints the hit ratio as one line of JSON");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "cache_trace_client: unexpected argument %s (see --help)\n", rest[1]);
    return 2;
  }
  // The library logs through glog: errors to stderr, no log files.
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = google::GLOG_ERROR;
  google::InitGoogleLogging(argv[0]);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  signal(SIGPIPE, SIG_IGN);
  return kvstore::Main();
}
