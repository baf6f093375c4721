// Copyright 2026 The kvstore Authors.
//
// ClientMetrics: the series a KvClient itself updates (requests and their
// latency per transport, TCP fallbacks, reconnects), registered once in the
// client's metrics::Registry. The RDMA path's parts (reader, writer, lease
// manager) register their own counters in the same registry when they are
// built; a rebuilt path gets the same series back, so no figure is lost or
// summed on a reconnect.
//
// Names (see kvstore_client_* in the metrics spec):
//   kvstore_client_requests_total{transport,op}            op: get put delete exists
//   kvstore_client_request_duration_seconds{transport,op}  op: get put delete
//                                                           multi_get multi_put
//   kvstore_client_tcp_fallbacks_total, kvstore_client_reconnects_total
//   kvstore_client_cluster_map_refreshes_total   cluster maps fetched after Connect
//   kvstore_client_cluster_redirects_total       kMoved / stale-epoch answers
//   kvstore_client_cluster_retries_total         attempts repeated by the cluster client
//   kvstore_client_cluster_asks_total            kAsk refusals followed (slot migration)
//   kvstore_client_cluster_tryagains_total       kTryAgain refusals retried (slot handoff)
//   kvstore_client_cluster_map_epoch             (gauge) epoch routed by, 0 single-node
// transport is "tcp" or "rdma". Every child is registered at construction,
// so the series exist (at 0) before the first call.
//
// Thread safety: construction registers (takes the registry's mutex); the
// accessors return pointers fixed at construction, so the hot path is one
// array index and a relaxed atomic add, with no lock and no lookup.

#ifndef KVSTORE_CLIENT_INTERNAL_CLIENT_METRICS_H_
#define KVSTORE_CLIENT_INTERNAL_CLIENT_METRICS_H_

#include <array>
#include <chrono>
#include <cstddef>

#include "absl/strings/string_view.h"
#include "common/metrics/registry.h"

namespace kvstore {
namespace client {

// What a data path ran, per key (the op label of requests_total).
enum class PathOp { kGet, kPut, kDelete, kExists, kCount };
// Which public call took how long (the op label of request_duration_seconds).
// kNone: a call with no latency series (Exists).
enum class CallKind { kGet, kPut, kDelete, kMultiGet, kMultiPut, kCount, kNone = kCount };

// The series of one transport.
struct TransportMetrics {
  std::array<metrics::Counter*, static_cast<size_t>(PathOp::kCount)> requests{};
  std::array<metrics::Histogram*, static_cast<size_t>(CallKind::kCount)> duration{};

  metrics::Counter* request(PathOp op) const { return requests[static_cast<size_t>(op)]; }
  metrics::Histogram* latency(CallKind call) const { return duration[static_cast<size_t>(call)]; }
  // Observes the time since `start` as the latency of `call`.
  void ObserveSince(CallKind call, std::chrono::steady_clock::time_point start) const {
    latency(call)->ObserveNanos(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count()));
  }
};

class ClientMetrics {
 public:
  // Registers every series in `registry`, which must outlive this object.
  explicit ClientMetrics(metrics::Registry* registry);
  ClientMetrics(const ClientMetrics&) = delete;
  ClientMetrics& operator=(const ClientMetrics&) = delete;

  // The series of transport `name` ("rdma"; anything else is "tcp", the
  // only other DataPath). Compares a string: call when a path is installed,
  // not per operation.
  const TransportMetrics* ForTransport(absl::string_view name) const;

  metrics::Counter* tcp_fallbacks() const { return tcp_fallbacks_; }
  metrics::Counter* reconnects() const { return reconnects_; }
  metrics::Counter* map_refreshes() const { return map_refreshes_; }
  metrics::Counter* redirects() const { return redirects_; }
  metrics::Counter* retries() const { return retries_; }
  metrics::Counter* asks() const { return asks_; }
  metrics::Counter* tryagains() const { return tryagains_; }
  metrics::Gauge* map_epoch() const { return map_epoch_; }

 private:
  TransportMetrics tcp_;
  TransportMetrics rdma_;
  metrics::Counter* tcp_fallbacks_ = nullptr;
  metrics::Counter* reconnects_ = nullptr;
  metrics::Counter* map_refreshes_ = nullptr;
  metrics::Counter* redirects_ = nullptr;
  metrics::Counter* retries_ = nullptr;
  metrics::Counter* asks_ = nullptr;
  metrics::Counter* tryagains_ = nullptr;
  metrics::Gauge* map_epoch_ = nullptr;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CLIENT_METRICS_H_
