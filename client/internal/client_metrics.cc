// Copyright 2026 The kvstore Authors.
//
// Registration of the KvClient's own series. The help texts live here once;
// the RDMA parts register theirs next to the code that counts them.

#include "client/internal/client_metrics.h"

#include <string>

namespace kvstore {
namespace client {
namespace {

// Label values, indexed by the enums of the header.
constexpr const char* kPathOpNames[] = {"get", "put", "delete", "exists"};
constexpr const char* kCallNames[] = {"get", "put", "delete", "multi_get", "multi_put"};
static_assert(sizeof(kPathOpNames) / sizeof(kPathOpNames[0]) ==
              static_cast<size_t>(PathOp::kCount));
static_assert(sizeof(kCallNames) / sizeof(kCallNames[0]) == static_cast<size_t>(CallKind::kCount));

// Every (op) child of one transport, so all series exist from the start and
// the hot path never registers.
TransportMetrics RegisterTransport(metrics::Registry* r, const std::string& transport) {
  TransportMetrics m;
  for (size_t i = 0; i < m.requests.size(); ++i) {
    m.requests[i] = r->AddCounter(
        "kvstore_client_requests_total",
        "Operations run on a data path, by transport and op; MultiGet/MultiPut count each key, "
        "and an operation retried after a reconnect counts again.",
        {{"transport", transport}, {"op", kPathOpNames[i]}});
  }
  for (size_t i = 0; i < m.duration.size(); ++i) {
    m.duration[i] = r->AddHistogram(
        "kvstore_client_request_duration_seconds",
        "Latency of each public KvClient call (retries included), by the transport that "
        "finished it; GetInto counts as get, PutFrom as put, a MultiGet/MultiPut once per call.",
        {{"transport", transport}, {"op", kCallNames[i]}});
  }
  return m;
}

}  // namespace

// Both transports are registered whatever the client ends up using, so a
// dashboard sees the same series set for every client (zeros included).
ClientMetrics::ClientMetrics(metrics::Registry* registry)
    : tcp_(RegisterTransport(registry, "tcp")), rdma_(RegisterTransport(registry, "rdma")) {
  tcp_fallbacks_ =
      registry->AddCounter("kvstore_client_tcp_fallbacks_total",
                           "Times transport=auto chose TCP because RDMA was unavailable.");
  reconnects_ = registry->AddCounter("kvstore_client_reconnects_total",
                                     "Data paths rebuilt after a failure or a server restart.");
  // Cluster mode only; the series exist (at 0) for a single-node client too.
  map_refreshes_ = registry->AddCounter(
      "kvstore_client_cluster_map_refreshes_total",
      "Cluster maps fetched after Connect (after a redirect, a cluster-down refusal or a lost "
      "node).");
  redirects_ = registry->AddCounter(
      "kvstore_client_cluster_redirects_total",
      "Answers saying the client routed by a stale map (a redirect, map or shard epoch "
      "mismatch).");
  retries_ = registry->AddCounter(
      "kvstore_client_cluster_retries_total",
      "Operations (or parts of a batch) sent again by the cluster client after a refresh.");
  asks_ = registry->AddCounter(
      "kvstore_client_cluster_asks_total",
      "Ask refusals followed (a migrating slot's request sent once to the named node).");
  tryagains_ = registry->AddCounter(
      "kvstore_client_cluster_tryagains_total",
      "Try-again refusals (a slot's handoff under way) retried after a short backoff.");
  map_epoch_ = registry->AddGauge("kvstore_client_cluster_map_epoch",
                                  "Epoch of the cluster map the client routes by; 0 single-node.");
}

// Only two DataPath implementations exist; a third would add a member here.
const TransportMetrics* ClientMetrics::ForTransport(absl::string_view name) const {
  return name == "rdma" ? &rdma_ : &tcp_;
}

}  // namespace client
}  // namespace kvstore
