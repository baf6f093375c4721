// Copyright 2026 The kvstore Authors.
//
// ClusterState: what one kvserver knows of the cluster right now — its own
// node id, the newest cluster map it has applied, and whether it is fenced
// (its etcd lease may have lapsed, so it must not serve). The membership
// layer (server/cluster/membership/membership.h) writes it; the RESP layer,
// the gRPC services and the replicator read it to route every keyed request.
//
// In single-node mode there is no ClusterState (callers hold a null
// pointer) and every key is served locally.
//
// Thread safety: thread-safe. map() hands out an immutable snapshot, so a
// request routes against one map even while a newer one is installed.

#ifndef KVSTORE_SERVER_ROUTING_CLUSTER_STATE_H_
#define KVSTORE_SERVER_ROUTING_CLUSTER_STATE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/refusal.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {

// Where a keyed request should go.
struct Route {
  enum class Kind {
    kServe,     // this node serves it
    kMoved,     // another node is the primary: redirect to `node`
    kDown,      // the slot's shard (or its HANDOFF target) has no primary
                // (a kClusterDown refusal)
    kNotReady,  // no map yet, or this node is fenced (kClusterDown)
    // The slot is in a HANDOFF migration (architecture §19.9) that this
    // node leads the source of:
    kTryAgain,  // writes of the slot may still be in flight here (kTryAgain)
    kAsk,       // the target took the slot over: ask `node` for this one
                // request (kAsk), without changing the map
    // This node leads the slot's shard since a map in which it did not, and
    // has not yet made its in-sync backups equal to itself (HoldNewLeads):
    // serve nothing of it (kTryAgain). Every other field is as for kServe.
    kReconciling
  };
  Kind kind = Kind::kNotReady;
  uint32_t slot = 0;
  // The map the decision was made on (keeps `shard` and `node` alive).
  std::shared_ptr<const cluster::ClusterMapView> map;
  // kServe, kReconciling: the shard the request is served as (the migration's target
  // shard on a target that accepted the handoff); kMoved, kDown, kAsk,
  // kTryAgain: the slot's owner in the map.
  const v1::Shard* shard = nullptr;
  const v1::ClusterNode* node = nullptr;  // kMoved, kAsk: where to go
  // The COPYING or HANDOFF migration of the slot, if any (kServe on the
  // source: forward writes to its target while COPYING).
  const v1::Migration* migration = nullptr;
};

// Which of a node's addresses a kMoved / kAsk refusal names: the one of
// the transport the answer goes out on.
enum class RefusalAddress { kResp, kControl };

// The refusal of a route this node does not serve (REQUIRES: route.kind !=
// kServe), in the one wording every transport uses: kMoved / kAsk name
// route.node (its id, and its `address`), kTryAgain and kDown the slot,
// kNotReady nothing. Routing sends nothing anywhere, so the effect is
// always cluster::Effect::kNone.
cluster::Refusal RouteRefusal(const Route& route, RefusalAddress address);
// OK for kServe, else ToStatus(RouteRefusal(route, address)).
absl::Status RouteStatus(const Route& route, RefusalAddress address);

class ClusterState {
 public:
  // `clock` (default: the real one) is what Serving() reads the lease
  // deadline against; tests pass a ManualClock. It must outlive the state.
  explicit ClusterState(std::string self_node_id, const Clock* clock = nullptr)
      : self_(std::move(self_node_id)), clock_(clock != nullptr ? *clock : Clock::Real()) {}
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
  // The moment on the state's clock (Clock::Steady()) after which this
  // node must not serve (its etcd lease could have expired by then).
  // Checked on every routed request, so a process resumed after a freeze
  // refuses work before its keepalive thread runs. Default: never (until
  // membership sets it).
  void set_lease_deadline(absl::Duration steady_deadline) {
    deadline_ns_.store(absl::ToInt64Nanoseconds(steady_deadline), std::memory_order_release);
  }
  // The same as a std::chrono::steady_clock moment, taken as "this long
  // from now" on the state's clock (whose origin may differ).
  void set_lease_deadline(std::chrono::steady_clock::time_point deadline) {
    set_lease_deadline(clock_.Steady() +
                       absl::FromChrono(deadline - std::chrono::steady_clock::now()));
  }
  // Not fenced and the lease deadline is ahead.
  bool Serving() const;

  // This process's incarnation (its member lease id), set once it has
  // registered; 0 until then. A map whose record of this node id carries
  // another incarnation names an earlier life of this node (it crashed and
  // was restarted before its old lease expired, or it registered again
  // after its lease lapsed): this incarnation must not serve that life's
  // shards (only the controller may give a copy back), so RouteSlot
  // answers kNotReady
  // (a kClusterDown refusal) where it would serve, until the controller has replaced
  // the old incarnation.
  void set_incarnation(uint64_t incarnation) {
    incarnation_.store(incarnation, std::memory_order_release);
  }
  uint64_t incarnation() const { return incarnation_.load(std::memory_order_acquire); }
  // Whether `map` names an earlier incarnation of this node (see above).
  bool NamesEarlierSelf(const cluster::ClusterMapView& map) const;
  // This process's id (ClusterNode.process_id: random at start, kept when
  // it registers again after a lease lapse); empty until set.
  void set_process_id(std::string process_id);
  std::string process_id() const;
  // Whether `map` names an earlier incarnation of this node that was
  // another process (a restart: that life's memory is gone), or one whose
  // process is unknown. False for an earlier incarnation of this same
  // process: its copies are this memory, so this process may keep
  // receiving their writes as a backup while the controller moves its
  // roles to the new incarnation (it still serves none of them, above).
  bool NamesOtherProcess(const cluster::ClusterMapView& map) const;
  // The same two with this node's record in `map` already looked up
  // (map.Node(self()), null when absent), for a caller that keeps it with
  // the map it holds.
  bool NamesEarlierSelf(const v1::ClusterNode* self_record) const;
  bool NamesOtherProcess(const v1::ClusterNode* self_record) const;

