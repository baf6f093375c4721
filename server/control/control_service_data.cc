// Copyright 2026 The kvstore Authors.
//
// KvControlServiceImpl's slow-path data RPCs (Get, Ttl, Stats, Scan; Put is
// control_service_put.cc, Delete and Expire control_service_delete.cc) and
// their cluster routing: the server CPU serving clients without
// RDMA or with entries no READ can fetch. Split from control_service.cc by
// job; the shape of every RPC is the same (see there).

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cluster/refusal.h"
#include "common/grpc_status.h"
#include "common/metrics/exposition.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "server/control/control_service.h"

namespace kvstore {
namespace server {

namespace pb = ::kvstore::v1;

absl::Status KvControlServiceImpl::RouteKey(const std::string& key) const {
  if (deps_.cluster == nullptr) return absl::OkStatus();
  // Slow-path reads, like writes, are served by the primary only: the gRPC
  // API has no READONLY.
  return RouteStatus(deps_.cluster->RouteKey(key), RefusalAddress::kControl);
}

absl::Status KvControlServiceImpl::RerouteRefusal(const std::string& key,
                                                  absl::Status status) const {
  // The hook names the slot's primary by whichever address it knows; the
  // caller of this API needs the control address, from the newest map. A
  // redirect of unknown effect is not one to follow: it stays as it is.
  std::optional<cluster::Refusal> r = cluster::FromStatus(status);
  if (r.has_value() && r->effect == cluster::Effect::kNone &&
      (r->kind == cluster::RefusalKind::kMoved || r->kind == cluster::RefusalKind::kAsk)) {
    if (absl::Status routed = RouteKey(key); !routed.ok()) return routed;
  }
  return status;
}

grpc::Status KvControlServiceImpl::Get(grpc::ServerContext* context, const pb::GetRequest* request,
                                       pb::GetResponse* response) {
  gets_->Increment();
  if (absl::Status s = auth_.Check(context, "kvstore.v1.KvControl/Get"); !s.ok())
    return ToGrpcStatus(s);
  // The handler's latency, as kvstore_server_request_duration_seconds.
  const absl::Time start = absl::Now();
  absl::Status status = [&]() -> absl::Status {
    KV_RETURN_IF_ERROR(deps_.store->limits().CheckKey(request->key()));
    KV_RETURN_IF_ERROR(RouteKey(request->key()));
    KV_ASSIGN_OR_RETURN(PinnedValue value, deps_.store->Get(request->key()));
    // Copied while pinned; the pin ends when `value` goes out of scope.
    response->set_value(value.value().data(), value.value().size());
    return absl::OkStatus();
  }();
  get_requests_.Record(absl::Now() - start);
  return ToGrpcStatus(status);
}

// A PUT (or a lease grant, control_service.cc) that finds the pool full
// only because overwritten segments are still in their grace period is held
// back until one is free, for up to a grace period (and 100 ms, about two
// cleaner ticks) or the RPC's deadline, whichever ends
// first: under a steady stream of large overwrites the space is coming
// back, and a caller would rather wait than retry. A lease grant's handler
// thread waits, as it would for any slow call, and a Put's wait runs on one
// of the service's workers; the RESP loops never wait.
absl::Duration KvControlServiceImpl::SpaceWait(const grpc::ServerContextBase* context) const {
  absl::Duration wait = deps_.store->options().grace_period + absl::Milliseconds(100);
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    wait = std::min(wait, absl::FromChrono(deadline) - absl::Now());
  }
  return std::max(wait, absl::ZeroDuration());
}

grpc::Status KvControlServiceImpl::Ttl(grpc::ServerContext* context, const pb::TtlRequest* request,
                                       pb::TtlResponse* response) {
  if (absl::Status s = auth_.Check(context, "kvstore.v1.KvControl/Ttl"); !s.ok())
    return ToGrpcStatus(s);
  absl::Status status = [&]() -> absl::Status {
    KV_RETURN_IF_ERROR(deps_.store->limits().CheckKey(request->key()));
    KV_RETURN_IF_ERROR(RouteKey(request->key()));
    KV_ASSIGN_OR_RETURN(KeyInfo info, deps_.store->Stat(request->key()));
    response->set_ttl_ms(info.expires_at_ms == 0
                             ? -1
                             : std::max<int64_t>(0, static_cast<int64_t>(info.expires_at_ms) -
                                                        deps_.store->NowMs()));
    return absl::OkStatus();
  }();
  return ToGrpcStatus(status);
}

grpc::Status KvControlServiceImpl::ReportReads(grpc::ServerContext* context,
                                               const pb::ReportReadsRequest* request,
                                               pb::ReportReadsResponse* response) {
  if (absl::Status s = auth_.Check(context, "kvstore.v1.KvControl/ReportReads"); !s.ok())
    return ToGrpcStatus(s);
  const int n = request->offsets_size() + request->fixed_offsets_size();
  if (n > kMaxReportedReads) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("ReportReads carries ", n, " offsets; at most ", kMaxReportedReads)));
  }
  // A bit set per offset, bounds-checked by the store: a stale or made-up
  // offset marks nothing that matters (at worst one entry looks read).
  if (deps_.store->eviction_policy() != EvictionPolicy::kNoEviction) {
    for (uint64_t offset : request->offsets()) deps_.store->NoteRead(offset);
    for (uint64_t offset : request->fixed_offsets()) deps_.store->NoteRead(offset);
  }
  return grpc::Status::OK;
}

