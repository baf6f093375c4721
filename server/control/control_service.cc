// Copyright 2026 The kvstore Authors.
//
// Every RPC has the same shape: count it, compute an absl::Status in a
// lambda (so KV_RETURN_IF_ERROR can be used), convert it once at the end.
// The service holds no data-path state of its own; see the header.

#include "server/control/control_service.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cluster/refusal.h"
#include "common/grpc_status.h"
#include "common/metrics/exposition.h"
#include "common/protocol/commit_wire.h"
#include "common/protocol/layout.h"
#include "common/status_macros.h"
#include "common/sync/thread_name.h"
#include "common/version.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {
namespace {

namespace pb = ::kvstore::v1;

// Millisecond values the proto carries as uint32: clamped, never wrapped.
uint32_t ClampToU32(int64_t v) {
  return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, std::numeric_limits<uint32_t>::max()));
}

// A client's name is stored with its session, each lease and each queue
// pair for as long as they live, and written into log lines: it must be
// short and printable, or a few handshakes would hold memory for the
// session's life and a newline in it would forge log lines.
constexpr size_t kMaxClientNameBytes = 128;

absl::Status CheckClientName(const std::string& name) {
  if (name.size() > kMaxClientNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("client_name is ", name.size(), " bytes; at most ", kMaxClientNameBytes));
  }
  for (char c : name) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "client_name must be printable ASCII (no control characters, tabs or newlines)");
    }
  }
  return absl::OkStatus();
}

// "client@peer", for logs and the lease record; "anonymous" when the client
// gave no name. `context` is null when a test calls the service directly.
std::string OwnerOf(const grpc::ServerContext* context, const std::string& client_name) {
  std::string owner = client_name.empty() ? "anonymous" : client_name;
  if (context != nullptr) absl::StrAppend(&owner, "@", context->peer());
  return owner;
}

// The raw 16 bytes of a GID, as the proto carries them.
std::string GidBytes(const rdma::Gid& gid) {
  return std::string(reinterpret_cast<const char*>(gid.data()), gid.size());
}

}  // namespace

KvControlServiceImpl::KvControlServiceImpl(ControlServiceDeps deps)
    : own_registry_(deps.registry == nullptr ? std::make_unique<metrics::Registry>() : nullptr),
      deps_(std::move(deps)),
      registry_(deps_.registry != nullptr ? deps_.registry : own_registry_.get()),
      auth_(deps_.credentials, registry_),
      sessions_(deps_.sessions, registry_) {
  // Programming errors of the wiring, not conditions a client can cause.
  CHECK(deps_.store != nullptr);
  CHECK(deps_.leases != nullptr);
  CHECK(deps_.pool != nullptr);
  RegisterMetrics();
  put_writer_ = deps_.store->NewSharedWriter();
  put_workers_ = std::make_unique<WorkerPool>(kPutWorkers);
  if (deps_.session_sweep_interval > absl::ZeroDuration()) {
    sweeper_ = std::thread([this] {
      NameThread("kv-ctl-sweeper");
      SweepLoop();
    });
  }
}

void KvControlServiceImpl::RegisterMetrics() {
  // One child per RPC; the method label is the proto's method name, so a
  // dashboard can match it against gRPC's own instrumentation.
  auto rpc = [this](const char* method) {
    return registry_->AddCounter("kvstore_grpc_requests_total", "gRPC requests served, by method.",
                                 {{"method", method}});
  };
  handshakes_ = rpc("Handshake");
  connect_qps_ = rpc("ConnectQp");
  disconnect_qps_ = rpc("DisconnectQp");
  grant_leases_ = rpc("GrantLease");
  renew_leases_ = rpc("RenewLease");
  release_leases_ = rpc("ReleaseLease");
  gets_ = rpc("Get");
  puts_ = rpc("Put");
  deletes_ = rpc("Delete");
  scans_ = rpc("Scan");
  stats_ = rpc("Stats");
  stale_epoch_errors_ = registry_->AddCounter(
      "kvstore_grpc_stale_epoch_errors_total",
      "Lease RPCs refused because the client's epoch is from an earlier server start.");
  for (const char* reason : {"no_session", "not_owner", "other_user", "no_connection", "no_probe",
                             "quota_qps", "quota_leases", "quota_lease_bytes", "max_sessions"}) {
    refusals_[reason] = registry_->AddCounter(
        "kvstore_grpc_session_refusals_total",
        "Control RPCs refused by the session rules (unknown session, foreign connection, quota).",
        {{"reason", reason}});
  }
  get_requests_ = RegisterRequestMetrics(registry_, "grpc", "get");
  put_requests_ = RegisterRequestMetrics(registry_, "grpc", "put");
  delete_requests_ = RegisterRequestMetrics(registry_, "grpc", "delete");
}

