// Copyright 2026 The kvstore Authors.
//
// ControllerProxy: the admin requests any node takes on its KvCluster
// service (kvctl cluster failover / remove-node / add-node / rebalance /
// accept-loss,
// architecture §19.4, §19.9). When this node is the elected controller it
// answers them itself; otherwise it forwards them to the controller, found
// by its node id in the map this node holds, through the PeerClient (its
// channels and errors; the operator's credential, not the cluster secret), with the operator's
// deadline capped at the peer client's default. A request that was itself
// forwarded is never forwarded again (AdminCall::forwarded).
//
// Errors: kUnavailable "the cluster plane is not running on this node"
// before set_controller() (or after set_controller(nullptr)); kUnavailable
// naming the controller when the map this node holds does not list it (an
// election under way: retry); kUnavailable "forwarded ... this node is not
// the controller" when a forwarded request reaches a node that does not
// lead (the nodes disagree on who does: retry); otherwise the controller's answer (its own
// errors, as Controller documents them, or the peer client's), the message
// naming the controller it went to.
//
// Thread safety: thread-safe; the gRPC service calls it from many threads.

#ifndef KVSTORE_SERVER_CLUSTER_CONTROLLER_PROXY_H_
#define KVSTORE_SERVER_CLUSTER_CONTROLLER_PROXY_H_

#include <atomic>
#include <string>

#include "absl/status/statusor.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/controller/controller.h"
#include "server/cluster/peer/peer_client.h"
#include "server/routing/cluster_state.h"

namespace kvstore {
namespace server {

class ControllerProxy {
 public:
  // Not owned; both outlive the proxy.
  ControllerProxy(const ClusterState* state, PeerClient* peers) : state_(state), peers_(peers) {}
  ControllerProxy(const ControllerProxy&) = delete;
  ControllerProxy& operator=(const ControllerProxy&) = delete;

  // This node's controller (the ClusterNode's, once it started); null
  // stops answering. The controller must outlive every call in flight when
  // it is unset (the server unsets it only after gRPC stopped).
  void set_controller(Controller* controller) {
    controller_.store(controller, std::memory_order_release);
  }

  // `call`: the operator's credential and deadline, which a forward
  // carries to the controller (it checks the operator itself; the cluster
  // secret would make every peer an admin), and whether it was forwarded
  // already.
  absl::StatusOr<v1::ClusterMap> Failover(const v1::FailoverRequest& request,
                                          const AdminCall& call);
  absl::StatusOr<v1::ClusterMap> RemoveNode(const v1::RemoveNodeRequest& request,
                                            const AdminCall& call);
  absl::StatusOr<v1::AddNodeResponse> AddNode(const v1::AddNodeRequest& request,
                                              const AdminCall& call);
  absl::StatusOr<v1::RebalanceResponse> Rebalance(const v1::RebalanceRequest& request,
                                                  const AdminCall& call);
  absl::StatusOr<v1::AcceptLossResponse> AcceptLoss(const v1::AcceptLossRequest& request,
                                                    const AdminCall& call);

 private:
  // The local controller, or kUnavailable when the plane is not running.
  absl::StatusOr<Controller*> Local() const;
  // The elected controller's node in the map this node holds, or
  // kUnavailable naming `what` could not be forwarded.
  absl::StatusOr<v1::ClusterNode> Leader(const Controller& controller, const char* what,
                                         const AdminCall& call) const;
  // The forward's deadline: the operator's, at most the default.
  absl::Time Deadline(const AdminCall& call) const;

  const ClusterState* const state_;
  PeerClient* const peers_;
  std::atomic<Controller*> controller_{nullptr};
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_CONTROLLER_PROXY_H_