  // Routes a request for `key` (kNotReady unless Serving()). Writes (and reads without
  // `replica_ok`) are served only by the shard's primary; with `replica_ok` (RESP READONLY,
  // stale-tolerant client reads) an in-sync backup serves reads too.
  // Migrations (§19.9): a slot in a HANDOFF migration is kTryAgain on the
  // source primary until MarkHandedOff(id), then kAsk to the target
  // primary; on the target primary it is kServe (as the target shard)
  // once AcceptHandoff(id), kMoved to the source before. While the target
  // shard has no primary a HANDOFF slot is kDown on every node, replica
  // reads included: the target may have acknowledged writes of it that the
  // source never saw. A COPYING slot routes as any other (the owner serves
  // it), with `migration` set. Where this node would serve a slot as its
  // shard's primary but holds the shard (HoldNewLeads below): kReconciling.
  Route RouteKey(absl::string_view key, bool replica_ok = false) const;
  Route RouteSlot(uint32_t slot, bool replica_ok = false) const;

  // Handoff marks (§19.9), local to this process and keyed by migration id;
  // a mark whose migration is no longer in the installed map is dropped by
  // Update(). MarkHandedOff: this node (the source primary) has no write of
  // the migration's slots in flight and the target accepted the handoff.
  // AcceptHandoff: this node (the target primary) was told so.
  void MarkHandedOff(uint32_t migration_id);
  void AcceptHandoff(uint32_t migration_id);
  bool HandedOff(uint32_t migration_id) const;
  bool HandoffAccepted(uint32_t migration_id) const;

  // Called after every installed map (membership fences, replicator and
  // fence page follow it). Register before the first Update().
  void AddListener(std::function<void(const cluster::ClusterMapView&)> listener);

  // Holds of new leads. Why: in-sync replicas hold every acknowledged
  // write but may differ on writes never acknowledged (in flight when their
  // primary died). A new primary that served its own copy of such a write
  // and then died before its backups matched it would let a second
  // failover take back a value a reader saw. So, once HoldNewLeads() was
  // called, every shard this node leads in an installed map but did not
  // lead in the map installed before it is held from that very install
  // (computed inside Update(), before any request can route on the map):
  // RouteSlot answers kReconciling where it would serve it as its primary
  // (replica reads are dirty by contract and not held), and FenceEpoch()
  // is 0, until ReleaseHold(). The first installed map holds nothing (the
  // process started empty: it leads only a new shard, or one no in-sync
  // copy survived). Losing the lead drops its hold; leading again holds
  // again. The replication layer's reconciler releases the holds.
  void HoldNewLeads();
  bool Held(uint32_t shard_id) const;
  struct HeldLead {
    uint32_t shard_id = 0;
    uint64_t since = 0;  // the map epoch since which this node leads it
  };
  std::vector<HeldLead> HeldLeads() const;
  // Ends the hold of `shard_id` if its lead began at or before map epoch
  // `reconciled_at` (the map on which its backups were made equal to this
  // node), then runs the hold listeners. A lead begun later stays held.
  void ReleaseHold(uint32_t shard_id, uint64_t reconciled_at);
  // Called after a hold is released (the fence page follows it).
  void AddHoldListener(std::function<void()> listener);
  // The map epoch one-sided readers may trust this node's data at: the
  // installed map's, or 0 (matches no reader's map, so they refuse and
  // refresh) while a lead is held or the map names an earlier incarnation.
  uint64_t FenceEpoch() const;

 private:
  // RouteSlot for a slot in a HANDOFF migration; false: route as usual.
  bool RouteHandoff(Route* route) const;
  // RouteSlot before holds are applied.
  Route RouteUnheld(uint32_t slot, bool replica_ok) const;
  // The new leads of `map` (installed next) into held_/led_.
  void HoldLeadsLocked(const cluster::ClusterMapView& map) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string self_;
  const Clock& clock_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<bool> fenced_{false};
  std::atomic<uint64_t> incarnation_{0};
  std::atomic<int64_t> deadline_ns_{std::numeric_limits<int64_t>::max()};
  mutable absl::Mutex mu_;
  std::shared_ptr<const cluster::ClusterMapView> map_ ABSL_GUARDED_BY(mu_);
  std::string process_id_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint32_t> handed_off_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint32_t> accepted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const cluster::ClusterMapView&)>> listeners_ ABSL_GUARDED_BY(mu_);
  bool hold_new_leads_ ABSL_GUARDED_BY(mu_) = false;
  // The shards this node leads in map_, and those of them held (by since).
  absl::flat_hash_set<uint32_t> led_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, uint64_t> held_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> hold_listeners_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_ROUTING_CLUSTER_STATE_H_