// The writers seal their open segments in the store, which outlives us.
KvControlServiceImpl::~KvControlServiceImpl() { StopSweeper(); }

void KvControlServiceImpl::StopSweeper() {
  if (!stop_sweeper_.HasBeenNotified()) stop_sweeper_.Notify();
  if (sweeper_.joinable()) sweeper_.join();
}

void KvControlServiceImpl::SweepLoop() {
  while (!stop_sweeper_.WaitForNotificationWithTimeout(deps_.session_sweep_interval)) {
    SweepSessions(absl::Now());
  }
}

size_t KvControlServiceImpl::SweepSessions(absl::Time now) {
  auto live = [this](uint64_t connection_id) {
    return deps_.rdma != nullptr && deps_.rdma->IsLive(connection_id);
  };
  std::vector<SessionTable::Expired> expired = sessions_.Sweep(now, live);
  for (const SessionTable::Expired& e : expired) {
    // The id is a capability: logs name the peer, not the id.
    VLOG(1) << "session of " << e.peer << " expired";
    if (deps_.rdma == nullptr) continue;
    // Disconnecting ends the leases bound on each queue pair; one already
    // reaped by the RDMA service is NOT_FOUND, which is fine.
    for (uint64_t c : e.connections) (void)deps_.rdma->Disconnect(c);
  }
  return expired.size();
}

absl::Status KvControlServiceImpl::Refuse(const char* reason, absl::Status status) {
  auto it = refusals_.find(reason);
  if (it != refusals_.end()) it->second->Increment();
  return status;
}

absl::Status KvControlServiceImpl::CheckCaller(uint64_t session_id, uint64_t connection_id) {
  KV_ASSIGN_OR_RETURN(std::shared_ptr<SessionTable::Session> session, UseSession(session_id));
  absl::MutexLock lock(&session->mu);
  return CheckOwns(*session, connection_id);
}

absl::StatusOr<std::shared_ptr<SessionTable::Session>> KvControlServiceImpl::UseSession(
    uint64_t id) {
  auto session = sessions_.Use(id);
  if (!session.ok()) return Refuse("no_session", session.status());
  return session;
}

absl::Status KvControlServiceImpl::CheckOwns(SessionTable::Session& session,
                                             uint64_t connection_id) {
  // Looked up just before the sweeper expired it: its queue pairs are being
  // disconnected, so nothing more may be done in its name.
  if (session.closed) {
    return Refuse("no_session", cluster::ToStatus(cluster::Refusal::SessionLost(
                                    "the session expired meanwhile: handshake again")));
  }
  if (connection_id != 0 && session.connections.contains(connection_id)) {
    return absl::OkStatus();
  }
  // Whether the connection exists at all is not said: it is not the
  // caller's business.
  return Refuse("not_owner",
                absl::PermissionDeniedError(absl::StrCat("RDMA connection ", connection_id,
                                                         " does not belong to this session")));
}

absl::Status KvControlServiceImpl::CheckLeaseQuota(SessionTable::Session& session, uint64_t bytes) {
  const SessionOptions& q = sessions_.options();
  const LeaseTable::Holdings held = deps_.leases->HeldBy(session.connections);
  if (held.leases >= q.max_leases) {
    return Refuse("quota_leases", absl::ResourceExhaustedError(
                                      absl::StrCat("this session holds ", held.leases,
                                                   " leases, its quota (--session_max_leases)")));
  }
  // The chunk is whole segments: count what the grant will really take.
  const uint64_t segment = deps_.store->options().segment_bytes;
  const uint64_t chunk = (bytes + segment - 1) / segment * segment;
  if (held.bytes + chunk > q.max_lease_bytes) {
    return Refuse("quota_lease_bytes",
                  absl::ResourceExhaustedError(absl::StrCat(
                      "a lease of ", chunk, " bytes would take this session's leases past ",
                      q.max_lease_bytes, " bytes (--session_max_lease_bytes)")));
  }
  return absl::OkStatus();
}

