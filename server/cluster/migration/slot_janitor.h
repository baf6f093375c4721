// Copyright 2026 The kvstore Authors.
//
// SlotJanitor: drops, in the background, the entries of slots this node no
// longer has a role for (architecture §19.9, "Clean-up"). After a slot
// migration's flip the source shard's nodes still hold the slots' entries;
// after a node left a shard it still holds that shard's. Nothing routes to
// them any more, but they take memory, so every node cleans its own copy —
// locally, without replication (KvStore::DeleteReplica).
//
// A node has a role for a slot (SlotRoles) when, in the map, it is a
// replica or syncing node of the shard owning it (or, that shard being
// DOWN, in its last in-sync set: its copy may bring the shard back), or of
// the target shard of
// the slot's active (COPYING or HANDOFF) migration: an importing node keeps
// what the source copied to it. PENDING migrations give no role. A node
// also keeps the slots of a shard that has a primary but fewer in-sync
// replicas than the map's replication factor, unless it is draining: a
// node dropped from that shard's in-sync set (a lease lapse, a failed
// write) holds a candidate copy, the one a resync of it starts from, and
// drops it only once the shard is whole again without it. (Such a copy
// is never served: no role routes to it, and it is not an in-sync copy.)
//
// When. A ClusterState listener notes every installed map and wakes the
// janitor's own thread (the listener itself does no work: it runs on the
// installer's thread). A pass scans the whole store (KvStore::Scan, in
// pages) and deletes the keys of slots without a role. A pass is skipped
// when the roles of the new map include every role of the last pass (no
// slot was lost, so no key can have become orphaned); the first map always
// gets one.
//
// Races. Before each delete the janitor notes where the key's entry is
// published (KvStore::Locate), compares the map epoch it decided by with
// ClusterState::map_epoch() and, if a newer map is installed, decides again
// on it, so a key of a slot the node serves (or imports) in the newest map
// is never deleted. A map giving this node a role for the slot can still
// come between that check and the delete, and a write of the key under it
// (a Replicate, a copied entry, an import, a client write on a primary)
// with it; so the delete is conditional (KvStore::DeleteReplicaIf): only
// the entry noted is unpublished, and a key written since keeps its new
// entry. (A key the new role has not written yet may go: the copy that
// gives a node a role installs every key after the map, and a primary's
// role never comes back without one.) The map that made the janitor run
// is logged with the counts of each pass.
//
// Metric: kvstore_slot_janitor_deleted_total (entries deleted).
//
// Thread safety: thread-safe. The store and the state must outlive the
// janitor; no ClusterState::Update may run after it is destroyed (its
// listener stays registered: ClusterState has no removal).

#ifndef KVSTORE_SERVER_CLUSTER_MIGRATION_SLOT_JANITOR_H_
#define KVSTORE_SERVER_CLUSTER_MIGRATION_SLOT_JANITOR_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_map.h"
#include "common/metrics/registry.h"
#include "server/routing/cluster_state.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

// Slot -> whether `node_id` has a role for it in `map` (see the file
// comment); kSlotCount entries.
std::vector<bool> SlotRoles(const cluster::ClusterMapView& map, const std::string& node_id);

struct SlotJanitorOptions {
  // Keys asked of KvStore::Scan per page.
  size_t page_keys = 512;
  // Where the deleted counter goes; null: a registry of the janitor's own.
  metrics::Registry* registry = nullptr;
};

class SlotJanitor {
 public:
  // Registers the listener on `state` and starts the thread. Register it
  // before the first ClusterState::Update, or call Kick() after.
  SlotJanitor(KvStore* store, ClusterState* state, SlotJanitorOptions options = {});
  // Stop().
  ~SlotJanitor();
  SlotJanitor(const SlotJanitor&) = delete;
  SlotJanitor& operator=(const SlotJanitor&) = delete;

  // Ends the pass under way (between two keys) and joins the thread.
  // Idempotent.
  void Stop();

  // Asks for a pass on the current map (what the listener does).
  void Kick();

  // Waits until no pass is asked for or running, at most `timeout`; whether
  // it got there. For tests and shutdown logs.
  bool WaitIdle(absl::Duration timeout);

  // Entries deleted since construction.
  uint64_t deleted() const;

 private:
  void Run();
  // One pass over the store on the current map; false when stopped.
  bool Pass();

  KvStore* const store_;
  ClusterState* const state_;
  const SlotJanitorOptions options_;
  metrics::Registry own_registry_;
  metrics::Counter* deleted_;

  mutable absl::Mutex mu_;
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  // Read between two keys of a pass, without the mutex.
  std::atomic<bool> stop_{false};
  // Only the janitor's thread touches these.
  // The union of the roles every delete of the last pass was decided by.
  std::vector<bool> last_roles_;
  std::thread thread_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MIGRATION_SLOT_JANITOR_H_
