// Copyright 2026 The kvstore Authors.
//
// ClusterState: what one kvserver knows of the cluster right now — its own
// node id, the newest cluster map it has applied, and whether it is fenced
// (its etcd lease may have lapsed, so it must not serve). The membership
// layer (server/cluster/membership.h) writes it; the RESP layer, the gRPC
// services and the replicator read it to route every keyed request.
//
// In single-node mode there is no ClusterState (callers hold a null
// pointer) and every key is served locally.
//
// Thread safety: thread-safe. map() hands out an immutable snapshot, so a
// request routes against one map even while a newer one is installed.

#ifndef KVSTORE_SERVER_CLUSTER_CLUSTER_STATE_H_
#define KVSTORE_SERVER_CLUSTER_CLUSTER_STATE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/cluster/cluster_map.h"

namespace kvstore {
namespace server {

// Where a keyed request should go.
struct Route {
  enum class Kind {
    kServe,    // this node serves it
    kMoved,    // another node is the primary: redirect to `node`
    kDown,     // the slot's shard has no primary (CLUSTERDOWN)
    kNotReady  // no map yet, or this node is fenced (CLUSTERDOWN)
  };
  Kind kind = Kind::kNotReady;
  uint32_t slot = 0;
  // The map the decision was made on (keeps `shard` and `node` alive).
  std::shared_ptr<const cluster::ClusterMapView> map;
  const v1::Shard* shard = nullptr;       // kServe, kMoved, kDown
  const v1::ClusterNode* node = nullptr;  // kMoved: where to go
};

class ClusterState {
 public:
  explicit ClusterState(std::string self_node_id) : self_(std::move(self_node_id)) {}
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  const std::string& self() const { return self_; }

  // Installs `map` if its epoch is newer than the current one (an older or
  // equal one is ignored and false returned), then runs the listeners on
  // the caller's thread with the new map.
  bool Update(std::shared_ptr<const cluster::ClusterMapView> map);
  // The current map; null before the first Update().
  std::shared_ptr<const cluster::ClusterMapView> map() const;
  uint64_t map_epoch() const { return epoch_.load(std::memory_order_acquire); }

  // Fenced: the lease may have lapsed; serve nothing until unfenced.
  void set_fenced(bool fenced) { fenced_.store(fenced, std::memory_order_release); }
  bool fenced() const { return fenced_.load(std::memory_order_acquire); }
  // The steady-clock moment after which this node must not serve (its etcd
  // lease could have expired by then). Checked on every routed request, so
  // a process resumed after a freeze refuses work before its keepalive
  // thread runs. Default: never (until membership sets it).
  void set_lease_deadline(std::chrono::steady_clock::time_point deadline) {
    deadline_ns_.store(deadline.time_since_epoch().count(), std::memory_order_release);
  }
  // Not fenced and the lease deadline is ahead.
  bool Serving() const;

  // Routes a request for `key` (kNotReady unless Serving()). Writes (and reads without
  // `replica_ok`) are served only by the shard's primary; with `replica_ok` (RESP READONLY,
  // stale-tolerant client reads) an in-sync backup serves reads too.
  Route RouteKey(absl::string_view key, bool replica_ok = false) const;
  Route RouteSlot(uint32_t slot, bool replica_ok = false) const;

  // Called after every installed map (membership fences, replicator and
  // fence page follow it). Register before the first Update().
  void AddListener(std::function<void(const cluster::ClusterMapView&)> listener);

 private:
  const std::string self_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<bool> fenced_{false};
  std::atomic<int64_t> deadline_ns_{std::numeric_limits<int64_t>::max()};
  mutable absl::Mutex mu_;
  std::shared_ptr<const cluster::ClusterMapView> map_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const cluster::ClusterMapView&)>> listeners_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_CLUSTER_STATE_H_