absl::Status KvControlServiceImpl::CheckEpoch(uint64_t epoch) const {
  // Leases, rkeys and connection ids all belong to one server start; after
  // a restart the client must learn the new ones.
  if (epoch == deps_.epoch) return absl::OkStatus();
  return cluster::ToStatus(cluster::Refusal::StaleServerEpoch(
      absl::StrCat("client epoch ", epoch, ", server epoch ", deps_.epoch, ": handshake again")));
}

void KvControlServiceImpl::FillLease(const LeaseInfo& info, pb::Lease* lease) const {
  // The client sees the chunk as an arena offset (for its bump allocator)
  // and, with a key, as a virtual address (for its WRITEs).
  lease->set_lease_id(info.lease_id);
  lease->set_epoch(deps_.epoch);
  lease->set_arena_offset(info.chunk.offset);
  lease->set_length(info.chunk.length);
  lease->set_expires_unix_ms(absl::ToUnixMillis(info.expires_at));
  lease->set_write_rkey(info.write_rkey);
  // An address is only useful together with a key that allows writing to it.
  if (info.write_rkey != 0) {
    lease->set_write_addr(reinterpret_cast<uint64_t>(deps_.pool->data()) + info.chunk.offset);
  }
}

grpc::Status KvControlServiceImpl::Handshake(grpc::ServerContext* context,
                                             const pb::HandshakeRequest* request,
                                             pb::HandshakeResponse* response) {
  handshakes_->Increment();
  // Nothing below (read keys, seed, regions) leaves before the token check.
  absl::StatusOr<auth::Identity> who = auth_.Admit(context, "kvstore.v1.KvControl/Handshake");
  if (!who.ok()) return ToGrpcStatus(who.status());
  if (absl::Status s = CheckClientName(request->client_name()); !s.ok()) return ToGrpcStatus(s);
  // The session remembers who opened it: its queue pairs get that
  // principal's commit rights (a replica commit needs a peer's).
  auto session = sessions_.Open(OwnerOf(context, request->client_name()), *std::move(who));
  if (!session.ok()) return ToGrpcStatus(Refuse("max_sessions", session.status()));
  VLOG(1) << "handshake from " << request->client_name() << " at "
          << (context != nullptr ? context->peer() : "?");
  response->set_session_id(*session);
  response->set_epoch(deps_.epoch);
  response->set_server_version(kProductVersion);

  // Limits: the client checks them before it sends anything, so that an
  // over-limit request fails locally with the same message.
  const Limits& limits = deps_.store->limits();
  const LeaseOptions& lease_options = deps_.leases->options();
  pb::Limits* l = response->mutable_limits();
  l->set_max_key_bytes(limits.max_key_bytes);
  l->set_max_value_bytes(limits.max_value_bytes);
  l->set_max_batch_keys(limits.max_batch_keys);
  l->set_max_lease_bytes(lease_options.max_lease_bytes);
  l->set_lease_ttl_ms(ClampToU32(absl::ToInt64Milliseconds(lease_options.ttl)));
  // Half the grace period, rounded down, so that a READ that finished within
  // the span cannot have raced the reuse of the entry it read.
  l->set_max_read_span_ms(
      ClampToU32(absl::ToInt64Milliseconds(deps_.store->options().grace_period / 2)));

  // Index geometry: what a client needs to find a key's bucket by READ.
  const layout::IndexGeometry& geometry = deps_.store->index().geometry();
  pb::IndexGeometry* g = response->mutable_index();
  g->set_bucket_count(geometry.bucket_count);
  g->set_seed(geometry.seed);
  g->set_layout_version(geometry.layout_version);
  g->set_bucket_bytes(static_cast<uint32_t>(layout::kBucketBytes));
  g->set_slots_per_bucket(static_cast<uint32_t>(layout::kSlotsPerBucket));

  // Empty when the pool is not registered with an RDMA device.
  for (const PoolRegion& region : deps_.pool->regions()) {
    pb::RegionDescriptor* r = response->add_regions();
    r->set_region_id(region.region_id);
    r->set_kind(region.is_index ? pb::REGION_KIND_INDEX : pb::REGION_KIND_DATA);
    r->set_arena_offset(region.pool_offset);
    r->set_length(region.length);
    r->set_addr(region.addr);
    r->set_rkey(region.rkey);
    r->set_epoch(deps_.epoch);
  }
  // The fence words, READ by one-sided readers with their bucket READs
  // (architecture §19.5); id after the pool's.
  if (deps_.rdma != nullptr && deps_.rdma->fence_region().has_value()) {
    const RdmaService::FenceRegion& f = *deps_.rdma->fence_region();
    pb::RegionDescriptor* r = response->add_regions();
    r->set_region_id(static_cast<uint32_t>(deps_.pool->regions().size()));
    r->set_kind(pb::REGION_KIND_FENCE);
    r->set_length(f.length);
    r->set_addr(f.addr);
    r->set_rkey(f.rkey);
    r->set_epoch(deps_.epoch);
  }

  // Where the data paths are; the client picks one (RDMA, else RESP/TCP).
  pb::DataEndpoints* e = response->mutable_endpoints();
  e->set_resp_address(deps_.resp_address);
  e->set_resp_tls(deps_.resp_tls);
  e->set_rdma_device(deps_.rdma_device);
  if (deps_.rdma != nullptr) {
    e->set_rdma_gid(GidBytes(deps_.rdma->gid()));
    e->set_rdma_port(deps_.rdma->port());
  }
  response->set_data_arena_bytes(deps_.pool->data_bytes());
  return grpc::Status::OK;
}

