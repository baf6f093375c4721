// Copyright 2026 The kvstore Authors.

#include "client/internal/cluster/cluster_rpc.h"

#include <utility>

#include "common/auth/token.h"
#include "common/cluster/refusal.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace kvstore {
namespace client {

ClusterRpc::ClusterRpc(std::shared_ptr<grpc::Channel> channel, const std::string& auth_token)
    : stub_(v1::KvCluster::NewStub(std::move(channel))),
      bearer_(auth_token.empty() ? std::string() : auth::BearerHeader(auth_token)) {}

std::unique_ptr<grpc::ClientContext> ClusterRpc::NewContext(absl::Time deadline) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(deadline));
  if (!bearer_.empty()) ctx->AddMetadata("authorization", bearer_);
  return ctx;
}

absl::StatusOr<v1::GetClusterMapResponse> ClusterRpc::GetClusterMap(uint64_t known_epoch,
                                                                    absl::Time deadline) {
  v1::GetClusterMapRequest req;
  req.set_known_epoch(known_epoch);
  auto ctx = NewContext(deadline);
  v1::GetClusterMapResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->GetClusterMap(ctx.get(), req, &resp)));
  return resp;
}

absl::StatusOr<v1::ClusterMap> ClusterRpc::Failover(uint32_t shard_id,
                                                    const std::string& target_node,
                                                    absl::Time deadline) {
  v1::FailoverRequest req;
  req.set_shard_id(shard_id);
  req.set_target_node(target_node);
  auto ctx = NewContext(deadline);
  v1::FailoverResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Failover(ctx.get(), req, &resp)));
  return std::move(*resp.mutable_map());
}

absl::StatusOr<v1::ClusterMap> ClusterRpc::RemoveNode(const std::string& node_id,
                                                      absl::Time deadline) {
  v1::RemoveNodeRequest req;
  req.set_node_id(node_id);
  auto ctx = NewContext(deadline);
  v1::RemoveNodeResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->RemoveNode(ctx.get(), req, &resp)));
  return std::move(*resp.mutable_map());
}

absl::StatusOr<v1::AddNodeResponse> ClusterRpc::AddNode(const std::string& node_id,
                                                        absl::Time deadline) {
  v1::AddNodeRequest req;
  req.set_node_id(node_id);
  auto ctx = NewContext(deadline);
  v1::AddNodeResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->AddNode(ctx.get(), req, &resp)));
  return resp;
}

absl::StatusOr<v1::RebalanceResponse> ClusterRpc::Rebalance(bool dry_run, absl::Time deadline) {
  v1::RebalanceRequest req;
  req.set_dry_run(dry_run);
  auto ctx = NewContext(deadline);
  v1::RebalanceResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Rebalance(ctx.get(), req, &resp)));
  return resp;
}

absl::StatusOr<v1::AcceptLossResponse> ClusterRpc::AcceptLoss(uint32_t shard_id,
                                                              absl::Time deadline) {
  v1::AcceptLossRequest req;
  req.set_shard_id(shard_id);
  auto ctx = NewContext(deadline);
  v1::AcceptLossResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->AcceptLoss(ctx.get(), req, &resp)));
  return resp;
}

// The wording is the server's (proto/kv_cluster.proto): FAILED_PRECONDITION
// also means "stale shard epoch", which is not single-node mode.
bool IsSingleNodeAnswer(const absl::Status& status) {
  // UNIMPLEMENTED: a server built before cluster mode has no KvCluster service.
  if (absl::IsUnimplemented(status)) return true;
  return cluster::IsRefusal(status, cluster::RefusalKind::kNotClustered);
}

}  // namespace client
}  // namespace kvstore
