// Copyright 2026 The kvstore Authors.

#include "server/cluster/controller_proxy.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvstore {
namespace server {

absl::StatusOr<Controller*> ControllerProxy::Local() const {
  Controller* controller = controller_.load(std::memory_order_acquire);
  if (controller == nullptr) {
    return absl::UnavailableError("the cluster plane is not running on this node");
  }
  return controller;
}

absl::StatusOr<v1::ClusterNode> ControllerProxy::Leader(const Controller& controller,
                                                        const char* what) const {
  const std::string leader = controller.ControllerId();
  std::shared_ptr<const cluster::ClusterMapView> map = state_->map();
  const v1::ClusterNode* node = map != nullptr ? map->Node(leader) : nullptr;
  if (leader.empty() || node == nullptr) {
    return absl::UnavailableError(absl::StrCat("no controller to forward the ", what,
                                               " to (controller \"", leader,
                                               "\" is not in the map this node holds); retry"));
  }
  return *node;  // a copy: the map may be replaced meanwhile
}

absl::StatusOr<v1::ClusterMap> ControllerProxy::Failover(const v1::FailoverRequest& request,
                                                         const std::string& authorization) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader())
    return controller->Failover(request.shard_id(), request.target_node());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "failover"));
  KV_ASSIGN_OR_RETURN(v1::FailoverResponse response,
                      peers_->Failover(leader, request, peers_->DefaultDeadline(), authorization));
  return std::move(*response.mutable_map());
}

absl::StatusOr<v1::ClusterMap> ControllerProxy::RemoveNode(const v1::RemoveNodeRequest& request,
                                                           const std::string& authorization) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader()) return controller->RemoveNode(request.node_id());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "remove-node"));
  KV_ASSIGN_OR_RETURN(
      v1::RemoveNodeResponse response,
      peers_->RemoveNode(leader, request, peers_->DefaultDeadline(), authorization));
  return std::move(*response.mutable_map());
}

absl::StatusOr<v1::AddNodeResponse> ControllerProxy::AddNode(const v1::AddNodeRequest& request,
                                                             const std::string& authorization) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader()) return controller->AddNode(request.node_id());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "add-node"));
  return peers_->AddNode(leader, request, peers_->DefaultDeadline(), authorization);
}

absl::StatusOr<v1::RebalanceResponse> ControllerProxy::Rebalance(
    const v1::RebalanceRequest& request, const std::string& authorization) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader()) return controller->Rebalance(request.dry_run());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "rebalance"));
  return peers_->Rebalance(leader, request, peers_->DefaultDeadline(), authorization);
}

absl::StatusOr<v1::AcceptLossResponse> ControllerProxy::AcceptLoss(
    const v1::AcceptLossRequest& request, const std::string& authorization) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader()) return controller->AcceptLoss(request.shard_id());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "accept-loss"));
  return peers_->AcceptLoss(leader, request, peers_->DefaultDeadline(), authorization);
}

}  // namespace server
}  // namespace kvstore