grpc::Status KvControlServiceImpl::GrantLease(grpc::ServerContext* context,
                                              const pb::GrantLeaseRequest* request,
                                              pb::GrantLeaseResponse* response) {
  grant_leases_->Increment();
  absl::Status status = [&]() -> absl::Status {
    KV_ASSIGN_OR_RETURN(auth::Identity caller,
                        auth_.Admit(context, "kvstore.v1.KvControl/GrantLease"));
    KV_RETURN_IF_ERROR(CheckClientName(request->client_name()));
    KV_RETURN_IF_ERROR(CheckEpoch(request->epoch()));
    KV_ASSIGN_OR_RETURN(std::shared_ptr<SessionTable::Session> session,
                        UseSession(request->session_id()));
    KV_RETURN_IF_ERROR(CheckSameUser(*session, caller));
    const uint64_t connection_id = request->connection_id();
    // A lease without a write key could be renewed and released by anyone
    // and pinned pool memory for ever; only RDMA writers need leases.
    if (connection_id == 0) {
      return Refuse("no_connection",
                    absl::FailedPreconditionError(
                        "a lease needs an RDMA connection of this session: ConnectQp first"));
    }
    // Held across the quota check and the grant, so that concurrent grants
    // of one session cannot both pass the quota.
    absl::MutexLock lock(&session->mu);
    KV_RETURN_IF_ERROR(CheckOwns(*session, connection_id));
    KV_RETURN_IF_ERROR(CheckLeaseQuota(*session, request->bytes()));
    // The lease is born with its write key bound on the connection's queue
    // pair (the key maker runs inside Grant(), after the size checks and
    // the allocation, so their errors come first).
    LeaseTable::KeyMaker make_key =
        [this,
         connection_id](const LeaseInfo& lease) -> absl::StatusOr<std::unique_ptr<LeaseWriteKey>> {
      if (deps_.rdma == nullptr) {
        return absl::FailedPreconditionError("this server has no RDMA device: no write keys");
      }
      return deps_.rdma->BindLease(connection_id, lease);
    };
    // Like a PUT, a grant may wait for segments leaving their grace period
    // (SpaceWait). The session's lock is held meanwhile: its other grants
    // would wait for the same space.
    KV_ASSIGN_OR_RETURN(
        LeaseInfo info,
        deps_.leases->Grant(request->bytes(), OwnerOf(context, request->client_name()), make_key,
                            SpaceWait(context)));
    FillLease(info, response->mutable_lease());
    return absl::OkStatus();
  }();
  return FinishLeaseRpc(status);
}

