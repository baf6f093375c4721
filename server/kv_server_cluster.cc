// Copyright 2026 The kvstore Authors.
//
// KvServer's cluster mode (architecture §19), wiring only: the cluster
// state, the peer client every server-to-server call goes through, the
// replicator as the store's write hook, the replica installer, the slot
// importer and migration driver (§19.9), the KvCluster service with its
// controller proxy (the admin requests), and the ClusterNode on etcd.
// Split from kv_server.cc, which wires the single-node server, because
// cluster mode changes for its own reasons.

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tls/grpc_tls.h"
#include "glog/logging.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "server/cluster/cluster_node.h"
#include "server/cluster/cluster_service.h"
#include "server/cluster/controller_proxy.h"
#include "server/cluster/membership/shard_map_editor.h"
#include "server/cluster/migration/migration_driver.h"
#include "server/cluster/migration/slot_importer.h"
#include "server/cluster/migration/slot_janitor.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/peer/peer_listener.h"
#include "server/cluster/replication/held_copies.h"
#include "server/cluster/replication/rdma_replica_links.h"
#include "server/cluster/replication/replica_installer.h"
#include "server/cluster/replication/replica_socket.h"
#include "server/cluster/replication/replicator.h"
#include "server/cluster/replication/shard_reconciler.h"
#include "server/cluster/replication/shard_seqs.h"
#include "server/control/control_service.h"
#include "server/kv_server.h"

