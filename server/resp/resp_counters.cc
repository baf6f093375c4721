// Copyright 2026 The kvstore Authors.

#include "server/resp/resp_counters.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// Registering the same name twice returns the same series, so two RESP
// servers on one registry (never the case in kvserver) would share figures.
Counters::Counters(metrics::Registry* registry)
    : accepted(registry->AddCounter("kvstore_resp_connections_accepted_total",
                                    "RESP connections accepted.")),
      active(registry->AddGauge("kvstore_resp_connections", "RESP connections open.")),
      commands(registry->AddCounter("kvstore_resp_commands_total",
                                    "RESP commands executed (streamed SETs included).")),
      protocol_errors(registry->AddCounter(
          "kvstore_resp_protocol_errors_total",
          "RESP requests that broke the protocol; each closes its connection.")),
      timeouts(registry->AddCounter("kvstore_resp_timeouts_total",
                                    "RESP connections closed for idleness or a stalled request.")),
      bytes_in(registry->AddCounter("kvstore_resp_received_bytes_total",
                                    "Bytes read from RESP connections.")),
      bytes_out(registry->AddCounter("kvstore_resp_sent_bytes_total",
                                     "Bytes written to RESP connections.")),
      // The tcp request series belong here: RESP is the server's only TCP
      // data path. The gRPC handlers and the RDMA service register the
      // same two families with their own transport label.
      get(RegisterRequestMetrics(registry, "tcp", "get")),
      put(RegisterRequestMetrics(registry, "tcp", "put")),
      del(RegisterRequestMetrics(registry, "tcp", "delete")) {}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
