// Copyright 2026 The kvstore Authors.

#include "server/cluster/cluster_service.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster/slots.h"
#include "common/grpc_status.h"
#include "glog/logging.h"
#include "server/cluster/migration/slot_scan.h"

namespace kvstore {
namespace server {

ClusterService::ClusterService(ClusterServiceDeps deps)
    : deps_(std::move(deps)), auth_(deps_.auth_token, deps_.registry) {
  sync_entries_ = deps_.registry->AddCounter("kvstore_sync_served_entries_total",
                                             "Entries this node streamed to joining replicas.");
  sync_bytes_ = deps_.registry->AddCounter("kvstore_sync_served_bytes_total",
                                           "Bytes of entries streamed to joining replicas.");
}

absl::Status ClusterService::Admit(const grpc::ServerContext* context) const {
  if (absl::Status s = auth_.Check(context); !s.ok()) return s;
  if (deps_.state == nullptr) {
    return absl::FailedPreconditionError("single-node mode: this server is not in a cluster");
  }
  return absl::OkStatus();
}

grpc::Status ClusterService::GetClusterMap(grpc::ServerContext* context,
                                           const v1::GetClusterMapRequest* /*request*/,
                                           v1::GetClusterMapResponse* response) {
  if (absl::Status s = Admit(context); !s.ok()) return ToGrpcStatus(s);
  auto map = deps_.state->map();
  if (map == nullptr) return ToGrpcStatus(absl::UnavailableError("no cluster map yet"));
  *response->mutable_map() = map->proto();
  response->set_node_id(deps_.state->self());
  return grpc::Status::OK;
}

grpc::Status ClusterService::Replicate(grpc::ServerContext* context,
                                       const v1::ReplicateRequest* request,
                                       v1::ReplicateResponse* response) {
  if (absl::Status s = Admit(context); !s.ok()) return ToGrpcStatus(s);
  if (deps_.installer == nullptr) return ToGrpcStatus(absl::UnimplementedError("no installer"));
  auto resp = deps_.installer->Replicate(*request);
  if (!resp.ok()) return ToGrpcStatus(resp.status());
  *response = *std::move(resp);
  return grpc::Status::OK;
}

grpc::Status ClusterService::ReplicaStatus(grpc::ServerContext* context,
                                           const v1::ReplicaStatusRequest* request,
                                           v1::ReplicaStatusResponse* response) {
  if (absl::Status s = Admit(context); !s.ok()) return ToGrpcStatus(s);
  if (deps_.installer == nullptr) return ToGrpcStatus(absl::UnimplementedError("no installer"));
  *response = deps_.installer->Status(request->shard_id());
  return grpc::Status::OK;
}

grpc::Status ClusterService::SyncShard(grpc::ServerContext* context,
                                       const v1::SyncShardRequest* request,
                                       grpc::ServerWriter<v1::SyncShardChunk>* writer) {
  if (absl::Status s = Admit(context); !s.ok()) return ToGrpcStatus(s);
  if (deps_.replicator == nullptr || deps_.store == nullptr) {
    return ToGrpcStatus(absl::UnimplementedError("no replicator"));
  }
  auto seq =
      deps_.replicator->BeginSync(request->shard_id(), request->node_id(), request->shard_epoch());
  if (!seq.ok()) return ToGrpcStatus(seq.status());
  // The map BeginSync checked (or a newer one) names the shard's slots.
  auto map = deps_.state->map();
  const v1::Shard* shard = map->ShardById(request->shard_id());
  if (shard == nullptr) return ToGrpcStatus(absl::FailedPreconditionError("shard vanished"));
  LOG(INFO) << "streaming shard " << shard->shard_id() << " (" << cluster::FormatSlotRanges(*shard)
            << ") to " << request->node_id();
  return ToGrpcStatus(StreamShard(context, *shard, *seq, writer));
}

absl::Status ClusterService::StreamShard(grpc::ServerContext* context, const v1::Shard& shard,
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
      *deps_.store, *deps_.replicator, SlotsOf(shard.slots()),
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
  if (absl::Status s = Admit(context); !s.ok()) return ToGrpcStatus(s);
  if (deps_.replicator == nullptr) return ToGrpcStatus(absl::UnimplementedError("no replicator"));
  absl::Status s = deps_.replicator->PromoteSyncing(request->shard_id(), request->node_id(),
                                                    request->incarnation());
  if (!s.ok()) return ToGrpcStatus(s);
  response->set_map_epoch(deps_.state->map_epoch());
  return grpc::Status::OK;
}

grpc::Status ClusterService::Failover(grpc::ServerContext* context,
                                      const v1::FailoverRequest* request,
                                      v1::FailoverResponse* response) {
  if (absl::Status s = Admit(context); !s.ok()) return ToGrpcStatus(s);
  if (!deps_.failover) {
    return ToGrpcStatus(absl::UnimplementedError("manual failover is not wired on this node"));
  }
  auto map = deps_.failover(*request);
  if (!map.ok()) return ToGrpcStatus(map.status());
  *response->mutable_map() = *std::move(map);
  return grpc::Status::OK;
}

grpc::Status ClusterService::RemoveNode(grpc::ServerContext* context,
                                        const v1::RemoveNodeRequest* request,
                                        v1::RemoveNodeResponse* response) {
  if (absl::Status s = Admit(context); !s.ok()) return ToGrpcStatus(s);
  if (!deps_.remove_node) {
    return ToGrpcStatus(absl::UnimplementedError("remove-node is not wired on this node"));
  }
  auto map = deps_.remove_node(*request);
  if (!map.ok()) return ToGrpcStatus(map.status());
  *response->mutable_map() = *std::move(map);
  return grpc::Status::OK;
}

absl::Status ClusterService::AdmitImport(const grpc::ServerContext* context) const {
  if (absl::Status s = Admit(context); !s.ok()) return s;
  if (deps_.importer == nullptr) return absl::UnimplementedError("no slot importer");
  return absl::OkStatus();
}

grpc::Status ClusterService::ImportWrite(grpc::ServerContext* context,
                                         const v1::ImportWriteRequest* request,
                                         v1::ImportWriteResponse* /*response*/) {
  if (absl::Status s = AdmitImport(context); !s.ok()) return ToGrpcStatus(s);
  return ToGrpcStatus(deps_.importer->ImportWrite(*request));
}

grpc::Status ClusterService::BeginImport(grpc::ServerContext* context,
                                         const v1::BeginImportRequest* request,
                                         v1::BeginImportResponse* response) {
  if (absl::Status s = AdmitImport(context); !s.ok()) return ToGrpcStatus(s);
  auto resp = deps_.importer->BeginImport(*request);
  if (!resp.ok()) return ToGrpcStatus(resp.status());
  *response = *std::move(resp);
  return grpc::Status::OK;
}

grpc::Status ClusterService::ImportEntries(grpc::ServerContext* context,
                                           const v1::ImportEntriesRequest* request,
                                           v1::ImportEntriesResponse* response) {
  if (absl::Status s = AdmitImport(context); !s.ok()) return ToGrpcStatus(s);
  auto resp = deps_.importer->ImportEntries(*request);
  if (!resp.ok()) return ToGrpcStatus(resp.status());
  *response = *std::move(resp);
  return grpc::Status::OK;
}

grpc::Status ClusterService::AcceptHandoff(grpc::ServerContext* context,
                                           const v1::AcceptHandoffRequest* request,
                                           v1::AcceptHandoffResponse* /*response*/) {
  if (absl::Status s = AdmitImport(context); !s.ok()) return ToGrpcStatus(s);
  return ToGrpcStatus(deps_.importer->AcceptHandoff(*request));
}

grpc::Status ClusterService::AddNode(grpc::ServerContext* context,
                                     const v1::AddNodeRequest* request,
                                     v1::AddNodeResponse* response) {
  if (absl::Status s = Admit(context); !s.ok()) return ToGrpcStatus(s);
  if (!deps_.add_node) {
    return ToGrpcStatus(absl::UnimplementedError("add-node is not wired on this node"));
  }
  auto answer = deps_.add_node(*request);
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  *response = *std::move(answer);
  return grpc::Status::OK;
}

grpc::Status ClusterService::Rebalance(grpc::ServerContext* context,
                                       const v1::RebalanceRequest* request,
                                       v1::RebalanceResponse* response) {
  if (absl::Status s = Admit(context); !s.ok()) return ToGrpcStatus(s);
  if (!deps_.rebalance) {
    return ToGrpcStatus(absl::UnimplementedError("rebalance is not wired on this node"));
  }
  auto answer = deps_.rebalance(*request);
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  *response = *std::move(answer);
  return grpc::Status::OK;
}

}  // namespace server
}  // namespace kvstore
