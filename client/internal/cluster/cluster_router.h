// Copyright 2026 The kvstore Authors.
//
// ClusterRouter: the cluster client's view of the cluster — the newest map
// it has seen and one lazily connected ServerLink per node — and the map
// refresh.
//
// Links are keyed by node id and incarnation: a node that restarted (new
// incarnation in the map) gets a new link with a new handshake, and links of
// nodes that left the map are dropped when a newer map is installed (calls in
// flight keep theirs alive until they finish). Every link is told the map
// epoch (ServerLink::SetMapEpoch -> DataPath::SetMapEpoch) whenever the map
// changes and when it is made.
//
// Refresh asks, in order, a hinted node, every node of the current map and
// the seeds for GetClusterMap (each call bounded by 1 s and the caller's
// deadline) and installs the first map with a higher epoch than the one
// held. A map with a lower or equal epoch — from a node that lags behind —
// is ignored: the client never goes back to an older map. Concurrent
// refreshes are coalesced: a caller that routed by an epoch older than the
// current one returns at once.
//
// Thread safety: thread-safe.

#ifndef KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ROUTER_H_
#define KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ROUTER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/internal/cluster/cluster_rpc.h"
#include "client/internal/server_link.h"
#include "common/cluster/cluster_map.h"
#include "common/control/control_client.h"

namespace kvstore {
namespace client {

// --- Routing during a slot migration (§19.9); pure functions -----------------

// Whether reads of `slot` must go through the server's CPU (SlowReadPath)
// instead of one-sided RDMA READs: the slot is in a HANDOFF migration of
// `map`. COPYING slots are the source's alone and are READ as ever.
bool ReadsNeedSlowPath(const cluster::ClusterMapView& map, uint32_t slot);

// The node a kAsk refusal for `slot` naming `node_id` (gRPC and RDMA carry
// it; empty over RESP) and `address` sends the request to: the node of
// `map` with that id, else the one whose control or RESP address is
// `address`; failing that (a node the map does not list, or none), the
// primary of the target shard of the slot's active migration. nullptr when
// neither is known: the caller refreshes its map and routes again.
const v1::ClusterNode* AskedNode(const cluster::ClusterMapView& map, uint32_t slot,
                                 const std::string& node_id, const std::string& address);

class ClusterRouter {
 public:
  // `env` and its pointees must outlive the router. `seeds` are the control
  // addresses of Options::servers; `security` secures every channel.
  ClusterRouter(LinkEnv env, control::ControlSecurity security, std::vector<std::string> seeds);
  ~ClusterRouter();
  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;

  // Fetches the first map from the seeds, in order, until one answers with a
  // valid map; while the last error is a timeout and `deadline` allows, the
  // seeds are asked again (a first call sets up its channel, which may take
  // longer than one call's cap). Errors: the single-node answer of the first seed that gives
  // one (IsSingleNodeAnswer: the caller then connects as before; that seed
  // is stored in `*single_node_seed`), otherwise
  // the last seed's error (kUnavailable when none could be reached),
  // kInvalidArgument for a map ClusterMapView refuses.
  absl::Status Bootstrap(absl::Time deadline, std::string* single_node_seed);

  // The map routed by now; never null after a successful Bootstrap().
  std::shared_ptr<const cluster::ClusterMapView> map() const;
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // Installs `map` if its epoch is higher than the held one; returns whether
  // it did.
  bool Install(std::shared_ptr<const cluster::ClusterMapView> map);

  // See the file comment. `routed_epoch` is the epoch the failed attempt
  // was routed by; `hint` a control address to ask first (may be empty);
  // `last` one to ask only after every other (the node that just failed:
  // a frozen one would hold the call until its timeout; may be empty).
  // Returns whether a newer map than `routed_epoch` is now installed.
  bool Refresh(uint64_t routed_epoch, const std::string& hint, absl::Time deadline,
               const std::string& last = "");

  // For an operation that ends because an attempt against `node` (routed
  // by `epoch`) used up its whole budget with `status` — a frozen node: a
  // handshake or a call that never returns — so no time is left to
  // recover: for kDeadlineExceeded and kUnavailable, drops `link` (may be
  // null) and refreshes with a budget of its own (one GetClusterMap
  // timeout), asking `node` last. Otherwise the next operation would route
  // to the frozen node again, and so would every one after it.
  void RecoverForNextOperation(const absl::Status& status, uint64_t epoch,
                               const v1::ClusterNode* node,
                               const std::shared_ptr<ServerLink>& link);

  // The link of `node`, connecting it (handshake and data path) on first
  // use. Errors of ServerLink::Init (kUnavailable for an unreachable node).
  absl::StatusOr<std::shared_ptr<ServerLink>> Link(const v1::ClusterNode& node);

  // Forgets `link` (if it is still the link of its node), so that the next
  // Link() connects again; used when a node stopped answering.
  void Drop(const std::shared_ptr<ServerLink>& link);

  // A KvCluster client for `address`, made once per address and cached.
  absl::StatusOr<ClusterRpc*> Rpc(const std::string& address);

 private:
  // One gRPC channel per control address, shared by ClusterRpc and the
  // ControlClient of the node's link.
  struct Endpoint {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<ClusterRpc> rpc;
  };
  absl::StatusOr<Endpoint*> GetEndpoint(const std::string& address);
  // Asks `address` for its map; the view, or why not.
  absl::StatusOr<std::shared_ptr<const cluster::ClusterMapView>> Fetch(const std::string& address,
                                                                       absl::Time deadline);

  const LinkEnv env_;
  const control::ControlSecurity security_;
  const std::vector<std::string> seeds_;
  std::atomic<uint64_t> epoch_{0};
  // Held for a whole Refresh(), so that concurrent refreshes coalesce.
  absl::Mutex refresh_mu_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const cluster::ClusterMapView> map_ ABSL_GUARDED_BY(mu_);
  // "<node_id>#<incarnation>" -> link.
  std::map<std::string, std::shared_ptr<ServerLink>> links_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Endpoint>> endpoints_ ABSL_GUARDED_BY(mu_);
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_CLUSTER_CLUSTER_ROUTER_H_
