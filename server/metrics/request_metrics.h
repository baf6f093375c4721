// Copyright 2026 The kvstore Authors.
//
// The per-transport request series every data path of the server shares:
// kvstore_server_requests_total{transport,op} and
// kvstore_server_request_duration_seconds{transport,op}. One helper so that
// the RESP loops, the gRPC handlers and the RDMA service register the two
// families with the same help text (the registry aborts on a mismatch).
#ifndef KVSTORE_SERVER_METRICS_REQUEST_METRICS_H_
#define KVSTORE_SERVER_METRICS_REQUEST_METRICS_H_

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"

namespace kvstore {
namespace server {

// The two series of one (transport, op) pair; both owned by the registry.
struct RequestMetrics {
  metrics::Counter* requests = nullptr;
  metrics::Histogram* duration = nullptr;

  // One request handled in `elapsed`: the hot-path cost is two relaxed
  // atomic adds for the histogram and one for the counter.
  void Record(absl::Duration elapsed) const {
    requests->Increment();
    duration->Observe(elapsed);
  }
};

// Registers (or finds) the pair for `transport` ("tcp", "grpc", "rdma") and
// `op` ("get", "put", "delete"). Takes the registry's mutex: call at start-up.
RequestMetrics RegisterRequestMetrics(metrics::Registry* registry, absl::string_view transport,
                                      absl::string_view op);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_METRICS_REQUEST_METRICS_H_