grpc::Status KvControlServiceImpl::ConnectQp(grpc::ServerContext* context,
                                             const pb::ConnectQpRequest* request,
                                             pb::ConnectQpResponse* response) {
  connect_qps_->Increment();
  absl::Status status = [&]() -> absl::Status {
    KV_ASSIGN_OR_RETURN(auth::Identity caller,
                        auth_.Admit(context, "kvstore.v1.KvControl/ConnectQp"));
    KV_RETURN_IF_ERROR(CheckClientName(request->client_name()));
    KV_RETURN_IF_ERROR(CheckEpoch(request->epoch()));
    KV_ASSIGN_OR_RETURN(std::shared_ptr<SessionTable::Session> session,
                        UseSession(request->session_id()));
    KV_RETURN_IF_ERROR(CheckSameUser(*session, caller));
    KV_ASSIGN_OR_RETURN(RdmaService::Accepted accepted,
                        ConnectChecked(*session, context, *request));
    // The server's half of the connection, and the commit-channel sizes the
    // client must respect (credits in flight, bytes per commit message).
    response->set_connection_id(accepted.connection_id);
    pb::QpEndpoint* out = response->mutable_server();
    out->set_qpn(accepted.server.qpn);
    out->set_psn(accepted.server.psn);
    out->set_gid(GidBytes(accepted.server.gid));
    out->set_lid(accepted.server.lid);
    response->set_commit_credits(accepted.commit_credits);
    response->set_max_commit_bytes(accepted.max_commit_bytes);
    response->set_replica_batch_commits(accepted.replica_batch_commits);
    response->set_ack_bytes(static_cast<uint32_t>(wire::kAckBytes));
    return absl::OkStatus();
  }();
  return ToGrpcStatus(status);
}

absl::Status KvControlServiceImpl::CheckSameUser(const SessionTable::Session& session,
                                                 const auth::Identity& caller) {
  if (caller.name == session.who.name) return absl::OkStatus();
  return Refuse("other_user", absl::PermissionDeniedError(
                                  "this session was opened by another user: handshake with your "
                                  "own credential"));
}

absl::StatusOr<RdmaService::Accepted> KvControlServiceImpl::ConnectChecked(
    SessionTable::Session& session, const grpc::ServerContext* context,
    const pb::ConnectQpRequest& request) {
  if (deps_.rdma == nullptr) {
    return absl::UnavailableError("this server has no RDMA device; use the RESP/TCP data port");
  }
  // The client's endpoint is untrusted input: checked before any verbs
  // resource is made for it.
  const pb::QpEndpoint& in = request.client();
  if (in.gid().size() != 16 || in.qpn() == 0) {
    return absl::InvalidArgumentError("client queue pair endpoint needs a qpn and a 16-byte gid");
  }
  // Without a probe word a dead client's queue pair is never found out.
  if (request.probe_rkey() == 0 || request.probe_addr() == 0) {
    return Refuse("no_probe", absl::InvalidArgumentError(
                                  "ConnectQp needs probe_addr and probe_rkey (idle probes)"));
  }
  rdma::QpEndpoint client;
  client.qpn = in.qpn();
  client.psn = in.psn() & 0xffffff;  // PSNs are 24 bits
  std::memcpy(client.gid.data(), in.gid().data(), 16);
  client.lid = static_cast<uint16_t>(in.lid());
  // Held across the quota check and Connect(), so two ConnectQps of one
  // session cannot both take the last slot.
  absl::MutexLock lock(&session.mu);
  if (session.closed) {
    return Refuse("no_session", cluster::ToStatus(cluster::Refusal::SessionLost(
                                    "the session expired meanwhile: handshake again")));
  }
  // Queue pairs the RDMA service reaped no longer count.
  absl::erase_if(session.connections, [this](uint64_t c) { return !deps_.rdma->IsLive(c); });
  if (session.connections.size() >= sessions_.options().max_qps) {
    return Refuse("quota_qps", absl::ResourceExhaustedError(
                                   absl::StrCat("this session has ", session.connections.size(),
                                                " queue pairs, its quota (--session_max_qps)")));
  }
  CommitRights rights;
  rights.write = auth::Allows(session.who.role, auth::Permission::kWrite);
  rights.replicate = session.who.role == auth::Role::kPeer;
  KV_ASSIGN_OR_RETURN(RdmaService::Accepted accepted,
                      deps_.rdma->Connect(client, OwnerOf(context, request.client_name()),
                                          request.probe_addr(), request.probe_rkey(), rights));
  session.connections.insert(accepted.connection_id);
  return accepted;
}

