// Copyright 2026 The kvstore Authors.
//
// ClusterNode: the cluster plane of one kvserver in cluster mode, put
// together: the etcd client, Membership (lease, keepalive, fencing, map
// watch), MapStore (this node's ShardMapEditor) and the Controller
// (server/cluster/controller.h: every node campaigns; the elected one makes
// the first map, fails over and places replicas). KvServer creates it after its listeners are up,
// so the addresses it registers are the bound ones.
//
// A lease lapse (etcd paused or unreachable longer than the TTL, this
// process frozen) does not end the process nor touch its memory: the node
// stays fenced, and a thread of the ClusterNode retires the three parts
// tied to the old lease and starts them again, registering a new
// incarnation with the same process_id (random per ClusterNode, that is,
// per process) and the shard copies it holds (deps.copies). The controller
// then gives a DOWN shard back to such a copy, or places the node again as
// any other (it copies its shards again, in full). Until a map names the new
// incarnation the node serves none of its old roles (ClusterState). The
// retired parts stay allocated until the ClusterNode goes, so pointers
// handed out before stay valid (they are inert).
//
// Thread safety: Start/Shutdown from one thread; accessors from any.

#ifndef KVSTORE_SERVER_CLUSTER_CLUSTER_NODE_H_
#define KVSTORE_SERVER_CLUSTER_CLUSTER_NODE_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/controller/controller.h"
#include "server/cluster/membership/cluster_options.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/cluster/membership/map_store.h"
#include "server/cluster/membership/membership.h"
#include "server/cluster/peer/peer_client.h"
#include "server/routing/cluster_state.h"
#include "server/routing/fence_page.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {

class ClusterNode;

struct ClusterNodeDeps {
  // Owned by KvServer; outlive the ClusterNode.
  ClusterState* state = nullptr;
  FencePage* fence = nullptr;
  // node_id and the bound addresses (control, resp, metrics).
  v1::ClusterNode self;
  // Membership's callbacks (membership.h). on_lease_lost: told when etcd
  // said the lease expired (may be empty); the node registers again itself.
  std::function<void()> on_fence;
  std::function<void()> on_unfence;
  std::function<void()> on_lease_lost;
  // The shard copies this process holds (MembershipOptions::copies).
  std::function<std::vector<v1::ShardCopy>()> copies;
  // After the node registered again following a lease lapse, on the
  // ClusterNode's thread: map_store() and controller() are new (the
  // server re-points its editor and admin proxy). May be empty.
  std::function<void(ClusterNode*)> on_registered;
  // The controller's calls to other nodes (ReplicaStatus); outlives the
  // ClusterNode.
  PeerClient* peers = nullptr;
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

  // Stops registering again, the controller (resigning), fences this node
  // and the threads, and revokes the lease (the member key goes at once).
  // Idempotent.
  void Shutdown();

  etcd::EtcdClient* etcd() { return etcd_.get(); }
  // The current registration's parts (new ones after a lease lapse).
  Membership* membership() const;
  // The replicator's ShardMapEditor.
  MapStore* map_store() const;
  // For manual failover and status (the gRPC layer forwards to the leader).
  Controller* controller() const;
  const ClusterOptions& options() const { return options_; }
  // The current incarnation (the member key's lease id).
  int64_t incarnation() const;
  // Random at start, the same for every registration of this process.
  const std::string& process_id() const { return deps_.self.process_id(); }
  // Registrations after a lease lapse so far.
  int reregistrations() const;

 private:
  // What one registration (one lease) runs.
  struct Plane {
    std::unique_ptr<Membership> membership;
    std::unique_ptr<MapStore> map_store;
    std::unique_ptr<Controller> controller;
  };
  ClusterNode(const ClusterOptions& options, ClusterNodeDeps deps)
      : options_(options), deps_(std::move(deps)) {}
  // Registers under a new lease and starts the plane's parts.
  absl::StatusOr<Plane> StartPlane();
  void LeaseLost();
  bool LostOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return lease_lost_ || stopping_;
  }
  // Waits for a lease lapse, retires the plane, registers again.
  void RegisterLoop();

  const ClusterOptions options_;
  ClusterNodeDeps deps_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  mutable absl::Mutex mu_;
  Plane plane_ ABSL_GUARDED_BY(mu_);
  // Planes of earlier leases, stopped; kept until the node goes.
  std::vector<Plane> retired_ ABSL_GUARDED_BY(mu_);
  bool lease_lost_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int reregistrations_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread registrar_;
  bool shut_down_ = false;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_CLUSTER_NODE_H_
