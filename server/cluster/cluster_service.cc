// Copyright 2026 The kvstore Authors.

#include "server/cluster/cluster_service.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/cluster/migration/slot_scan.h"
#include "server/cluster/replication/replica_socket.h"
#include "server/cluster/replication/slot_digest.h"

namespace kvstore {
namespace server {
namespace {

// An admin request as this node received it (ControllerProxy forwards it).
AdminCall AdminCallOf(const grpc::ServerContext* context) {
  AdminCall call;
  call.authorization = auth::Authenticator::AuthorizationOf(context);
  if (context == nullptr) return call;
  call.deadline = absl::FromChrono(context->deadline());
  call.forwarded = context->client_metadata().count(kAdminForwardedKey) > 0;
  return call;
}

// The shape of every unary RPC here: admitted (token, cluster mode, the
// component it needs), then answered, the answer's status (a refusal
// included) converted once. `answer` returns the response or, for an
// empty one, a bare status.
template <typename Resp, typename Answer>
grpc::Status Serve(const absl::Status& admitted, Resp* response, Answer answer) {
  if (!admitted.ok()) return ToGrpcStatus(admitted);
  auto r = answer();
  if constexpr (std::is_same_v<decltype(r), absl::Status>) {
    return ToGrpcStatus(r);
  } else {
    if (!r.ok()) return ToGrpcStatus(r.status());
    *response = *std::move(r);
    return grpc::Status::OK;
  }
}

// OK when the admin function `fn` was given at construction, else
// kUnimplemented naming `what`.
template <typename Fn>
absl::Status Wired(const Fn& fn, const char* what) {
  if (fn) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(what, " is not wired on this node"));
}

// The response of an admin answer that is a map.
template <typename Resp>
absl::StatusOr<Resp> WithMap(absl::StatusOr<v1::ClusterMap> map) {
  if (!map.ok()) return map.status();
  Resp resp;
  *resp.mutable_map() = *std::move(map);
  return resp;
}

}  // namespace

ClusterService::ClusterService(ClusterServiceDeps deps)
    : deps_(std::move(deps)), auth_(deps_.credentials, deps_.registry) {
  sync_entries_ = deps_.registry->AddCounter("kvstore_sync_served_entries_total",
                                             "Entries this node streamed to joining replicas.");
  sync_bytes_ = deps_.registry->AddCounter("kvstore_sync_served_bytes_total",
                                           "Bytes of entries streamed to joining replicas.");
}

absl::Status ClusterService::Admit(const grpc::ServerContext* context,
                                   absl::string_view method) const {
  KV_RETURN_IF_ERROR(
      auth_.Check(context, absl::StrCat(v1::KvCluster::service_full_name(), "/", method)));
  if (deps_.state == nullptr) {
    return cluster::ToStatus(cluster::Refusal::NotClustered("this server is not in a cluster"));
  }
  return absl::OkStatus();
}

absl::Status ClusterService::Admit(const grpc::ServerContext* context, absl::string_view method,
                                   const void* needed, const char* missing) const {
  KV_RETURN_IF_ERROR(Admit(context, method));
  if (needed == nullptr) return absl::UnimplementedError(missing);
  return absl::OkStatus();
}

absl::Status ClusterService::AdmitAdmin(const grpc::ServerContext* context,
                                        absl::string_view method, absl::Status wired) const {
  KV_RETURN_IF_ERROR(Admit(context, method));
  return wired;
}

grpc::Status ClusterService::GetClusterMap(grpc::ServerContext* context,
                                           const v1::GetClusterMapRequest* /*request*/,
                                           v1::GetClusterMapResponse* response) {
  return Serve(Admit(context, "GetClusterMap"), response,
               [&]() -> absl::StatusOr<v1::GetClusterMapResponse> {
                 auto map = deps_.state->map();
                 if (map == nullptr) return absl::UnavailableError("no cluster map yet");
                 v1::GetClusterMapResponse resp;
                 *resp.mutable_map() = map->proto();
                 resp.set_node_id(deps_.state->self());
                 return resp;
               });
}

grpc::Status ClusterService::Replicate(grpc::ServerContext* context,
                                       const v1::ReplicateRequest* request,
                                       v1::ReplicateResponse* response) {
  // gRPC's deadline of the call: the primary's replication timeout.
  return Serve(
      Admit(context, "Replicate", deps_.installer, "no installer"), response,
      [&]() -> absl::StatusOr<v1::ReplicateResponse> {
        KV_RETURN_IF_ERROR(InstallWrite(ViewOf(*request), absl::FromChrono(context->deadline())));
        v1::ReplicateResponse resp;
        resp.set_applied_seq(deps_.installer->AppliedSeq(request->shard_id()));
        return resp;
      });
}

absl::Status ClusterService::InstallWrite(const ReplicateWrite& write, absl::Time deadline) {
  return deps_.installer->Replicate(write, deadline);
}

grpc::Status ClusterService::ReplicateStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ReplicateBatchReply, v1::ReplicateBatch>* stream) {
  absl::Status admitted = Admit(context, "ReplicateStream", deps_.installer, "no installer");
  if (!admitted.ok()) return ToGrpcStatus(admitted);
  v1::ReplicateBatch batch;
  ReplicateBatchView view;
  while (stream->Read(&batch)) {
    // Each write's time left counts from the batch's arrival, as gRPC
    // counts a unary call's timeout from its own.
    ViewOf(batch, &view);
    if (!stream->Write(ApplyBatch(view, absl::Now()))) {
      break;  // the primary ended the stream
    }
  }
  return grpc::Status::OK;
}

