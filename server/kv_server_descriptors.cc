// Copyright 2026 The kvstore Authors.
//
// KvServer's descriptor budget: the per-port connection caps that fit the
// process's descriptor limit (PlanDescriptors, at start) and the series
// that show them (RegisterDescriptorMetrics, once the control port is
// bound).

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/auth/authenticator.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/kv_server.h"
#include "server/metrics/http_server.h"
#include "server/net/accept_guard.h"
#include "server/net/descriptor_budget.h"

namespace kvstore {
namespace server {

absl::Status KvServer::PlanDescriptors() {
  KV_ASSIGN_OR_RETURN(net::DescriptorLimit limit, net::RaiseDescriptorLimit());
  const int open = std::max(0, net::OpenDescriptors());
  // Every port's cap is counted: what a stranger can open on one port must
  // not take the descriptors another port, etcd or a peer needs.
  absl::StatusOr<auth::Identities> ids = auth::Identities::Build(Credentials());
  if (!ids.ok()) return ids.status();
  net::ConnectionRequest request;
  request.grpc = options_.grpc_max_connections;
  request.resp = options_.resp_limits.max_clients;
  request.resp_unauthenticated = options_.resp_limits.max_unauthenticated_clients;
  request.resp_auth = !ids->open();  // RESP asks for AUTH exactly then
  request.resp_threads = options_.resp_threads;
  request.resp_tls = options_.resp_tls_port >= 0;
  request.metrics = options_.metrics_port >= 0 ? metrics::MetricsHttpOptions().max_connections : 0;
  KV_ASSIGN_OR_RETURN(net::ConnectionCaps caps, net::PlanConnectionCaps(limit.soft, open, request));
  descriptor_limit_ = limit.soft;
  grpc_max_connections_ = caps.grpc;
  resp_max_clients_ = caps.resp;
  resp_max_unauthenticated_clients_ = caps.resp_unauthenticated;
  LOG(INFO) << "descriptor limit " << limit.soft << " (started with " << limit.soft_before
            << ", hard " << limit.hard << "), " << open << " open, "
            << net::ReservedDescriptors(limit.soft) << " reserved; at most "
            << grpc_max_connections_ << " control-port connections, " << resp_max_clients_
            << " RESP clients"
            << (request.resp_auth ? absl::StrCat(", ", resp_max_unauthenticated_clients_,
                                                 " unauthenticated RESP connections")
                                  : "")
            << ", " << caps.metrics << " metrics-port connections (" << caps.total
            << " descriptors)";
  if (!caps.adjusted.empty()) LOG(WARNING) << caps.adjusted;
  if (!net::AcceptGuard::Interposed()) {
    LOG(WARNING) << "this binary does not export its accept4: the control port's connection "
                    "cap is not enforced and its listener stops for good if descriptors run out";
  }
  return absl::OkStatus();
}

void KvServer::RegisterDescriptorMetrics() {
  const int port = control_port_;
  descriptor_metrics_.push_back(
      registry_.AddCallbackGauge("kvstore_descriptors_open", "Descriptors the process has open.",
                                 {}, [] { return static_cast<int64_t>(net::OpenDescriptors()); }));
  descriptor_metrics_.push_back(registry_.AddCallbackGauge(
      "kvstore_descriptors_limit", "The process's descriptor limit (soft RLIMIT_NOFILE).", {},
      [limit = descriptor_limit_] { return static_cast<int64_t>(limit); }));
  descriptor_metrics_.push_back(registry_.AddCallbackGauge(
      "kvstore_grpc_connections", "Connections open on the control port.", {},
      [port] { return static_cast<int64_t>(net::AcceptGuard::Get().Stats(port).open); }));
  descriptor_metrics_.push_back(registry_.AddCallbackCounter(
      "kvstore_grpc_connections_refused_total",
      "Control-port connections closed at accept: over --grpc_max_connections (cap) or with "
      "the process out of descriptors (descriptors).",
      {{"reason", "cap"}}, [port] { return net::AcceptGuard::Get().Stats(port).refused_at_cap; }));
  descriptor_metrics_.push_back(registry_.AddCallbackCounter(
      "kvstore_grpc_connections_refused_total",
      "Control-port connections closed at accept: over --grpc_max_connections (cap) or with "
      "the process out of descriptors (descriptors).",
      {{"reason", "descriptors"}},
      [port] { return net::AcceptGuard::Get().Stats(port).refused_no_fd; }));
}

}  // namespace server
}  // namespace kvstore
