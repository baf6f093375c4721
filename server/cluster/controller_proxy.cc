// Copyright 2026 The kvstore Authors.

#include "server/cluster/controller_proxy.h"

#include <algorithm>
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
                                                        const char* what,
                                                        const AdminCall& call) const {
  const std::string leader = controller.ControllerId();
  if (call.forwarded) {
    return absl::UnavailableError(absl::StrCat(
        "the ", what,
        " was forwarded to this node as the controller, but it is not "
        "the controller (it believes \"",
        leader, "\" is): the nodes disagree on who leads, as during an election; retry"));
  }
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
                                                         const AdminCall& call) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader())
    return controller->Failover(request.shard_id(), request.target_node());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "failover", call));
  KV_ASSIGN_OR_RETURN(v1::FailoverResponse response,
                      peers_->Failover(leader, request, Deadline(call), call.authorization));
  return std::move(*response.mutable_map());
}

absl::StatusOr<v1::ClusterMap> ControllerProxy::RemoveNode(const v1::RemoveNodeRequest& request,
                                                           const AdminCall& call) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader()) return controller->RemoveNode(request.node_id());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "remove-node", call));
  KV_ASSIGN_OR_RETURN(v1::RemoveNodeResponse response,
                      peers_->RemoveNode(leader, request, Deadline(call), call.authorization));
  return std::move(*response.mutable_map());
}

absl::StatusOr<v1::AddNodeResponse> ControllerProxy::AddNode(const v1::AddNodeRequest& request,
                                                             const AdminCall& call) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader()) return controller->AddNode(request.node_id());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "add-node", call));
  return peers_->AddNode(leader, request, Deadline(call), call.authorization);
}

absl::StatusOr<v1::RebalanceResponse> ControllerProxy::Rebalance(
    const v1::RebalanceRequest& request, const AdminCall& call) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader()) return controller->Rebalance(request.dry_run());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "rebalance", call));
  return peers_->Rebalance(leader, request, Deadline(call), call.authorization);
}

absl::StatusOr<v1::AcceptLossResponse> ControllerProxy::AcceptLoss(
    const v1::AcceptLossRequest& request, const AdminCall& call) {
  KV_ASSIGN_OR_RETURN(Controller * controller, Local());
  if (controller->IsLeader()) return controller->AcceptLoss(request.shard_id());
  KV_ASSIGN_OR_RETURN(v1::ClusterNode leader, Leader(*controller, "accept-loss", call));
  return peers_->AcceptLoss(leader, request, Deadline(call), call.authorization);
}

absl::Time ControllerProxy::Deadline(const AdminCall& call) const {
  return std::min(call.deadline, peers_->DefaultDeadline());
}

}  // namespace server
}  // namespace kvstore