v1::ReplicateBatchReply ClusterService::ApplyBatch(const ReplicateBatchView& batch,
                                                   absl::Time arrived) {
  return ApplyReplicateBatch(
      batch, arrived,
      [&](const ReplicateWrite& write, absl::Time deadline) {
        return InstallWrite(write, deadline);
      },
      deps_.store);
}

grpc::Status ClusterService::ShardDigest(grpc::ServerContext* context,
                                         const v1::ShardDigestRequest* request,
                                         v1::ShardDigestResponse* response) {
  return Serve(Admit(context, "ShardDigest", deps_.installer, "no installer"), response,
               [&] { return deps_.installer->ShardDigest(*request); });
}

grpc::Status ClusterService::ReconcileSlots(grpc::ServerContext* context,
                                            const v1::ReconcileSlotsRequest* request,
                                            v1::ReconcileSlotsResponse* response) {
  return Serve(Admit(context, "ReconcileSlots", deps_.installer, "no installer"), response,
               [&] { return deps_.installer->ReconcileSlots(*request); });
}

grpc::Status ClusterService::ReplicaStatus(grpc::ServerContext* context,
                                           const v1::ReplicaStatusRequest* request,
                                           v1::ReplicaStatusResponse* response) {
  return Serve(Admit(context, "ReplicaStatus", deps_.installer, "no installer"), response, [&] {
    return absl::StatusOr<v1::ReplicaStatusResponse>(deps_.installer->Status(request->shard_id()));
  });
}

