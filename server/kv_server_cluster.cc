// Copyright 2026 The kvstore Authors.
//
// KvServer's cluster mode (architecture §19): the cluster state, the
// replicator as the store's write hook, the replica installer, the slot
// importer and migration driver (§19.9), the KvCluster service and the
// ClusterNode on etcd, and manual failover. Split from kv_server.cc, which wires the single-node
// server, because cluster mode changes for its own reasons.

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "server/cluster/cluster_node.h"
#include "server/cluster/cluster_service.h"
#include "server/cluster/membership/shard_map_editor.h"
#include "server/cluster/migration/migration_driver.h"
#include "server/cluster/migration/slot_importer.h"
#include "server/cluster/migration/slot_janitor.h"
#include "server/cluster/replication/rdma_replica_links.h"
#include "server/cluster/replication/replica_installer.h"
#include "server/cluster/replication/replicator.h"
#include "server/cluster/replication/shard_seqs.h"
#include "server/control/control_service.h"
#include "server/kv_server.h"

namespace kvstore {
namespace server {

absl::Status KvServer::PrepareCluster() {
  if (!options_.cluster.enabled()) return absl::OkStatus();
  KV_RETURN_IF_ERROR(options_.cluster.Validate());
  if (!options_.tls_cert_file.empty()) {
    // Servers replicate and fail over over plaintext gRPC between
    // themselves; a TLS control port would suggest a protection the
    // cluster traffic does not have (docs/security.md).
    return absl::InvalidArgumentError(
        "cluster mode does not support --tls_cert yet: servers talk to each other over "
        "plaintext gRPC (use --auth_token_file; see docs/security.md)");
  }
  node_id_ = options_.cluster.node_id;
  if (node_id_.empty()) {
    // The node id must survive a restart (the map names it); a picked port
    // would not.
    if (options_.control_port == 0) {
      return absl::InvalidArgumentError(
          "--control_port=0 in cluster mode needs --node_id: the default node id is "
          "<advertise_host>:<control_port>, and a picked port changes on every start");
    }
    node_id_ = absl::StrCat(AdvertiseHost(options_.cluster, options_.listen_address), ":",
                            options_.control_port);
  }
  cluster_state_ = std::make_unique<ClusterState>(node_id_);
  // The replicator is the store's write hook, so it exists before the
  // store; its map editor is the etcd map store, which starts only after the
  // listeners are bound (StartCluster), hence the forwarding editor.
  seqs_ = std::make_unique<ShardSeqs>();
  editor_ = std::make_unique<ForwardingShardMapEditor>();
  ReplicatorOptions ro;
  ro.replication_timeout = options_.cluster.replication_timeout;
  ro.auth_token = options_.auth_token;
  ro.lease_ttl = options_.cluster.member_ttl;
  replicator_ = std::make_unique<Replicator>(cluster_state_.get(), editor_.get(), seqs_.get(),
                                             &registry_, ro);
  // Readers refuse this server's data until its lease is proven.
  fence_page_->Fence();
  return absl::OkStatus();
}

absl::Status KvServer::StartCluster() {
  if (cluster_state_ == nullptr) return absl::OkStatus();
  const std::string host = AdvertiseHost(options_.cluster, options_.listen_address);
  ClusterNodeDeps deps;
  deps.state = cluster_state_.get();
  deps.fence = fence_page_.get();
  deps.self.set_node_id(node_id_);
  deps.self.set_control_address(absl::StrCat(host, ":", control_port_));
  deps.self.set_resp_address(absl::StrCat(host, ":", resp_->port()));
  if (http_ != nullptr) deps.self.set_metrics_address(absl::StrCat(host, ":", http_->port()));
  // A fenced node also cuts its RDMA clients off: their queue pairs go to
  // the error state, so even a READ posted before the fence page was read
  // fails (architecture §19.5).
  deps.on_fence = [this] {
    if (rdma_ != nullptr) rdma_->FenceAll();
  };
  deps.on_unfence = [this] {
    if (rdma_ != nullptr) rdma_->Unfence();
  };
  deps.on_lease_lost = options_.on_lease_lost;
  deps.auth_token = options_.auth_token;
  // The slot janitor (§19.9 clean-up) listens to every map from the first
  // one on, so it starts before the ClusterNode installs any; ~KvServer
  // stops it before the store goes.
  SlotJanitorOptions jo;
  jo.registry = &registry_;
  janitor_ = std::make_unique<SlotJanitor>(store_.get(), cluster_state_.get(), jo);
  // With a device, writes reach backups that have one too by RDMA WRITE +
  // replica commit (architecture §19.3); before any role is taken.
  if (rdma_ != nullptr && options_.cluster.replication_rdma) {
    RdmaReplicaLinksOptions lo;
    lo.device = device_->name();
    lo.auth_token = options_.auth_token;
    lo.self = node_id_;
    replica_links_ = std::make_unique<RdmaReplicaLinks>(lo, &registry_);
    replicator_->set_rdma_links(replica_links_.get());
  }
  KV_ASSIGN_OR_RETURN(cluster_, ClusterNode::Start(options_.cluster, std::move(deps)));
  editor_->Set(cluster_->map_store());
  return absl::OkStatus();
}

void KvServer::BuildClusterService() {
  ClusterServiceDeps deps;
  deps.auth_token = options_.auth_token;
  deps.registry = &registry_;
  if (cluster_state_ != nullptr) {
    ReplicaInstallerOptions io;
    io.auth_token = options_.auth_token;
    installer_ = std::make_unique<ReplicaInstaller>(store_.get(), cluster_state_.get(), seqs_.get(),
                                                    &registry_, io);
    // Replica commits from primaries' RDMA links land in the installer.
    // With R=1 no write waits for a backup: client commits stay on the poller.
    if (rdma_ != nullptr) {
      rdma_->set_replica_sink(installer_.get(), options_.cluster.replicas > 1);
    }
    deps.state = cluster_state_.get();
    deps.store = store_.get();
    deps.replicator = replicator_.get();
    deps.installer = installer_.get();
    importer_ = std::make_unique<SlotImporter>(store_.get(), cluster_state_.get(),
                                               replicator_.get(), &registry_);
    deps.importer = importer_.get();
    // Before the first map (StartCluster): the driver listens for maps.
    MigrationDriverOptions mo;
    mo.auth_token = options_.auth_token;
    migration_driver_ = std::make_unique<MigrationDriver>(
        store_.get(), cluster_state_.get(), replicator_.get(), editor_.get(), &registry_, mo);
    deps.failover = [this](const v1::FailoverRequest& request) { return Failover(request); };
    deps.remove_node = [this](const v1::RemoveNodeRequest& request) { return RemoveNode(request); };
    deps.add_node = [this](const v1::AddNodeRequest& request) { return AddNode(request); };
    deps.rebalance = [this](const v1::RebalanceRequest& request) { return Rebalance(request); };
  }
  cluster_service_ = std::make_unique<ClusterService>(std::move(deps));
}

namespace {

// Forwards a controller request to the elected controller, found by its
// node id in the map this node holds. `call` makes the RPC on the stub and
// fills an `Out` (the map, or a whole response).
template <typename Out = v1::ClusterMap, typename Call>
absl::StatusOr<Out> ForwardToController(Controller* controller, const ClusterState& state,
                                        const std::string& auth_token, const char* what,
                                        Call call) {
  const std::string leader = controller->ControllerId();
  std::shared_ptr<const cluster::ClusterMapView> map = state.map();
  const v1::ClusterNode* node = map != nullptr ? map->Node(leader) : nullptr;
  if (leader.empty() || node == nullptr) {
    return absl::UnavailableError(absl::StrCat("no controller to forward the ", what,
                                               " to (controller \"", leader,
                                               "\" is not in the map this node holds); retry"));
  }
  auto stub = v1::KvCluster::NewStub(
      grpc::CreateChannel(node->control_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!auth_token.empty()) {
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", auth_token));
  }
  Out out;
  grpc::Status status = call(stub.get(), &ctx, &out);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("controller ", leader, " at ", node->control_address(), ": ",
                                     status.error_message()));
  }
  return out;
}

}  // namespace

absl::StatusOr<v1::ClusterMap> KvServer::Failover(const v1::FailoverRequest& request) {
  // cluster_ lives until gRPC has stopped (Shutdown()), so it is safe to
  // read from a call.
  if (cluster_ == nullptr || cluster_->controller() == nullptr) {
    return absl::UnavailableError("the cluster plane is not running on this node");
  }
  Controller* controller = cluster_->controller();
  if (controller->IsLeader()) {
    return controller->Failover(request.shard_id(), request.target_node());
  }
  return ForwardToController(
      controller, *cluster_state_, options_.auth_token, "failover",
      [&](v1::KvCluster::Stub* stub, grpc::ClientContext* ctx, v1::ClusterMap* out) {
        v1::FailoverResponse response;
        grpc::Status status = stub->Failover(ctx, request, &response);
        *out = response.map();
        return status;
      });
}

absl::StatusOr<v1::ClusterMap> KvServer::RemoveNode(const v1::RemoveNodeRequest& request) {
  if (cluster_ == nullptr || cluster_->controller() == nullptr) {
    return absl::UnavailableError("the cluster plane is not running on this node");
  }
  Controller* controller = cluster_->controller();
  if (controller->IsLeader()) return controller->RemoveNode(request.node_id());
  return ForwardToController(
      controller, *cluster_state_, options_.auth_token, "remove-node",
      [&](v1::KvCluster::Stub* stub, grpc::ClientContext* ctx, v1::ClusterMap* out) {
        v1::RemoveNodeResponse response;
        grpc::Status status = stub->RemoveNode(ctx, request, &response);
        *out = response.map();
        return status;
      });
}

absl::StatusOr<v1::AddNodeResponse> KvServer::AddNode(const v1::AddNodeRequest& request) {
  if (cluster_ == nullptr || cluster_->controller() == nullptr) {
    return absl::UnavailableError("the cluster plane is not running on this node");
  }
  Controller* controller = cluster_->controller();
  if (controller->IsLeader()) return controller->AddNode(request.node_id());
  return ForwardToController<v1::AddNodeResponse>(
      controller, *cluster_state_, options_.auth_token, "add-node",
      [&](v1::KvCluster::Stub* stub, grpc::ClientContext* ctx, v1::AddNodeResponse* out) {
        return stub->AddNode(ctx, request, out);
      });
}

absl::StatusOr<v1::RebalanceResponse> KvServer::Rebalance(const v1::RebalanceRequest& request) {
  if (cluster_ == nullptr || cluster_->controller() == nullptr) {
    return absl::UnavailableError("the cluster plane is not running on this node");
  }
  Controller* controller = cluster_->controller();
  if (controller->IsLeader()) return controller->Rebalance(request.dry_run());
  return ForwardToController<v1::RebalanceResponse>(
      controller, *cluster_state_, options_.auth_token, "rebalance",
      [&](v1::KvCluster::Stub* stub, grpc::ClientContext* ctx, v1::RebalanceResponse* out) {
        return stub->Rebalance(ctx, request, out);
      });
}

}  // namespace server
}  // namespace kvstore
