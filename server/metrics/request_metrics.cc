// Copyright 2026 The kvstore Authors.

#include "server/metrics/request_metrics.h"

#include <string>

namespace kvstore {
namespace server {

// Every transport registers through here, so all children of the two
// families carry the same help text: the registry aborts when a family is
// registered again with a different one.
RequestMetrics RegisterRequestMetrics(metrics::Registry* registry, absl::string_view transport,
                                      absl::string_view op) {
  // The help texts say what each transport counts, and why rdma has no get:
  // a one-sided RDMA READ is served by the NIC and never reaches a server
  // thread, so only the client can count or time it.
  const metrics::Labels labels = {{"transport", std::string(transport)}, {"op", std::string(op)}};
  RequestMetrics m;
  m.requests = registry->AddCounter(
      "kvstore_server_requests_total",
      "Requests the server handled, by transport and op. tcp: GET replies and MGET keys (get), "
      "SET and MSET pairs (put), DEL keys (delete); grpc: Get/Put/Delete RPCs; rdma: PUT and "
      "DELETE commits. One-sided RDMA GETs bypass the server CPU, so there is no rdma/get series.",
      labels);
  m.duration = registry->AddHistogram(
      "kvstore_server_request_duration_seconds",
      "Server-side request latency, by transport and op. tcp: from the parsed command to its "
      "queued reply (streamed SET: header to commit; one observation per MGET/MSET/DEL); grpc: "
      "the handler; rdma: commit receive completion to posted ack. One-sided RDMA GETs bypass "
      "the server CPU, so there is no rdma/get series.",
      labels);
  return m;
}

}  // namespace server
}  // namespace kvstore