grpc::Status ClusterService::SyncShard(grpc::ServerContext* context,
                                       const v1::SyncShardRequest* request,
                                       grpc::ServerWriter<v1::SyncShardChunk>* writer) {
  if (absl::Status s = Admit(context, "SyncShard",
                             deps_.store != nullptr ? deps_.replicator : nullptr, "no replicator");
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  auto seq =
      deps_.replicator->BeginSync(request->shard_id(), request->node_id(), request->shard_epoch());
  if (!seq.ok()) return ToGrpcStatus(seq.status());
  // The map BeginSync checked (or a newer one) names the shard's slots.
  auto map = deps_.state->map();
  const v1::Shard* shard = map->ShardById(request->shard_id());
  if (shard == nullptr) return ToGrpcStatus(absl::FailedPreconditionError("shard vanished"));
  // The slots of migrations into the shard too: the joiner may be in sync
  // before the flip, and then nothing copies them to it again. A migration
  // that starts after this map sends all it imports to the joiner (it is
  // syncing in every map from BeginSync's on).
  const SlotSet slots = ReplicaSlots(*map, *shard);
  if (request->held_slots_size() != request->held_digests_size()) {
    return ToGrpcStatus(absl::InvalidArgumentError("held_slots and held_digests differ in length"));
  }
  // Delta resync: digests taken now, after BeginSync, so every write the
  // joiner is not sent is already in them, and a slot found equal is equal
  // to what the joiner holds plus the writes it is sent.
  SlotSet resync = slots;
  if (request->held_slots_size() > 0) {
    absl::flat_hash_map<uint32_t, uint64_t> theirs;
    for (int i = 0; i < request->held_slots_size(); ++i) {
      theirs[request->held_slots(i)] = request->held_digests(i);
    }
    resync = DifferingSlots(*deps_.store, slots, theirs);
  }
  LOG(INFO) << "streaming shard " << shard->shard_id() << " (" << cluster::FormatSlotRanges(*shard)
            << ", " << slots.count() << " slots with those it imports) to " << request->node_id()
            << ": " << resync.count() << " slot(s) differ, " << slots.count() - resync.count()
            << " equal";
  v1::SyncShardChunk first;
  first.set_slots_listed(true);
  AddRanges(resync, first.mutable_resync_slots());
  first.set_slots_equal(static_cast<uint32_t>(slots.count() - resync.count()));
  if (!writer->Write(first))
    return grpc::Status(grpc::StatusCode::CANCELLED, "the joiner went away");
  return ToGrpcStatus(StreamShard(context, resync, *seq, writer));
}

absl::Status ClusterService::StreamShard(grpc::ServerContext* context, const SlotSet& slots,
                                         uint64_t snapshot_seq,
                                         grpc::ServerWriter<v1::SyncShardChunk>* writer) {
  v1::SyncShardChunk chunk;
  uint64_t chunk_bytes = 0;
  auto flush = [&] {
    bool ok = writer->Write(chunk);
    chunk.Clear();
    chunk_bytes = 0;
    return ok ? absl::OkStatus() : absl::CancelledError("the joiner went away");
  };
  absl::Status s = ScanSlots(
      *deps_.store, *deps_.replicator, slots,
      [&](std::string entry) {
        if (chunk_bytes > 0 && chunk_bytes + entry.size() > deps_.sync_chunk_bytes) {
          if (absl::Status s = flush(); !s.ok()) return s;
        }
        chunk_bytes += entry.size();
        sync_entries_->Increment();
        sync_bytes_->Increment(entry.size());
        chunk.add_entries(std::move(entry));
        return absl::OkStatus();
      },
      [&] { return context->IsCancelled(); });
  if (!s.ok()) return s;
  chunk.set_done(true);
  chunk.set_snapshot_seq(snapshot_seq);
  return flush();
}

grpc::Status ClusterService::ReportInSync(grpc::ServerContext* context,
                                          const v1::ReportInSyncRequest* request,
                                          v1::ReportInSyncResponse* response) {
  return Serve(Admit(context, "ReportInSync", deps_.replicator, "no replicator"), response,
               [&]() -> absl::StatusOr<v1::ReportInSyncResponse> {
                 KV_RETURN_IF_ERROR(deps_.replicator->PromoteSyncing(
                     request->shard_id(), request->node_id(), request->incarnation(),
                     request->shard_epoch()));
                 v1::ReportInSyncResponse resp;
                 resp.set_map_epoch(deps_.state->map_epoch());
                 return resp;
               });
}

grpc::Status ClusterService::ImportWrite(grpc::ServerContext* context,
                                         const v1::ImportWriteRequest* request,
                                         v1::ImportWriteResponse* response) {
  return Serve(Admit(context, "ImportWrite", deps_.importer, "no slot importer"), response,
               [&] { return deps_.importer->ImportWrite(*request); });
}

grpc::Status ClusterService::BeginImport(grpc::ServerContext* context,
                                         const v1::BeginImportRequest* request,
                                         v1::BeginImportResponse* response) {
  return Serve(Admit(context, "BeginImport", deps_.importer, "no slot importer"), response,
               [&] { return deps_.importer->BeginImport(*request); });
}

grpc::Status ClusterService::ImportEntries(grpc::ServerContext* context,
                                           const v1::ImportEntriesRequest* request,
                                           v1::ImportEntriesResponse* response) {
  return Serve(Admit(context, "ImportEntries", deps_.importer, "no slot importer"), response,
               [&] { return deps_.importer->ImportEntries(*request); });
}

grpc::Status ClusterService::AcceptHandoff(grpc::ServerContext* context,
                                           const v1::AcceptHandoffRequest* request,
                                           v1::AcceptHandoffResponse* response) {
  return Serve(Admit(context, "AcceptHandoff", deps_.importer, "no slot importer"), response,
               [&] { return deps_.importer->AcceptHandoff(*request); });
}

grpc::Status ClusterService::Failover(grpc::ServerContext* context,
                                      const v1::FailoverRequest* request,
                                      v1::FailoverResponse* response) {
  return Serve(
      AdmitAdmin(context, "Failover", Wired(deps_.failover, "manual failover")), response, [&] {
        return WithMap<v1::FailoverResponse>(deps_.failover(*request, AdminCallOf(context)));
      });
}

grpc::Status ClusterService::RemoveNode(grpc::ServerContext* context,
                                        const v1::RemoveNodeRequest* request,
                                        v1::RemoveNodeResponse* response) {
  return Serve(
      AdmitAdmin(context, "RemoveNode", Wired(deps_.remove_node, "remove-node")), response, [&] {
        return WithMap<v1::RemoveNodeResponse>(deps_.remove_node(*request, AdminCallOf(context)));
      });
}

grpc::Status ClusterService::AddNode(grpc::ServerContext* context,
                                     const v1::AddNodeRequest* request,
                                     v1::AddNodeResponse* response) {
  return Serve(AdmitAdmin(context, "AddNode", Wired(deps_.add_node, "add-node")), response,
               [&] { return deps_.add_node(*request, AdminCallOf(context)); });
}

grpc::Status ClusterService::Rebalance(grpc::ServerContext* context,
                                       const v1::RebalanceRequest* request,
                                       v1::RebalanceResponse* response) {
  return Serve(AdmitAdmin(context, "Rebalance", Wired(deps_.rebalance, "rebalance")), response,
               [&] { return deps_.rebalance(*request, AdminCallOf(context)); });
}

grpc::Status ClusterService::AcceptLoss(grpc::ServerContext* context,
                                        const v1::AcceptLossRequest* request,
                                        v1::AcceptLossResponse* response) {
  return Serve(AdmitAdmin(context, "AcceptLoss", Wired(deps_.accept_loss, "accept-loss")), response,
               [&] { return deps_.accept_loss(*request, AdminCallOf(context)); });
}

}  // namespace server
}  // namespace kvstore
