// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/cluster_admin.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "proto/kv_cluster.grpc.pb.h"

namespace kvstore {
namespace jepsen {

template <typename Call>
absl::Status ClusterAdmin::OnAnyNode(const char* what, const Call& call) {
  absl::Status last = absl::UnavailableError("no node running");
  for (int i = 0; i < cluster_->size(); ++i) {
    if (!cluster_->Running(i)) continue;
    auto stub = v1::KvCluster::NewStub(grpc::CreateChannel(cluster_->node(i)->control_address(),
                                                           grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status s = call(*stub, &ctx);
    if (s.ok()) return absl::OkStatus();
    last = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat(what, " via n", i + 1, ": ", s.error_message()));
    // A refusal is the controller's answer; another node would forward the
    // same request to the same controller.
    if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
        s.error_code() == grpc::StatusCode::NOT_FOUND) {
      return last;
    }
  }
  return last;
}

absl::Status ClusterAdmin::Failover(uint32_t shard) {
  v1::FailoverRequest req;
  req.set_shard_id(shard);
  v1::FailoverResponse resp;
  return OnAnyNode("failover", [&](v1::KvCluster::Stub& stub, grpc::ClientContext* ctx) {
    return stub.Failover(ctx, req, &resp);
  });
}

absl::StatusOr<uint32_t> ClusterAdmin::AddNode(const std::string& node_id) {
  v1::AddNodeRequest req;
  req.set_node_id(node_id);
  v1::AddNodeResponse resp;
  absl::Status s = OnAnyNode("add-node", [&](v1::KvCluster::Stub& stub, grpc::ClientContext* ctx) {
    return stub.AddNode(ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return resp.shard_id();
}

absl::StatusOr<int> ClusterAdmin::Rebalance() {
  v1::RebalanceRequest req;
  v1::RebalanceResponse resp;
  absl::Status s = OnAnyNode("rebalance", [&](v1::KvCluster::Stub& stub, grpc::ClientContext* ctx) {
    return stub.Rebalance(ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return resp.planned_size();
}

absl::Status ClusterAdmin::RemoveNode(const std::string& node_id) {
  v1::RemoveNodeRequest req;
  req.set_node_id(node_id);
  v1::RemoveNodeResponse resp;
  return OnAnyNode("remove-node", [&](v1::KvCluster::Stub& stub, grpc::ClientContext* ctx) {
    return stub.RemoveNode(ctx, req, &resp);
  });
}

}  // namespace jepsen
}  // namespace kvstore
