// Copyright 2026 The kvstore Authors.
//
// ShardReconciler: a new primary's first duty to its shard (architecture
// §19.3). In-sync replicas hold every acknowledged write but may differ on
// writes never acknowledged: when a primary crashes with writes of several
// keys in flight, each may have reached a different backup; a manual
// failover or remove-node may leave a write on the backup that was still on
// the old map only. The promoted replica serves its own copy, so before it
// acknowledges any write of the shard (Replicator's PromotionGate holds
// them) it makes every other in-sync replica equal to itself:
//
//   1. digest each slot of the shard (ReconcilableSlots: those it owns
//      outside running migrations) here and on the backup
//      (ShardDigest; also raises this node's seq of the shard above the
//      backup's applied seq, so its new writes order after the old ones);
//   2. for each slot whose digests differ, send this node's entries of it
//      (ReconcileSlots): the backup installs them and deletes its other
//      keys of the slot. Key by key, never by dropping the slot first: if
//      this node dies half-way, the backup still holds every acknowledged
//      write.
//
// A backup that cannot be reconciled within `attempt_timeout` (dead, cut
// off, its map behind for that long; not when it answers that this node's
// map is the one behind: then it is tried again) is dropped from the in-sync set as one
// that failed a write (Replicator::DropUnreconciled); when the in-sync floor
// forbids that, the shard keeps waiting and the reconcile is tried again
// with backoff. Until it succeeds, writes of the shard wait (then are
// refused with a kTryAgain of no effect), and ClusterState holds the shard
// (HoldNewLeads: RESP and gRPC reads and writes get a kTryAgain of no
// effect, the fence page shows epoch 0 so one-sided readers refuse): what
// this node would serve is its own copy, which a second failover to an
// unreconciled backup could take back. Success releases both.
//
// Slots of a running migration are left alone: the migration's copy and
// handoff decide what both sides hold (see ReconcilableSlots).
//
// The same thread calls Replicator::SettleIdle() every poll_interval, so
// that a key whose write ended unknown is repaired on the replicas even if
// the shard sees no further write.
//
// Costs: one scan of the shard's keys (reading each entry) on this node and
// on each backup, and entries only for the slots that differ.
//
// Thread safety: thread-safe; runs on a thread of its own (none when
// poll_interval is zero: tests call ReconcileNow()).

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_SHARD_RECONCILER_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_SHARD_RECONCILER_H_

#include <cstdint>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_map.h"
#include "common/metrics/registry.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/replication/promotion_gate.h"
#include "server/cluster/replication/replicator.h"
#include "server/cluster/replication/shard_seqs.h"
#include "server/cluster/replication/slot_digest.h"
#include "server/routing/cluster_state.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

struct ShardReconcilerOptions {
  // How long one backup may take to answer (a backup whose map is behind is
  // asked again until then) before it counts as failed
  // (--replication_timeout).
  absl::Duration attempt_timeout = absl::Seconds(1);
  // How often the thread looks for waiting shards; zero: no thread.
  absl::Duration poll_interval = absl::Milliseconds(20);
  absl::Duration min_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(1);
  // Whether the thread also repairs, between writes, keys whose write
  // ended unknown (Replicator::SettleIdle), every poll_interval.
  bool settle_idle = true;
  // Upper bound of the entries of one ReconcileSlots call (a slot's
  // entries are never split; a larger slot goes alone).
  uint64_t chunk_bytes = 1 << 20;
};

class ShardReconciler {
 public:
  // None owned; all must outlive the reconciler. Enables the replicator's
  // PromotionGate and the state's holds of new leads, so construct it
  // before the node installs its first map.
  ShardReconciler(KvStore* store, ClusterState* state, Replicator* replicator, ShardSeqs* seqs,
                  PeerClient* peers, metrics::Registry* registry, ShardReconcilerOptions options);
  ~ShardReconciler();
  ShardReconciler(const ShardReconciler&) = delete;
  ShardReconciler& operator=(const ShardReconciler&) = delete;

  // Reconciles every other in-sync replica of `lead`'s shard with this node
  // and releases the gate and the state's hold (OK without doing anything when this node no
  // longer leads it). Errors: the first backup that could be neither
  // reconciled nor dropped.
  absl::Status ReconcileNow(const PromotionGate::Lead& lead);

 private:
  struct Stats {
    uint64_t differing_slots = 0;
    uint64_t entries_sent = 0;
  };
  // Steps 1-2 for one backup.
  absl::Status ReconcileBackup(const cluster::ClusterMapView& map, const v1::Shard& shard,
                               const v1::ClusterNode& backup, const SlotBits& slots,
                               const absl::flat_hash_map<uint32_t, uint64_t>& mine, Stats* stats);
  // Step 2: this node's entries of `differing`, in calls of about chunk_bytes.
  absl::Status SendSlots(const v1::ReconcileSlotsRequest& head, const v1::ClusterNode& backup,
                         const SlotBits& differing, Stats* stats);
  void Loop();

  KvStore* const store_;
  ClusterState* const state_;
  Replicator* const replicator_;
  ShardSeqs* const seqs_;
  PeerClient* const peers_;
  const ShardReconcilerOptions options_;

  metrics::Counter* reconciles_;
  metrics::Counter* failures_;
  metrics::Counter* slots_;
  metrics::Counter* entries_;
  metrics::Histogram* seconds_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_SHARD_RECONCILER_H_
