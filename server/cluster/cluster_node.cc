// Copyright 2026 The kvstore Authors.

#include "server/cluster/cluster_node.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Start(const ClusterOptions& options,
                                                                ClusterNodeDeps deps) {
  KV_RETURN_IF_ERROR(options.Validate());
  if (!options.enabled()) return absl::InvalidArgumentError("cluster mode needs --etcd");
  if (deps.state == nullptr || deps.fence == nullptr || deps.self.node_id().empty()) {
    return absl::InvalidArgumentError(
        "ClusterNode needs a ClusterState, a FencePage and a node id");
  }
  std::unique_ptr<ClusterNode> node(new ClusterNode(options));

  etcd::EtcdOptions eo;
  eo.endpoints = options.etcd_endpoints;
  // A call must not outlast the time the lease leaves us: a keepalive stuck
  // for longer would see the deadline pass while it waits.
  eo.rpc_timeout = std::min(absl::Seconds(2), options.member_ttl / 3);
  absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> client = etcd::EtcdClient::Connect(eo);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("--etcd=", absl::StrJoin(options.etcd_endpoints, ","), ": ",
                                     client.status().message()));
  }
  node->etcd_ = *std::move(client);

  MembershipOptions mo;
  mo.cluster_name = options.cluster_name;
  mo.self = deps.self;
  mo.ttl = options.member_ttl;
  mo.fence_margin = options.fence_margin;
  mo.on_fence = std::move(deps.on_fence);
  mo.on_lease_lost = std::move(deps.on_lease_lost);
  KV_ASSIGN_OR_RETURN(node->membership_,
                      Membership::Start(node->etcd_.get(), deps.state, deps.fence, std::move(mo)));

  MapStoreOptions so;
  so.cluster_name = options.cluster_name;
  so.node_id = deps.self.node_id();
  so.lease = node->membership_->lease();
  node->map_store_ = std::make_unique<MapStore>(node->etcd_.get(), deps.state, std::move(so));

  // CONTROLLER: the controller (server/cluster/controller.h, election, first
  // map, failover, placement) is started here, given etcd_, deps.state,
  // map_store_, options.replicas and options.min_nodes(), and stopped first
  // in Shutdown(). Not wired yet: until then another process must write the
  // first map (architecture §19.2).
  return node;
}

ClusterNode::~ClusterNode() { Shutdown(); }

void ClusterNode::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // CONTROLLER: stop it here, before the lease goes.
  if (membership_) membership_->Shutdown();
}

}  // namespace server
}  // namespace kvstore