grpc::Status KvControlServiceImpl::DisconnectQp(grpc::ServerContext* context,
                                                const pb::DisconnectQpRequest* request,
                                                pb::DisconnectQpResponse* response) {
  disconnect_qps_->Increment();
  absl::Status status = [&]() -> absl::Status {
    KV_RETURN_IF_ERROR(auth_.Check(context, "kvstore.v1.KvControl/DisconnectQp"));
    KV_RETURN_IF_ERROR(CheckEpoch(request->epoch()));
    KV_ASSIGN_OR_RETURN(std::shared_ptr<SessionTable::Session> session,
                        UseSession(request->session_id()));
    absl::MutexLock lock(&session->mu);
    // Only the session that made a queue pair may end it (finding 5).
    KV_RETURN_IF_ERROR(CheckOwns(*session, request->connection_id()));
    if (deps_.rdma == nullptr) return absl::UnavailableError("this server has no RDMA device");
    session->connections.erase(request->connection_id());
    // Ends the leases the connection holds too (their windows die with it).
    return deps_.rdma->Disconnect(request->connection_id());
  }();
  return ToGrpcStatus(status);
}

grpc::Status KvControlServiceImpl::RenewLease(grpc::ServerContext* context,
                                              const pb::RenewLeaseRequest* request,
                                              pb::RenewLeaseResponse* response) {
  renew_leases_->Increment();
  absl::Status status = [&]() -> absl::Status {
    KV_RETURN_IF_ERROR(auth_.Check(context, "kvstore.v1.KvControl/RenewLease"));
    KV_RETURN_IF_ERROR(CheckEpoch(request->epoch()));
    KV_RETURN_IF_ERROR(CheckCaller(request->session_id(), request->connection_id()));
    // The holder check (a lease with a key belongs to its connection) is
    // the LeaseTable's, under the same lock as the renewal.
    KV_ASSIGN_OR_RETURN(LeaseInfo info,
                        deps_.leases->Renew(request->lease_id(), request->connection_id()));
    // The key stays valid; RenewLease does not repeat it (protocol.md §1.2).
    info.write_rkey = 0;
    FillLease(info, response->mutable_lease());
    return absl::OkStatus();
  }();
  return FinishLeaseRpc(status);
}

grpc::Status KvControlServiceImpl::ReleaseLease(grpc::ServerContext* context,
                                                const pb::ReleaseLeaseRequest* request,
                                                pb::ReleaseLeaseResponse* response) {
  release_leases_->Increment();
  absl::Status status = [&]() -> absl::Status {
    KV_RETURN_IF_ERROR(auth_.Check(context, "kvstore.v1.KvControl/ReleaseLease"));
    KV_RETURN_IF_ERROR(CheckEpoch(request->epoch()));
    // The session must own the connection, and the LeaseTable checks that
    // the lease is held by that connection: another session's release fails
    // and the chunk stays with its holder (finding 2).
    KV_RETURN_IF_ERROR(CheckCaller(request->session_id(), request->connection_id()));
    // Committed entries outlive the lease; only the chunk's unused rest goes.
    return deps_.leases->Release(request->lease_id(), request->connection_id());
  }();
  return FinishLeaseRpc(status);
}

grpc::Status KvControlServiceImpl::FinishLeaseRpc(const absl::Status& status) {
  // Every UNAVAILABLE of a lease RPC is counted, the stale epoch being by
  // far the most common one (a bind on a dead connection is the other).
  if (absl::IsUnavailable(status)) stale_epoch_errors_->Increment();
  return ToGrpcStatus(status);
}

}  // namespace server
}  // namespace kvstore
