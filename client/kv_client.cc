// Copyright 2026 The kvstore Authors.

#include "client/kv_client.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "client/internal/client_metrics.h"
#include "client/internal/control_client.h"
#include "client/internal/data_path.h"
#include "client/internal/rdma/rdma_context.h"
#include "client/internal/rdma/rdma_data_path.h"
#include "client/internal/tcp/tcp_data_path.h"
#include "common/metrics/exposition.h"
#include "common/metrics/registry.h"
#include "common/protocol/limits.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace client {

absl::string_view TransportModeName(TransportMode mode) {
  switch (mode) {
    case TransportMode::kAuto:
      return "auto";
    case TransportMode::kRdma:
      return "rdma";
    case TransportMode::kTcp:
      return "tcp";
  }
  return "?";
}

// Case-insensitive, so flags and config files may say "RDMA".
absl::StatusOr<TransportMode> ParseTransportMode(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(text);
  if (t == "auto") return TransportMode::kAuto;
  if (t == "rdma") return TransportMode::kRdma;
  if (t == "tcp") return TransportMode::kTcp;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", text, "' (expected auto, rdma or tcp)"));
}

absl::Status ValidateServerAddress(absl::string_view address) {
  auto bad = [address](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("server address '", address, "': ", why, " (expected host:port)"));
  };
  // The port follows the last ':'; an IPv6 host is bracketed, so its own
  // colons come before the closing ']'.
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.empty() || host == "[]") return bad("no host");
  if (host.find(':') != absl::string_view::npos && (host.front() != '[' || host.back() != ']')) {
    return bad("an IPv6 host must be in brackets");
  }
  uint32_t n = 0;
  if (port.empty() || port.size() > 5 || !absl::c_all_of(port, absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &n) || n < 1 || n > 65535) {
    return bad(absl::StrCat("port '", port, "' is not a number in 1..65535"));
  }
  return absl::OkStatus();
}

namespace {

// Data endpoints are published with the server's bind address; a server
// bound to 0.0.0.0 is reached at the host the client dialled.
std::string ResolveDataAddress(const std::string& published, const std::string& control) {
  std::pair<std::string, std::string> pub = absl::StrSplit(published, absl::MaxSplits(':', 1));
  if (pub.first != "0.0.0.0" && !pub.first.empty()) return published;
  std::pair<std::string, std::string> ctl = absl::StrSplit(control, absl::MaxSplits(':', 1));
  return absl::StrCat(ctl.first, ":", pub.second);
}

// The path in use and the series of its transport, swapped together so that
// an operation counts on the transport that served it without comparing
// names.
struct CurrentPath {
  std::shared_ptr<DataPath> path;
  const TransportMetrics* metrics = nullptr;
};

// The KvClient: counts and times operations, forwards them to the current
// DataPath, and rebuilds the path (handshake, then RDMA or TCP per
// Options::transport) when an RDMA path breaks. Control-plane calls go
// through ControlClient. Thread-safe: `mu_` guards the path; the metrics are
// registry atomics resolved once in the constructor.
class ClientImpl final : public KvClient {
 public:
  ClientImpl(const Options& options, std::unique_ptr<ControlClient> control)
      : options_(options),
        control_(std::move(control)),
        name_(absl::StrCat("kvclient pid ", getpid())),
        metrics_(&registry_) {}

  // The path goes first, under the lock, while control_ (which an RDMA path
  // calls as it shuts down) is still alive.
  ~ClientImpl() override {
    absl::MutexLock lock(&mu_);
    path_.reset();
  }

  // The first handshake and path; Connect() fails with its error.
  absl::Status Init() {
    absl::MutexLock lock(&mu_);
    return BuildPath();
  }

