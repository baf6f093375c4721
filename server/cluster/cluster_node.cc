// Copyright 2026 The kvstore Authors.

#include "server/cluster/cluster_node.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {
namespace {

// Connect attempts at start-up, 500ms apart.
constexpr int kConnectAttempts = 4;

// Connects to options.etcd_endpoints, retrying for a few seconds.
absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> ConnectEtcd(const ClusterOptions& options) {
  etcd::EtcdOptions eo;
  eo.endpoints = options.etcd_endpoints;
  // The client's default rpc_timeout (2s) even with a short TTL: the
  // watchdog fences at the deadline whatever a keepalive is waiting for, and
  // with call deadlines of a few hundred ms gRPC was seen not to reconnect
  // to a restarted etcd.
  // etcd may be starting with us (compose, a reboot): try for a few
  // seconds before giving up.
  absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> client = etcd::EtcdClient::Connect(eo);
  for (int attempt = 1;
       !client.ok() && absl::IsUnavailable(client.status()) && attempt < kConnectAttempts;
       ++attempt) {
    LOG(WARNING) << "cluster: etcd not reachable yet (" << client.status() << "), retrying";
    absl::SleepFor(absl::Milliseconds(500));
    client = etcd::EtcdClient::Connect(eo);
  }
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("--etcd=", absl::StrJoin(options.etcd_endpoints, ","), ": ",
                                     client.status().message()));
  }
  return client;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Start(const ClusterOptions& options,
                                                                ClusterNodeDeps deps) {
  KV_RETURN_IF_ERROR(options.Validate());
  if (!options.enabled()) return absl::InvalidArgumentError("cluster mode needs --etcd");
  if (deps.state == nullptr || deps.fence == nullptr || deps.self.node_id().empty()) {
    return absl::InvalidArgumentError(
        "ClusterNode needs a ClusterState, a FencePage and a node id");
  }
  std::unique_ptr<ClusterNode> node(new ClusterNode(options));

  if (deps.etcd != nullptr) {
    node->etcd_ = std::move(deps.etcd);
  } else {
    KV_ASSIGN_OR_RETURN(node->etcd_, ConnectEtcd(options));
  }

  MembershipOptions mo;
  mo.cluster_name = options.cluster_name;
  mo.self = deps.self;
  mo.ttl = options.member_ttl;
  mo.fence_margin = options.fence_margin;
  mo.on_fence = std::move(deps.on_fence);
  mo.on_unfence = std::move(deps.on_unfence);
  mo.on_lease_lost = std::move(deps.on_lease_lost);
  mo.clock = deps.clock;
  KV_ASSIGN_OR_RETURN(node->membership_,
                      Membership::Start(node->etcd_.get(), deps.state, deps.fence, std::move(mo)));

  MapStoreOptions so;
  so.cluster_name = options.cluster_name;
  so.node_id = deps.self.node_id();
  so.lease = node->membership_->lease();
  node->map_store_ = std::make_unique<MapStore>(node->etcd_.get(), deps.state, std::move(so));

  // Every node campaigns; the controller key lives under this node's lease,
  // so the role dies with the node.
  ControllerOptions co;
  co.cluster_name = options.cluster_name;
  co.node_id = deps.self.node_id();
  co.lease = node->membership_->lease();
  co.replicas = options.replicas;
  co.min_nodes = options.min_nodes();
  co.member_ttl = options.member_ttl;
  GrpcAppliedSeqOptions ao;
  ao.peers = deps.peers;
  co.map_epoch = MakeGrpcMapEpochFn(ao);
  co.clock = deps.clock;
  node->controller_ =
      std::make_unique<Controller>(node->etcd_.get(), std::move(co), MakeGrpcAppliedSeqFn(ao));
  node->controller_->Start();
  return node;
}

ClusterNode::~ClusterNode() { Shutdown(); }

void ClusterNode::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // The controller resigns first (its key is deleted, another node takes
  // over at once), then the member lease goes.
  if (controller_) controller_->Stop();
  if (membership_) membership_->Shutdown();
}

}  // namespace server
}  // namespace kvstore