namespace kvstore {
namespace server {

absl::Status KvServer::PrepareCluster() {
  if (!options_.cluster.enabled()) return absl::OkStatus();
  KV_RETURN_IF_ERROR(options_.cluster.Validate());
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
  if (options_.cluster_secret.empty()) {
    // Peers recognise each other by it alone: with the data token instead,
    // every data client would be a peer.
    return absl::InvalidArgumentError(
        "cluster mode needs --cluster_secret_file: the secret the cluster's kvservers present "
        "to each other (the same file on every node, never given to clients; e.g. `umask 077; "
        "openssl rand -hex 32 > cluster.secret`; docs/security.md)");
  }
  cluster_state_ = std::make_unique<ClusterState>(node_id_);
  // The replicator is the store's write hook, so it exists before the
  // store; its map editor is the etcd map store, which starts only after the
  // listeners are bound (StartCluster), hence the forwarding editor.
  seqs_ = std::make_unique<ShardSeqs>();
  editor_ = std::make_unique<ForwardingShardMapEditor>();
  // Every call this server makes to another one goes through it: over TLS
  // when this node serves TLS (every node of a cluster does or none does),
  // verifying the peer against the cluster CA and presenting this node's
  // certificate, so peers that ask for client certificates accept it. The
  // bearer token is the cluster secret, never the data token.
  PeerClientOptions po;
  po.peer_secret = options_.cluster_secret;
  KV_ASSIGN_OR_RETURN(po.credentials, PeerCredentials());
  peers_ = std::make_unique<PeerClient>(po);
  ReplicatorOptions ro;
  ro.replication_timeout = options_.cluster.replication_timeout;
  ro.lease_ttl = options_.cluster.member_ttl;
  ro.min_insync_replicas = options_.cluster.min_insync();
  replicator_ = std::make_unique<Replicator>(cluster_state_.get(), editor_.get(), seqs_.get(),
                                             peers_.get(), &registry_, ro);
  // Readers refuse this server's data until its lease is proven.
  fence_page_->Fence();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> KvServer::PeerCredentials() const {
  if (options_.tls_cert_file.empty()) return std::shared_ptr<grpc::ChannelCredentials>();
  tls::PemFiles files;
  files.cert = options_.tls_cert_file;
  files.key = options_.tls_key_file;
  files.ca = options_.tls_peer_ca_file;
  files.ca_flag = "tls_peer_ca";
  if (files.ca.empty()) {
    files.ca = options_.tls_client_ca_file;
    files.ca_flag = "tls_client_ca";
  }
  if (files.ca.empty()) {
    return absl::InvalidArgumentError(
        "cluster mode with --tls_cert needs --tls_peer_ca (or --tls_client_ca): the CA that "
        "signed the other nodes' certificates");
  }
  return tls::ReloadingChannelCredentials(files, options_.tls_reload_interval);
}

absl::Status KvServer::StartCluster() {
  if (cluster_state_ == nullptr) return absl::OkStatus();
  const std::string host = AdvertiseHost(options_.cluster, options_.listen_address);
  ClusterNodeDeps deps;
  deps.state = cluster_state_.get();
  deps.fence = fence_page_.get();
  deps.self.set_node_id(node_id_);
  deps.self.set_control_address(absl::StrCat(host, ":", control_port_));
  deps.self.set_resp_address(absl::StrCat(host, ":", ClientRespPort()));
  if (http_ != nullptr) deps.self.set_metrics_address(absl::StrCat(host, ":", http_->port()));
  // Primaries send this node their writes on the peer socket, a plain TCP
  // stream cheaper than gRPC's (docs/performance.md), unless the cluster
  // speaks TLS: then the peer bytes stay on gRPC over TLS.
  if (options_.cluster.replication_port >= 0 && options_.tls_cert_file.empty()) {
    PeerListenerOptions lo;
    lo.bind_address = options_.listen_address;
    lo.port = options_.cluster.replication_port;
    lo.secret = options_.cluster_secret;
    absl::flat_hash_map<std::string, PeerListener::Handler> handlers;
    ClusterService* service = cluster_service_.get();
    handlers[std::string(kReplicatePurpose)] = ReplicaSocketHandler(
        [service](const ReplicateBatchView& b, absl::Time t) { return service->ApplyBatch(b, t); });
    KV_ASSIGN_OR_RETURN(peer_listener_, PeerListener::Start(lo, &registry_, std::move(handlers)));
    deps.self.set_replication_address(absl::StrCat(host, ":", peer_listener_->port()));
  }
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
  // A lease lapse costs no data: the node registers again, publishing the
  // copies it holds, and the new map store and controller replace the old.
  deps.copies = [this] { return HeldCopies(*cluster_state_, *seqs_); };
  deps.on_registered = [this](ClusterNode* node) {
    editor_->Set(node->map_store());
    controller_proxy_->set_controller(node->controller());
  };
  deps.etcd = options_.etcd_client_for_test ? options_.etcd_client_for_test() : nullptr;
  deps.peers = peers_.get();
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
    // The backup admits a replica commit only on a peer's session.
    lo.peer_secret = options_.cluster_secret;
    lo.self = node_id_;
    replica_links_ = std::make_unique<RdmaReplicaLinks>(lo, &registry_);
    replicator_->set_rdma_links(replica_links_.get());
  }
  KV_ASSIGN_OR_RETURN(cluster_, ClusterNode::Start(options_.cluster, std::move(deps)));
  editor_->Set(cluster_->map_store());
  controller_proxy_->set_controller(cluster_->controller());
  return absl::OkStatus();
}

void KvServer::BuildClusterService() {
  ClusterServiceDeps deps;
  deps.credentials = Credentials();
  deps.registry = &registry_;
  if (cluster_state_ != nullptr) {
    installer_ =
        std::make_unique<ReplicaInstaller>(store_.get(), cluster_state_.get(), seqs_.get(),
                                           peers_.get(), &registry_, ReplicaInstallerOptions());
    // Replica commits from primaries' RDMA links land in the installer.
    // With R=1 no write waits for a backup: client commits stay on the poller.
    // A client's commit is started on the poller and acked by its round's
    // end, whether the round goes by stream or by RDMA link.
    if (rdma_ != nullptr) {
      rdma_->set_replica_sink(installer_.get(), options_.cluster.replicas > 1,
                              /*start_commits=*/true);
    }
    replicator_->set_store(store_.get());
    ShardReconcilerOptions ro;
    ro.attempt_timeout = options_.cluster.replication_timeout;
    // Before the first map (StartCluster): shards led from the first map
    // on wait for it.
    reconciler_ =
        std::make_unique<ShardReconciler>(store_.get(), cluster_state_.get(), replicator_.get(),
                                          seqs_.get(), peers_.get(), &registry_, ro);
    deps.state = cluster_state_.get();
    deps.store = store_.get();
    deps.replicator = replicator_.get();
    deps.installer = installer_.get();
    importer_ = std::make_unique<SlotImporter>(store_.get(), cluster_state_.get(),
                                               replicator_.get(), &registry_);
    deps.importer = importer_.get();
    // Before the first map (StartCluster): the driver listens for maps.
    migration_driver_ = std::make_unique<MigrationDriver>(
        store_.get(), cluster_state_.get(), replicator_.get(), editor_.get(), peers_.get(),
        &registry_, MigrationDriverOptions());
    // The admin requests: answered here when this node is the controller,
    // else forwarded to it (the controller is set once the node started).
    controller_proxy_ = std::make_unique<ControllerProxy>(cluster_state_.get(), peers_.get());
    ControllerProxy* proxy = controller_proxy_.get();
    // The caller's credential goes along: a forward to the controller
    // carries the operator's, never the cluster secret.
    deps.failover = [proxy](const v1::FailoverRequest& r, const AdminCall& a) {
      return proxy->Failover(r, a);
    };
    deps.remove_node = [proxy](const v1::RemoveNodeRequest& r, const AdminCall& a) {
      return proxy->RemoveNode(r, a);
    };
    deps.add_node = [proxy](const v1::AddNodeRequest& r, const AdminCall& a) {
      return proxy->AddNode(r, a);
    };
    deps.rebalance = [proxy](const v1::RebalanceRequest& r, const AdminCall& a) {
      return proxy->Rebalance(r, a);
    };
    deps.accept_loss = [proxy](const v1::AcceptLossRequest& r, const AdminCall& a) {
      return proxy->AcceptLoss(r, a);
    };
  }
  cluster_service_ = std::make_unique<ClusterService>(std::move(deps));
}

}  // namespace server
}  // namespace kvstore