  // Each operation runs on the current path through Run(), which counts and
  // times it and may rebuild a broken path and try once more.
  absl::StatusOr<std::string> Get(absl::string_view key) override {
    return Run<std::string>(kGet, [&](DataPath& p) { return p.Get(key, Deadline()); });
  }
  absl::Status Put(absl::string_view key, absl::string_view value) override {
    return RunStatus(kPut, [&](DataPath& p) { return p.Put(key, value, Deadline()); });
  }
  absl::Status Delete(absl::string_view key) override {
    // Retried after a reconnect only if it was never sent: a first attempt
    // that reached the server may have deleted the key.
    return RunStatus(
        kDelete, [&](DataPath& p) { return p.Delete(key, Deadline()); },
        /*retry=*/false);
  }
  absl::StatusOr<bool> Exists(absl::string_view key) override {
    return Run<bool>(kExists, [&](DataPath& p) { return p.Exists(key, Deadline()); });
  }
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys) override {
    return Run<std::vector<absl::StatusOr<std::string>>>(
        kMultiGet, [&](DataPath& p) { return p.MultiGet(keys, Deadline()); }, true, keys.size());
  }
  absl::Status MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs) override {
    return RunStatus(
        kMultiPut, [&](DataPath& p) { return p.MultiPut(pairs, Deadline()); }, true, pairs.size());
  }

  absl::StatusOr<RegisteredBuffer> Register(void* data, size_t size) override {
    // Registered with the current path's device (if any); the registration
    // survives reconnects because paths share one RdmaContext.
    return Current().path->Register(data, size);
  }

  // Zero copy counts and times as Get/Put: the same operation to the server.
  absl::StatusOr<size_t> GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                 size_t offset, size_t capacity) override {
    return Run<size_t>(
        kGet, [&](DataPath& p) { return p.GetInto(key, buffer, offset, capacity, Deadline()); });
  }

  absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                       size_t length) override {
    return RunStatus(
        kPut, [&](DataPath& p) { return p.PutFrom(key, buffer, offset, length, Deadline()); });
  }

  // Scan and Stats are control-plane calls: they work the same whatever the
  // data path, and are not retried.
  absl::StatusOr<ScanPage> Scan(uint64_t cursor, uint32_t count,
                                absl::string_view prefix) override {
    KV_ASSIGN_OR_RETURN(v1::ScanResponse resp, control_->Scan(cursor, count, prefix, Deadline()));
    ScanPage page;
    page.keys.assign(resp.keys().begin(), resp.keys().end());
    page.cursor = resp.cursor();
    return page;
  }

  absl::StatusOr<ServerStats> Stats() override {
    KV_ASSIGN_OR_RETURN(v1::StatsResponse resp, control_->Stats(Deadline()));
    ServerStats out;
    out.info.insert(resp.info().begin(), resp.info().end());
    out.counters.insert(resp.counters().begin(), resp.counters().end());
    return out;
  }

  uint64_t max_value_bytes() const override {
    return max_value_bytes_.load(std::memory_order_relaxed);
  }

  std::string transport_name() const override {
    std::shared_ptr<DataPath> path = Current().path;
    return path ? std::string(path->name()) : "none";
  }

  // Reads the registry only: nothing to gather from the paths, since every
  // path registered its counters there.
  std::map<std::string, uint64_t> metrics() const override {
    return metrics::FlattenSnapshot(registry_.TakeSnapshot());
  }

 private:
  // Every operation's deadline, taken when the attempt starts (a retry after
  // a reconnect gets a fresh one).
  absl::Time Deadline() const { return absl::Now() + options_.op_timeout; }

  // A reference that keeps the path alive for one operation even if another
  // thread replaces it meanwhile, with its transport's series.
  CurrentPath Current() const {
    absl::MutexLock lock(&mu_);
    return {path_, path_metrics_};
  }

  // Handshakes and builds the data path Options::transport asks for.
  // REQUIRES: mu_ held.
  // `wait_for_ready`: wait (up to connect_timeout) for the channel to come
  // back instead of failing at once; used when reconnecting, when gRPC may
  // still be backing off from the connection it lost.
  absl::Status BuildPath(bool wait_for_ready = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<v1::HandshakeResponse> handshake =
        control_->Handshake(name_, wait_for_ready, absl::Now() + options_.connect_timeout);
    if (!handshake.ok()) {
      const absl::Status& s = handshake.status();
      return absl::Status(
          s.code(), absl::StrCat("handshake with ", options_.servers[0], " failed: ", s.message()));
    }
    const v1::HandshakeResponse& hs = *handshake;
    Limits limits;
    limits.max_key_bytes = hs.limits().max_key_bytes();
    limits.max_value_bytes = hs.limits().max_value_bytes();
    limits.max_batch_keys = hs.limits().max_batch_keys();
    max_value_bytes_.store(limits.max_value_bytes, std::memory_order_relaxed);

    if (options_.transport != TransportMode::kTcp) {
      absl::StatusOr<std::unique_ptr<DataPath>> rdma = BuildRdmaPath(hs, limits);
      if (rdma.ok()) {
        SwapPath(std::shared_ptr<DataPath>(std::move(*rdma)));
        return absl::OkStatus();
      }
      // Only the reason is kept: it ends up in a log line or in the
      // kUnavailable error below, whatever its original code.
      const std::string why(rdma.status().message());
      if (options_.transport == TransportMode::kRdma) {
        return absl::UnavailableError(
            absl::StrCat("transport=rdma requested but RDMA is unavailable: ", why));
      }
      metrics_.tcp_fallbacks()->Increment();
      LOG(INFO) << "kvstore client: using TCP to " << options_.servers[0] << " (" << why << ")";
    }
    // TCP: either asked for, or the kAuto fallback.
    const std::string address =
        ResolveDataAddress(hs.endpoints().resp_address(), options_.servers[0]);
    KV_ASSIGN_OR_RETURN(auto tcp,
                        TcpDataPath::Connect(address, options_.connections_per_server, limits,
                                             options_.connect_timeout, options_.auth_token));
    SwapPath(std::shared_ptr<DataPath>(std::move(tcp)));
    return absl::OkStatus();
  }

  // An RDMA path to the server of `hs`, or why there is none: the server has
  // no device, this host has none usable, or connecting the queue pair
  // failed. The device is opened once and kept for later paths.
  absl::StatusOr<std::unique_ptr<DataPath>> BuildRdmaPath(const v1::HandshakeResponse& hs,
                                                          const Limits& limits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (hs.endpoints().rdma_device().empty()) {
      return absl::UnavailableError("the server has no RDMA device");
    }
    if (rdma_context_ == nullptr) {
      auto ctx = OpenRdmaContext(options_.rdma_device, limits.max_value_bytes);
      if (!ctx.ok()) {
        return absl::UnavailableError(
            absl::StrCat("no usable local RDMA device: ", ctx.status().message()));
      }
      rdma_context_ = *ctx;
    }
    KV_ASSIGN_OR_RETURN(auto rdma, RdmaDataPath::Connect(rdma_context_, control_.get(), hs, name_,
                                                         options_.lease_bytes,
                                                         options_.connect_timeout, &registry_));
    return std::unique_ptr<DataPath>(std::move(rdma));
  }

  // Installs `next` as the current path. The old one is destroyed once the
  // last operation still using it lets go of its shared_ptr.
  // Nothing is carried over: the old path counted into the client's registry.
  void SwapPath(std::shared_ptr<DataPath> next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Resolved here, once per path, so operations never compare names.
    path_metrics_ = metrics_.ForTransport(next->name());
    path_ = std::move(next);
  }

  // After a failure on `failed`: if it is a path that broke (an RDMA queue
  // pair error, a server restart; a TCP path never breaks), handshake again
  // and build a new path. Returns whether there is a new path to retry on.
  bool Recover(const std::shared_ptr<DataPath>& failed) {
    if (!failed->broken()) return false;
    absl::MutexLock lock(&mu_);
    if (path_ != failed) return true;  // another thread already rebuilt it
    absl::Status s = BuildPath(/*wait_for_ready=*/true);
    if (!s.ok()) {
      LOG(WARNING) << "kvstore client: reconnecting to " << options_.servers[0] << " failed: " << s;
      return false;
    }
    metrics_.reconnects()->Increment();
    LOG(INFO) << "kvstore client: reconnected to " << options_.servers[0] << " over "
              << path_->name();
    return true;
  }

  // What an operation counts under: its requests_total op (per key) and its
  // latency series (kNone: none).
  struct OpKind {
    PathOp op;
    CallKind call;
  };
  static constexpr OpKind kGet{PathOp::kGet, CallKind::kGet};
  static constexpr OpKind kPut{PathOp::kPut, CallKind::kPut};
  static constexpr OpKind kDelete{PathOp::kDelete, CallKind::kDelete};
  static constexpr OpKind kExists{PathOp::kExists, CallKind::kNone};
  static constexpr OpKind kMultiGet{PathOp::kGet, CallKind::kMultiGet};
  static constexpr OpKind kMultiPut{PathOp::kPut, CallKind::kMultiPut};

  // Runs `op` on the current path and counts `n` operations of `kind` for
  // its transport. On kUnavailable from a broken path, rebuilds the path
  // and, if `retry` (or the failure carries kNotSentPayload), runs `op` once
  // more. The whole call, retry included, is observed once, under the
  // transport of the path that finished it. Hot path: one steady-clock pair
  // and relaxed atomic adds on pointers resolved at construction.
  template <typename T, typename F>
  absl::StatusOr<T> Run(OpKind kind, F op, bool retry = true, uint64_t n = 1) {
    const auto start = std::chrono::steady_clock::now();
    CurrentPath cur = Current();
    absl::StatusOr<T> r = op(*cur.path);
    cur.metrics->request(kind.op)->Increment(n);
    // Idempotent operations are retried once on a rebuilt path; others only
    // when they provably never left this client.
    const bool may_retry = retry || (!r.ok() && r.status().GetPayload(kNotSentPayload).has_value());
    if (!r.ok() && absl::IsUnavailable(r.status()) && Recover(cur.path) && may_retry) {
      cur = Current();
      r = op(*cur.path);
      // Attributed to the path that served the attempt (it may be another).
      cur.metrics->request(kind.op)->Increment(n);
    }
    if (kind.call != CallKind::kNone) {
      const auto elapsed = std::chrono::steady_clock::now() - start;
      cur.metrics->latency(kind.call)->ObserveNanos(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
    }
    return r;
  }
  // Run() for operations that return a bare Status.
  template <typename F>
  absl::Status RunStatus(OpKind kind, F op, bool retry = true, uint64_t n = 1) {
    return Run<bool>(
               kind,
               [&](DataPath& p) -> absl::StatusOr<bool> {
                 KV_RETURN_IF_ERROR(op(p));
                 return true;
               },
               retry, n)
        .status();
  }

  const Options options_;
  // The client's metrics. Declared first so that it outlives every path
  // (RDMA paths hold pointers to counters it owns).
  metrics::Registry registry_;
  // Outlives every path (members are destroyed after the destructor body
  // resets path_), since RDMA paths call it.
  const std::unique_ptr<ControlClient> control_;
  const std::string name_;
  // KvClient's own series, registered in registry_.
  const ClientMetrics metrics_;
  // The server's value limit from the latest handshake; atomic so that
  // max_value_bytes() needs no lock while a reconnect handshakes again.
  std::atomic<uint64_t> max_value_bytes_{0};
  mutable absl::Mutex mu_;
  std::shared_ptr<DataPath> path_ ABSL_GUARDED_BY(mu_);
  // The series of path_'s transport; set with it by SwapPath().
  const TransportMetrics* path_metrics_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Device and PD shared by successive RDMA paths (registrations survive a
  // reconnect).
  std::shared_ptr<RdmaContext> rdma_context_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<KvClient>> KvClient::Connect(const Options& options) {
  if (options.servers.empty()) return absl::InvalidArgumentError("Options::servers is empty");
  if (options.servers.size() > 1) {
    return absl::UnimplementedError("more than one server needs the cluster map (not yet built)");
  }
  KV_RETURN_IF_ERROR(ValidateServerAddress(options.servers[0]));
  // Dialling checks the security options (files, token) but connects
  // lazily: an unreachable server shows as a failed handshake in Init().
  ControlSecurity security;
  security.auth_token = options.auth_token;
  security.tls_ca_file = options.tls_ca_file;
  security.tls_cert_file = options.tls_cert_file;
  security.tls_key_file = options.tls_key_file;
  security.tls_server_name = options.tls_server_name;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<ControlClient> control,
                      ControlClient::Dial(options.servers[0], security));
  auto impl = std::make_unique<ClientImpl>(options, std::move(control));
  KV_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<KvClient>(std::move(impl));
}

}  // namespace client
}  // namespace kvstore
