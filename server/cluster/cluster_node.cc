// Copyright 2026 The kvstore Authors.

#include "server/cluster/cluster_node.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/sync/thread_name.h"
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
  eo.ca_file = options.etcd_ca_file;
  eo.cert_file = options.etcd_cert_file;
  eo.key_file = options.etcd_key_file;
  eo.tls_reload_interval = options.etcd_tls_reload_interval;
  eo.user = options.etcd_user;
  eo.password = options.etcd_password;
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
  // One per process: the controller tells "registered again, memory
  // intact" (same id) from "restarted empty" (another) by it.
  absl::BitGen bits;
  deps.self.set_process_id(absl::StrCat(absl::Hex(absl::Uniform<uint64_t>(bits)), "-",
                                        absl::Hex(absl::Uniform<uint64_t>(bits))));
  std::unique_ptr<etcd::EtcdClient> etcd = std::move(deps.etcd);
  std::unique_ptr<ClusterNode> node(new ClusterNode(options, std::move(deps)));
  if (etcd != nullptr) {
    node->etcd_ = std::move(etcd);
  } else {
    KV_ASSIGN_OR_RETURN(node->etcd_, ConnectEtcd(options));
  }
  KV_ASSIGN_OR_RETURN(Plane plane, node->StartPlane());
  {
    absl::MutexLock lock(&node->mu_);
    node->plane_ = std::move(plane);
  }
  node->registrar_ = std::thread([p = node.get()] {
    NameThread("kv-registrar");
    p->RegisterLoop();
  });
  return node;
}

absl::StatusOr<ClusterNode::Plane> ClusterNode::StartPlane() {
  MembershipOptions mo;
  mo.cluster_name = options_.cluster_name;
  mo.self = deps_.self;
  mo.ttl = options_.member_ttl;
  mo.fence_margin = options_.fence_margin;
  mo.on_fence = deps_.on_fence;
  mo.on_unfence = deps_.on_unfence;
  mo.on_lease_lost = [this] { LeaseLost(); };
  mo.copies = deps_.copies;
  mo.clock = deps_.clock;
  Plane plane;
  KV_ASSIGN_OR_RETURN(plane.membership,
                      Membership::Start(etcd_.get(), deps_.state, deps_.fence, std::move(mo)));

  MapStoreOptions so;
  so.cluster_name = options_.cluster_name;
  so.node_id = deps_.self.node_id();
  so.lease = plane.membership->lease();
  plane.map_store = std::make_unique<MapStore>(etcd_.get(), deps_.state, std::move(so));

  // Every node campaigns; the controller key lives under this node's lease,
  // so the role dies with the node.
  ControllerOptions co;
  co.cluster_name = options_.cluster_name;
  co.node_id = deps_.self.node_id();
  co.lease = plane.membership->lease();
  co.replicas = options_.replicas;
  co.min_nodes = options_.min_nodes();
  co.member_ttl = options_.member_ttl;
  // The campaign may hear of a lapse before the keepalive does; the
  // membership outlives this controller (RegisterLoop stops it first).
  co.on_lease_gone = [m = plane.membership.get()] { m->LeaseGone("the controller"); };
  GrpcAppliedSeqOptions ao;
  ao.peers = deps_.peers;
  co.map_epoch = MakeGrpcMapEpochFn(ao);
  co.clock = deps_.clock;
  plane.controller =
      std::make_unique<Controller>(etcd_.get(), std::move(co), MakeGrpcAppliedSeqFn(ao));
  plane.controller->Start();
  return plane;
}

void ClusterNode::LeaseLost() {
  // On the keepalive thread, which ends after this, or on the controller's
  // (Membership::LeaseGone): the registrar stops that controller, retires
  // its Membership (joining its threads) and registers again.
  if (deps_.on_lease_lost) deps_.on_lease_lost();
  absl::MutexLock lock(&mu_);
  lease_lost_ = true;
}

void ClusterNode::RegisterLoop() {
  for (;;) {
    Membership* old_membership;
    Controller* old_controller;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ClusterNode::LostOrStopping));
      if (stopping_) return;
      old_membership = plane_.membership.get();
      old_controller = plane_.controller.get();
      // Cleared before the new lease exists: a lapse of that one (told by
      // its own keepalive thread) is another round.
      lease_lost_ = false;
    }
    // The old lease is gone, and its controller key and member key with it.
    // Stopped outside mu_: Shutdown joins threads that call back into us.
    old_controller->Stop();
    old_membership->Shutdown();
    LOG(WARNING) << "cluster: node " << deps_.self.node_id() << " (process "
                 << deps_.self.process_id()
                 << ") lost its lease; registering again, keeping its memory";
    absl::StatusOr<Plane> plane = StartPlane();
    for (int attempt = 1; !plane.ok(); ++attempt) {
      LOG_EVERY_N(WARNING, 10) << "cluster: registering again failed (attempt " << attempt
                               << "): " << plane.status();
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(200))) return;
      }
      plane = StartPlane();
    }
    {
      absl::MutexLock lock(&mu_);
      retired_.push_back(std::move(plane_));
      plane_ = *std::move(plane);
      ++reregistrations_;
    }
    LOG(WARNING) << "cluster: node " << deps_.self.node_id() << " registered again as incarnation "
                 << absl::StrCat(absl::Hex(incarnation()))
                 << "; it serves none of its shards until the controller gives them back";
    if (deps_.on_registered) deps_.on_registered(this);
  }
}

Membership* ClusterNode::membership() const {
  absl::MutexLock lock(&mu_);
  return plane_.membership.get();
}

MapStore* ClusterNode::map_store() const {
  absl::MutexLock lock(&mu_);
  return plane_.map_store.get();
}

Controller* ClusterNode::controller() const {
  absl::MutexLock lock(&mu_);
  return plane_.controller.get();
}

int64_t ClusterNode::incarnation() const {
  absl::MutexLock lock(&mu_);
  return plane_.membership ? plane_.membership->lease() : 0;
}

int ClusterNode::reregistrations() const {
  absl::MutexLock lock(&mu_);
  return reregistrations_;
}

ClusterNode::~ClusterNode() { Shutdown(); }

void ClusterNode::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (registrar_.joinable()) registrar_.join();
  Plane plane;
  {
    absl::MutexLock lock(&mu_);
    plane = std::move(plane_);
    // Kept (stopped) for callers still holding its pointers.
  }
  // The controller resigns first (its key is deleted, another node takes
  // over at once), then the member lease goes.
  if (plane.controller) plane.controller->Stop();
  if (plane.membership) plane.membership->Shutdown();
  absl::MutexLock lock(&mu_);
  retired_.push_back(std::move(plane));
}

}  // namespace server
}  // namespace kvstore
