// Copyright 2026 The kvstore Authors.
//
// ServerLink: everything a client keeps for one server — its ControlClient,
// the handshake, the data path Options::transport selects (RDMA, or TCP by
// choice or as kAuto's fallback), and the rebuild of a broken path. The
// single-node KvClient is one link; the cluster client keeps one per node.
// Links of one client share its metrics registry, its ClientMetrics and its
// RDMA device (initiator::SharedContext), so a buffer registered once serves every node.
//
// Errors: Init() fails as the handshake or the path did, the message naming
// the server ("handshake with ADDR failed: ..."); kUnavailable for
// transport=rdma without RDMA. Run() returns the operation's own status.
//
// Thread safety: thread-safe. Operations run concurrently on the current
// path; a rebuild swaps it under the link's mutex while earlier operations
// finish on the old one (each holds a shared_ptr to it).

#ifndef KVSTORE_CLIENT_INTERNAL_SERVER_LINK_H_
#define KVSTORE_CLIENT_INTERNAL_SERVER_LINK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/internal/client_metrics.h"
#include "client/internal/data_path.h"
#include "client/options.h"
#include "common/control/control_client.h"
#include "common/metrics/registry.h"
#include "common/protocol/limits.h"
#include "common/rdma/initiator/shared_context.h"
#include "common/status_macros.h"
#include "common/sync/handoff_mutex.h"

namespace kvstore {
namespace client {

// What the links of one client share; every pointer must outlive them.
struct LinkEnv {
  const Options* options = nullptr;
  metrics::Registry* registry = nullptr;
  const ClientMetrics* metrics = nullptr;
  initiator::SharedContext* rdma = nullptr;
  std::string client_name;
  // TCP paths send READONLY on every socket (cluster replica reads).
  bool replica_reads = false;
};

// The path in use and the series of its transport, swapped together.
struct CurrentPath {
  std::shared_ptr<DataPath> path;
  const TransportMetrics* metrics = nullptr;
};

// What an operation counts under: its requests_total op (per key) and its
// latency series (kNone: none).
struct OpKind {
  PathOp op;
  CallKind call;
};
inline constexpr OpKind kGetOp{PathOp::kGet, CallKind::kGet};
inline constexpr OpKind kPutOp{PathOp::kPut, CallKind::kPut};
inline constexpr OpKind kDeleteOp{PathOp::kDelete, CallKind::kDelete};
inline constexpr OpKind kExistsOp{PathOp::kExists, CallKind::kNone};
inline constexpr OpKind kMultiGetOp{PathOp::kGet, CallKind::kMultiGet};
inline constexpr OpKind kMultiPutOp{PathOp::kPut, CallKind::kMultiPut};
// Counted per key but without a latency series of its own (the cluster
// client times the whole call once; its parts run through this).
inline OpKind Untimed(OpKind kind) { return {kind.op, CallKind::kNone}; }

class ServerLink {
 public:
  // A link to the server whose control plane `control` talks to, at
  // `address` (for messages, and the host of data endpoints published as
  // 0.0.0.0).
  ServerLink(LinkEnv env, std::string address, std::unique_ptr<control::ControlClient> control);
  // The path goes first, while control_ (which an RDMA path calls as it
  // shuts down) is still alive.
  ~ServerLink();
  ServerLink(const ServerLink&) = delete;
  ServerLink& operator=(const ServerLink&) = delete;

  // The first handshake and path.
  absl::Status Init();

  const std::string& address() const { return address_; }
  control::ControlClient* control() const { return control_.get(); }
  // A reference that keeps the current path alive for one operation.
  CurrentPath Current() const;
  // The server's value limit from the latest handshake.
  uint64_t max_value_bytes() const { return max_value_bytes_.load(std::memory_order_relaxed); }

  // The cluster map epoch the client routes by; passed to the current path
  // and to every path built later (DataPath::SetMapEpoch). An epoch not
  // above the one held is ignored.
  void SetMapEpoch(uint64_t epoch);

  // Runs `op` on the current path and counts `n` operations of `kind`. On
  // kUnavailable from a broken path, rebuilds the path and, if `retry` (or
  // the failure carries kNotSentPayload), runs `op` once more. The call,
  // retry included, is timed once (unless kind.call is kNone).
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

  // After a failure on `failed`: if that path broke (an RDMA queue pair
  // error, a server restart; a TCP path never breaks), handshakes again and
  // builds a new one. Returns whether there is a new path to retry on.
  bool Recover(const std::shared_ptr<DataPath>& failed);

 private:
  // Handshakes and builds the path Options::transport asks for.
  // `wait_for_ready`: wait (up to connect_timeout) for the channel to come
  // back instead of failing at once (reconnects). REQUIRES: mu_ held.
  absl::Status BuildPath(bool wait_for_ready = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An RDMA path to the server of `hs`, or why there is none.
  absl::StatusOr<std::unique_ptr<DataPath>> BuildRdmaPath(const v1::HandshakeResponse& hs,
                                                          const Limits& limits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SwapPath(std::shared_ptr<DataPath> next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LinkEnv env_;
  const std::string address_;
  // Outlives every path (an RDMA path calls it).
  const std::unique_ptr<control::ControlClient> control_;
  std::atomic<uint64_t> max_value_bytes_{0};
  std::atomic<uint64_t> map_epoch_{0};
  // mu_ serialises building and swapping paths. The current path is
  // written under mu_ and current_mu_ both, so it may be read under either:
  // every operation reads it, under current_mu_ alone, a word lock taken
  // and released with one atomic operation each (an absl::Mutex pair cost
  // each operation ~60 instructions, about as much as the rest of Run()).
  mutable absl::Mutex mu_;
  mutable HandoffMutex current_mu_;
  std::shared_ptr<DataPath> path_;
  const TransportMetrics* path_metrics_ = nullptr;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_SERVER_LINK_H_
