// Copyright 2026 The kvstore Authors.

#include "server/resp/resp_counters.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

metrics::Counter* LimitCounter(metrics::Registry* registry, const char* limit) {
  return registry->AddCounter(
      "kvstore_resp_limit_rejections_total",
      "RESP requests refused or connections closed because a per-resource bound "
      "(the limit label, a --resp_<limit> flag) was reached.",
      {{"limit", limit}});
}

}  // namespace

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
      auth_failures(registry->AddCounter("kvstore_resp_auth_failures_total",
                                         "RESP AUTH / HELLO AUTH attempts with a wrong password.")),
      noauth(registry->AddCounter("kvstore_resp_noauth_rejections_total",
                                  "RESP commands refused with NOAUTH (sent before AUTH).")),
      noperm(registry->AddCounter(
          "kvstore_resp_noperm_rejections_total",
          "RESP commands refused with NOPERM (the user's role does not allow them).")),
      accept_errors(
          registry->AddCounter("kvstore_resp_accept_errors_total",
                               "accept() failures on the RESP port (EMFILE/ENFILE and the like).")),
      limit_max_clients(LimitCounter(registry, "max_clients")),
      limit_query_buffer(LimitCounter(registry, "max_query_buffer")),
      limit_output_hard(LimitCounter(registry, "output_hard_limit")),
      limit_output_soft(LimitCounter(registry, "output_soft_limit")),
      limit_pin_time(LimitCounter(registry, "max_pin_time")),
      limit_inflight_set(LimitCounter(registry, "max_inflight_set_bytes")),
      limit_scan_buckets(LimitCounter(registry, "scan_max_buckets")),
      limit_unauthenticated(LimitCounter(registry, "max_unauthenticated_clients")),
      limit_auth_timeout(LimitCounter(registry, "auth_timeout")),
      pins_copied(registry->AddCounter(
          "kvstore_resp_pinned_replies_copied_total",
          "GET/MGET values copied out of the pool because the client read them too slowly "
          "(resp_max_pin_time).")),
      sets_held_back(registry->AddCounter(
          "kvstore_resp_sets_held_back_total",
          "SETs that found the pool full of segments in their grace period and waited, their "
          "connection paused, instead of being refused at once.")),
      lock_waits_served(registry->AddCounter(
          "kvstore_resp_lock_waits_served_total",
          "Times a RESP loop, waiting for a key lock held by a replicated write, read replication "
          "replies itself so that the holder could finish (cluster mode).")),
      commands_parked(registry->AddCounter(
          "kvstore_resp_commands_parked_total",
          "Write commands other than a plain SET (DEL, INCR, MSET, SET with options ...) that a "
          "RESP loop handed to a worker because they would wait for other nodes (cluster mode).")),
      // The tcp request series belong here: RESP is the server's only TCP
      // data path. The gRPC handlers and the RDMA service register the
      // same two families with their own transport label.
      get(RegisterRequestMetrics(registry, "tcp", "get")),
      put(RegisterRequestMetrics(registry, "tcp", "put")),
      del(RegisterRequestMetrics(registry, "tcp", "delete")) {}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