grpc::Status KvControlServiceImpl::Stats(grpc::ServerContext* context,
                                         const pb::StatsRequest* request,
                                         pb::StatsResponse* response) {
  stats_->Increment();
  if (absl::Status s = auth_.Check(context, "kvstore.v1.KvControl/Stats"); !s.ok())
    return ToGrpcStatus(s);
  // Facts first (static ones from the wiring, then the service's own, which
  // win on a clash), then the counters.
  auto& info = *response->mutable_info();
  for (const auto& [key, value] : deps_.info) info[key] = value;
  info["server_version"] = kProductVersion;
  info["epoch"] = absl::StrCat(deps_.epoch);
  info["resp_address"] = deps_.resp_address;
  info["rdma_device"] = deps_.rdma_device;
  info["rdma_registered"] = deps_.pool->registered() ? "true" : "false";
  for (const auto& [key, value] : CollectCounters()) (*response->mutable_counters())[key] = value;
  return grpc::Status::OK;
}

std::map<std::string, uint64_t> KvControlServiceImpl::CollectCounters() const {
  // The registry is the one list of counter names: the store's, the lease
  // table's, the RDMA service's, the RESP server's, this service's and the
  // process's series, keyed exactly as in /metrics (docs/operations.md).
  return metrics::FlattenSnapshot(registry_->TakeSnapshot());
}

grpc::Status KvControlServiceImpl::Scan(grpc::ServerContext* context,
                                        const pb::ScanRequest* request,
                                        pb::ScanResponse* response) {
  scans_->Increment();
  if (absl::Status s = auth_.Check(context, "kvstore.v1.KvControl/Scan"); !s.ok())
    return ToGrpcStatus(s);
  // 0 means "the default"; anything over the cap is quietly capped.
  const uint32_t count =
      request->count() == 0 ? kDefaultScanCount : std::min(request->count(), kMaxScanCount);
  // The store pages by index bucket; the cursor is the next bucket.
  std::vector<std::string> keys;
  // A cursor past the end (from a client's bug or another epoch) ends the
  // listing; KvIndex::Scan() treats it as such.
  const uint64_t next =
      deps_.store->Scan(request->cursor(), count, request->prefix(), &keys, deps_.scan_max_buckets);
  for (std::string& key : keys) response->add_keys(std::move(key));
  response->set_cursor(next);
  return grpc::Status::OK;
}

}  // namespace server
}  // namespace kvstore
