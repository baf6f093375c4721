// Copyright 2026 The kvstore Authors.
//
// ClusterNode: the cluster plane of one kvserver in cluster mode, put
// together: the etcd client, Membership (lease, keepalive, fencing, map
// watch), MapStore (this node's ShardMapEditor) and the Controller
// (server/cluster/controller.h: every node campaigns; the elected one makes
// the first map, fails over and places replicas). KvServer creates it after its listeners are up,
// so the addresses it registers are the bound ones.
//
// Thread safety: Start/Shutdown from one thread; accessors from any.

#ifndef KVSTORE_SERVER_CLUSTER_CLUSTER_NODE_H_
#define KVSTORE_SERVER_CLUSTER_CLUSTER_NODE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/controller/controller.h"
#include "server/cluster/membership/cluster_options.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/cluster/membership/map_store.h"
#include "server/cluster/membership/membership.h"
#include "server/routing/cluster_state.h"
#include "server/routing/fence_page.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {

struct ClusterNodeDeps {
  // Owned by KvServer; outlive the ClusterNode.
  ClusterState* state = nullptr;
  FencePage* fence = nullptr;
  // node_id and the bound addresses (control, resp, metrics).
  v1::ClusterNode self;
  // Membership's callbacks (membership.h); on_lease_lost empty: _exit(3).
  std::function<void()> on_fence;
  std::function<void()> on_unfence;
  std::function<void()> on_lease_lost;
  // The bearer token the controller sends to other nodes' KvCluster
  // service (--auth_token_file); empty: none.
  std::string auth_token;
  // An etcd client to use instead of connecting to options.etcd_endpoints
  // (in-process tests pass a FakeEtcd's); null in production.
  std::unique_ptr<etcd::EtcdClient> etcd;
  // The clock of membership and the controller; nullptr: the real one.
  // Must be `state`'s clock.
  const Clock* clock = nullptr;
};

class ClusterNode {
 public:
  // Connects to etcd (or takes deps.etcd), registers this node and reads
  // the map. kInvalidArgument
  // for bad options (ClusterOptions::Validate); kUnavailable when no etcd
  // endpoint answers (naming them).
  static absl::StatusOr<std::unique_ptr<ClusterNode>> Start(const ClusterOptions& options,
                                                            ClusterNodeDeps deps);
  ~ClusterNode();
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;

  // Stops the controller (resigning), fences this node and the threads, and revokes the
  // lease (the member key goes at once). Idempotent.
  void Shutdown();

  etcd::EtcdClient* etcd() { return etcd_.get(); }
  Membership* membership() { return membership_.get(); }
  // The replicator's ShardMapEditor.
  MapStore* map_store() { return map_store_.get(); }
  // For manual failover and status (the gRPC layer forwards to the leader).
  Controller* controller() { return controller_.get(); }
  const ClusterOptions& options() const { return options_; }
  // This start's incarnation (the member key's lease id).
  int64_t incarnation() const { return membership_ ? membership_->lease() : 0; }

 private:
  explicit ClusterNode(const ClusterOptions& options) : options_(options) {}

  const ClusterOptions options_;
  // Destroyed in reverse: map store and membership before the client.
  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<MapStore> map_store_;
  std::unique_ptr<Controller> controller_;
  bool shut_down_ = false;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_CLUSTER_NODE_H_
