// Copyright 2026 The kvstore Authors.

#include "server/cluster/cluster_service.h"

#include <bitset>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster/slots.h"
#include "common/grpc_status.h"
#include "glog/logging.h"

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
  std::bitset<cluster::kSlotCount> slots;
  for (const v1::SlotRange& r : shard.slots()) {
    for (uint32_t s = r.start(); s <= r.end() && s < cluster::kSlotCount; ++s) slots.set(s);
  }
  v1::SyncShardChunk chunk;
  uint64_t chunk_bytes = 0;
  auto flush = [&] {
    bool ok = writer->Write(chunk);
    chunk.Clear();
    chunk_bytes = 0;
    return ok ? absl::OkStatus() : absl::CancelledError("the joiner went away");
  };
  std::vector<std::string> keys;
  uint64_t cursor = 0;
  do {
    if (context->IsCancelled()) return absl::CancelledError("the joiner cancelled the copy");
    keys.clear();
    cursor = deps_.store->Scan(cursor, 256, "", &keys);
    for (const std::string& key : keys) {
      if (!slots.test(cluster::KeySlot(key))) continue;
      absl::StatusOr<std::string> entry;
      {
        // Never between a write's forward and its publish: a write the
        // joiner received is either in the copy or newer than it.
        absl::MutexLock stripe(&deps_.replicator->StripeOf(key));
        entry = deps_.store->CopyEntry(key);
      }
      if (absl::IsNotFound(entry.status())) continue;  // deleted meanwhile
      if (!entry.ok()) {
        // Only an entry its lease holder overwrote after the commit fails
        // its check under the stripe lock; readers get kDataLoss for it too.
        LOG(WARNING) << "not streaming a " << key.size() << "-byte key: " << entry.status();
        continue;
      }
      if (chunk_bytes > 0 && chunk_bytes + entry->size() > deps_.sync_chunk_bytes) {
        if (absl::Status s = flush(); !s.ok()) return s;
      }
      chunk_bytes += entry->size();
      sync_entries_->Increment();
      sync_bytes_->Increment(entry->size());
      chunk.add_entries(*std::move(entry));
    }
  } while (cursor != 0);
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
