// Copyright 2026 The kvstore Authors.
//
// The RESP server's series, registered once per RespServer and shared by all
// of its loops: pointers into the metrics registry, so the hot path is a
// relaxed atomic add with no lookup. The registry is the only copy of the
// figures; nothing here holds a value. Internal to server/resp.
//
// Thread safety: every series is an independent relaxed atomic; a snapshot of
// several is not consistent with itself, which is fine for metrics.

#ifndef KVSTORE_SERVER_RESP_RESP_COUNTERS_H_
#define KVSTORE_SERVER_RESP_RESP_COUNTERS_H_

#include "common/metrics/registry.h"
#include "server/metrics/request_metrics.h"

namespace kvstore {
namespace server {
namespace resp_internal {

struct Counters {
  // Registers (or finds) every kvstore_resp_* series and the tcp request
  // series in `registry`, which must outlive this object.
  explicit Counters(metrics::Registry* registry);

  metrics::Counter* accepted;         // kvstore_resp_connections_accepted_total
  metrics::Gauge* active;             // kvstore_resp_connections
  metrics::Counter* commands;         // kvstore_resp_commands_total
  metrics::Counter* protocol_errors;  // kvstore_resp_protocol_errors_total
  metrics::Counter* timeouts;         // kvstore_resp_timeouts_total
  metrics::Counter* bytes_in;         // kvstore_resp_received_bytes_total
  metrics::Counter* bytes_out;        // kvstore_resp_sent_bytes_total
  metrics::Counter* auth_failures;    // kvstore_resp_auth_failures_total
  metrics::Counter* noauth;           // kvstore_resp_noauth_rejections_total
  metrics::Counter* noperm;           // kvstore_resp_noperm_rejections_total
  metrics::Counter* accept_errors;    // kvstore_resp_accept_errors_total
  // kvstore_resp_limit_rejections_total{limit="<RespLimits field>"}: requests
  // refused or connections closed because that bound was reached.
  metrics::Counter* limit_max_clients;
  metrics::Counter* limit_query_buffer;
  metrics::Counter* limit_output_hard;
  metrics::Counter* limit_output_soft;
  metrics::Counter* limit_pin_time;
  metrics::Counter* limit_inflight_set;
  metrics::Counter* limit_scan_buckets;
  metrics::Counter* limit_unauthenticated;  // max_unauthenticated_clients
  metrics::Counter* limit_auth_timeout;     // auth_timeout
  metrics::Counter* pins_copied;            // kvstore_resp_pinned_replies_copied_total
  metrics::Counter* sets_held_back;         // kvstore_resp_sets_held_back_total
  // kvstore_resp_lock_waits_served_total: RespLoop::ServeFor.
  metrics::Counter* lock_waits_served;
  // kvstore_resp_commands_parked_total: RespLoop::ParkCommand.
  metrics::Counter* commands_parked;
  // kvstore_server_requests_total / _duration_seconds{transport="tcp",op=...}.
  RequestMetrics get;
  RequestMetrics put;
  RequestMetrics del;
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_RESP_COUNTERS_H_
