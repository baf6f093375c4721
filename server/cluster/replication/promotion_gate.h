// Copyright 2026 The kvstore Authors.
//
// PromotionGate: which shards this node leads but may not acknowledge
// writes of yet, because it has not made its in-sync backups equal to
// itself since it became their primary (ShardReconciler does that).
//
// Why: in-sync replicas hold every acknowledged write, but they may differ
// on writes that were never acknowledged (a write in flight when its
// primary crashed or was replaced may have reached some backups only). A
// new primary serves its own copy; if it then acknowledged writes while a
// backup still differed, a second failover to that backup could take back
// a value readers had seen. So a shard is "waiting" from the first map in
// which this node leads it after a map in which it did not (not the first
// map this process sees: it started empty, so the shard is new or kept no
// in-sync copy) until Reconciled() for that lead; a write of a waiting shard is refused
// before it goes anywhere (the replicator's kTryAgain). Losing the lead
// forgets it; leading again waits again.
//
// Before Enable() (no reconciler runs, e.g. tests of the write path alone)
// no shard ever waits.
//
// Thread safety: thread-safe. Ready() is two atomic loads while no shard
// waits and the map is not newer than the last one observed (every
// replicated write asks, on the RESP loop); otherwise one mutex and a hash
// lookup.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_PROMOTION_GATE_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_PROMOTION_GATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_map.h"

namespace kvstore {
namespace server {

class PromotionGate {
 public:
  explicit PromotionGate(std::string self) : self_(std::move(self)) {}

  // From now on a shard this node starts to lead waits (see above).
  void Enable();

  // Maps not newer than the newest seen are ignored. Records the shards
  // this node leads in `map` and since which map epoch.
  void Observe(const cluster::ClusterMapView& map);

  // Whether writes of `shard_id` may be acknowledged, after Observe(map).
  // True for a shard this node does not lead in the newest map seen (the
  // write is refused elsewhere).
  bool Ready(const cluster::ClusterMapView& map, uint32_t shard_id);
  // Ready(), waiting for it until `deadline` (real time).
  bool AwaitReady(const cluster::ClusterMapView& map, uint32_t shard_id, absl::Time deadline);

  // One lead: the shard, and the map epoch since which this node leads it.
  struct Lead {
    uint32_t shard_id = 0;
    uint64_t since = 0;
  };
  // The waiting leads, after waiting up to `timeout` for one.
  std::vector<Lead> AwaitWaiting(absl::Duration timeout);
  // Ends `lead`'s wait, if this node still leads the shard since then.
  void Reconciled(const Lead& lead);

 private:
  struct State {
    uint64_t since = 0;
    bool waiting = false;
  };
  bool AnyWaiting() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores waiting_ and seen_epoch_fast_ from leads_ and seen_epoch_.
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReadyLocked(uint32_t shard_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string self_;
  mutable absl::Mutex mu_;
  bool enabled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t seen_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // Copies for Ready()'s fast path, stored under mu_ whenever leads_ or
  // seen_epoch_ change: the shards waiting, and seen_epoch_.
  std::atomic<size_t> waiting_{0};
  std::atomic<uint64_t> seen_epoch_fast_{0};
  // The shards this node leads in the newest map seen.
  absl::flat_hash_map<uint32_t, State> leads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_PROMOTION_GATE_H_
