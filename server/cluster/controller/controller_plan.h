// Copyright 2026 The kvstore Authors.
//
// The controller's decisions as pure functions of (current map, registered
// members): the first map, failing over dead nodes, placing new or
// restarted nodes, refreshing node records, a manual failover, add-node,
// rebalance and starting slot migrations (architecture §19.1, §19.4,
// §19.9). The Controller (controller.h) reads etcd,
// calls these, and writes the result with a fenced transaction; keeping the
// decisions apart from the I/O keeps each readable on its own.
//
// Every map returned here has epoch = current epoch + 1, the shard_epoch of
// every changed shard bumped, `nodes` holding exactly the nodes some shard
// names, and passes ClusterMapView::Build (the caller checks it again before
// writing). `controller` is left for the caller to set.
//
// Thread safety: pure functions, except that they call `applied_seq`, which
// must be safe to call from the calling thread.

#ifndef KVSTORE_SERVER_CLUSTER_CONTROLLER_CONTROLLER_PLAN_H_
#define KVSTORE_SERVER_CLUSTER_CONTROLLER_CONTROLLER_PLAN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/kv_cluster.pb.h"

namespace kvstore {
namespace server {

// The highest replication seq `node` applied for `shard_id`
// (KvCluster.ReplicaStatus). An error means "unknown": that replica is
// ranked after every replica that answered.
using AppliedSeqFn =
    std::function<absl::StatusOr<uint64_t>(const v1::ClusterNode& node, uint32_t shard_id)>;

// The cluster map epoch `node` has applied (KvCluster.ReplicaStatus).
using MapEpochFn = std::function<absl::StatusOr<uint64_t>(const v1::ClusterNode& node)>;

// Whether `node_id` is in any shard's replicas or syncing list.
bool ServesAnyShard(const v1::ClusterMap& map, const std::string& node_id);

// Registered members by node id (sorted), as their member keys say.
using MemberSet = std::map<std::string, v1::ClusterNode>;

// A member is alive for a map when its key exists with the incarnation the
// map records for it: a new incarnation means the node restarted (and lost
// its data) or registered again after its lease lapsed (its process_id
// tells which; either way the map's roles of the old incarnation end).
bool IsAliveIn(const v1::ClusterMap& map, const MemberSet& members, const std::string& node_id);

// The first map (§19.1): one shard per member in node-id order, slots split
// evenly, shard i replicated on members i, i+1, ... (min(R, members),
// wrapping), shard_epoch 1, epoch 1. REQUIRES: members not empty.
v1::ClusterMap MakeFirstMap(const MemberSet& members, uint32_t replicas,
                            const std::string& cluster_name);

struct PlanStep {
  v1::ClusterMap map;
  std::string what;  // for the log: "node n1 failed: shard 0 primary n2 ..."
};

// Whether the member key of `node_id` is a new incarnation of the process
// `map` records (same non-empty process_id): the node registered again
// after its lease lapsed, its memory intact.
bool IsRejoin(const v1::ClusterMap& map, const MemberSet& members, const std::string& node_id);

// The next single change the map needs, in this order of priority, or
// nullopt when it needs none:
//   0. Rejoin: a node the map names that registered again with its memory
//      (IsRejoin) gets its new incarnation in its record (and draining
//      mark), every role kept; shards it leads get a new shard epoch. Its
//      roles are still true of its memory: as a backup it stayed in an
//      in-sync set only while its primary acknowledged no write it lacks
//      (a primary drops a backup from the map before acknowledging
//      without it); as a primary it served nothing after its lease
//      deadline and nobody replaced it (that is a map change which drops
//      it, and this step is written on the same map or not at all).
//   1. Dead nodes (member key gone or another incarnation) leave every
//      replicas/syncing list. A shard whose primary died gets the surviving
//      in-sync backup with the highest applied seq (ties and unknowns: list
//      order) as primary; a shard left with no in-sync replica is down
//      (empty replicas, syncing cleared: there is no primary to copy from)
//      and keeps its in-sync set in last_in_sync, each with the
//      incarnation and process_id the map knew.
//   2. RecoverDown: a down shard one of whose last_in_sync processes is a
//      member again (same node id and process_id, a new incarnation: it
//      registered again after a lease lapse, memory intact) publishing a
//      copy of the shard gets the copy with the highest applied seq (ties:
//      last_in_sync order) as its primary and the other copies back as
//      syncing (up to R; they copy the shard again, in full);
//      last_in_sync is cleared.
//   3. Migrations whose source or target shard is down: PENDING and
//      COPYING ones are dropped (logged as an error): a down shard must not
//      take part in a copy. A HANDOFF one is never handed back to its
//      source (the target may have acknowledged writes of the slots since):
//      it flips to the target when only the source is down (both shard
//      epochs bumped), and stays while the target is down (its slots answer
//      CLUSTERDOWN).
//   4. Shards below R (replicas+syncing) are filled from the live members
//      not marked draining -- members in no shard and members already
//      serving other shards alike (the refill after a failover), the one
//      with the fewest roles first (ties: node id), never twice in one
//      shard, as syncing. A down shard is never filled: an empty primary
//      would answer NOT_FOUND for acknowledged writes. It stays down
//      (CLUSTERDOWN) until step 2 or PlanAcceptLoss.
//   5. Draining marks whose member key is gone or of another incarnation
//      are dropped.
//   6. A shard with more than R in-sync replicas and none syncing (step 7
//      added one, and it is now in sync) loses the backup with the most
//      roles (TrimReplicas). Not a shard naming a draining node.
//   7. When a member holds more roles than its share (ceil(roles / members
//      not draining)) and another holds fewer, and no migration exists,
//      the idlest is added as syncing to a settled shard where the busiest
//      is a backup (BalanceReplicas). This gives a node restarted after a
//      failover (whose place the refill of step 4 gave to the others) its
//      share back; a spare member registered for add-node stays spare as
//      long as the roles fit the share without it.
//   8. Node records whose addresses changed are refreshed from member keys
//      (applied_map_epoch alone does not make a new map).
//   9. When no migration is COPYING or HANDOFF, the first PENDING one whose
//      source and target shards both have a primary becomes COPYING (shard
//      epochs unchanged). COPYING and HANDOFF are never advanced here: the
//      source primary does that (MapStore::BeginHandoff, CompleteMigration).
// None of these moves slots but step 2's flip (which removes its
// migration), so migrations stay valid across them (a failover of a source
// or target primary keeps its migration: the new primary carries it on,
// §19.9).
std::optional<PlanStep> PlanNext(const v1::ClusterMap& current, const MemberSet& members,
                                 const AppliedSeqFn& applied_seq);

// Steps 6 and 7 of PlanNext on their own (controller_plan_replicas.cc);
// the map's epoch is left to the caller.
std::optional<PlanStep> TrimReplicas(const v1::ClusterMap& current, const MemberSet& members);
std::optional<PlanStep> BalanceReplicas(const v1::ClusterMap& current, const MemberSet& members);
// Step 0 of PlanNext on its own (controller_plan_rejoin.cc).
std::optional<PlanStep> Rejoin(const v1::ClusterMap& current, const MemberSet& members);
// Step 2 of PlanNext on its own (controller_plan_down.cc).
std::optional<PlanStep> RecoverDown(const v1::ClusterMap& current, const MemberSet& members);

// Manual failover of `shard_id` to `target`, an in-sync backup alive in
// `members` (empty: the alive backup with the highest applied seq; one
// must answer). The target becomes replicas[0], the old primary its first
// backup. Errors: kNotFound for an unknown shard; kFailedPrecondition when
// the shard is down, the target is not an in-sync backup, is not alive, or
// no backup is alive; kUnavailable when `target` is empty and no alive
// backup answered. A target that already is the primary returns the map
// unchanged.
absl::StatusOr<v1::ClusterMap> PlanFailover(const v1::ClusterMap& current, const MemberSet& members,
                                            uint32_t shard_id, const std::string& target,
                                            const AppliedSeqFn& applied_seq);

// Drains `node_id` (kvctl cluster remove-node), in two map writes when it
// leads a shard. Every shard it leads gets the alive in-sync backup with
// the highest applied seq as primary (one must answer), and a live
// `node_id` stays there as the last in-sync backup: until it has applied
// that map, one-sided readers holding the older map still accept its fence
// page, so it must keep receiving every acknowledged write. It leaves every
// other shard's replicas/syncing lists at once, and it is marked draining
// (ClusterMap.draining, with its member's incarnation) so that PlanNext
// does not place it again while that incarnation lives. Called again once
// the node has applied the demoting map (Controller::RemoveNode checks),
// it leaves the shards where it is now a backup. The shards it leaves are
// refilled by later PlanNext steps. Errors: kNotFound when the node is
// neither a member nor in the map; kFailedPrecondition when a shard it
// leads has no alive in-sync backup (the removal would leave that shard
// without an in-sync replica); kUnavailable when no alive backup of such a
// shard answered ReplicaStatus. A node already drained (in no shard,
// marked) returns the map unchanged.
absl::StatusOr<v1::ClusterMap> PlanRemoveNode(const v1::ClusterMap& current,
                                              const MemberSet& members, const std::string& node_id,
                                              const AppliedSeqFn& applied_seq);

// add-node: gives the registered member `node_id` (in no shard, not
// draining) a new shard with no slots: shard_id = the highest existing + 1,
// replicas = [node_id] followed by up to R-1 backups chosen as the refill
// chooses them (alive, not draining, not node_id, fewest roles first, ties
// by node id; fewer when not enough members), shard_epoch 1; epoch + 1.
// The new shard is the last one of the returned map. The backups are in
// sync at once: the shard holds nothing. Errors: kNotFound when node_id is
// no member; kFailedPrecondition when it already is in a shard (replicas or
// syncing) or is marked draining.
absl::StatusOr<v1::ClusterMap> PlanAddNode(const v1::ClusterMap& current, const MemberSet& members,
                                           const std::string& node_id);

// accept-loss (kvctl cluster accept-loss): the operator gives up the data of
// down shard `shard_id`. The live, not draining member with the fewest
// roles (ties: node id) becomes its primary, EMPTY; last_in_sync is
// cleared; shard_epoch and epoch + 1. Later PlanNext steps add syncing
// replicas. Errors: kNotFound for an unknown shard; kFailedPrecondition
// when the shard is not down or no member can lead it.
absl::StatusOr<v1::ClusterMap> PlanAcceptLoss(const v1::ClusterMap& current,
                                              const MemberSet& members, uint32_t shard_id);

struct RebalancePlan {
  // current + the planned migrations appended (PENDING), next_migration_id
  // advanced, epoch + 1; `current` unchanged when `planned` is empty.
  v1::ClusterMap map;
  std::vector<v1::Migration> planned;
};

// rebalance: plans the migrations that leave every shard with
// floor(16384/n) or ceil(16384/n) slots (n = the number of shards; the
// shards that own the most slots, ties by shard id, keep the ceil ones).
// Over-full shards (by shard id) give their TOP `excess` slots, as
// contiguous ranges (one per slot range of theirs they cut), to under-full
// shards (by shard id, each filled before the next); each (range, source,
// target) is one Migration{id = next_migration_id++, PENDING}. A shard may
// receive several ranges. Deterministic. Errors: kFailedPrecondition when
// the map already has migrations (queued or running) or a shard is down.
absl::StatusOr<RebalancePlan> PlanRebalance(const v1::ClusterMap& current);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_CONTROLLER_CONTROLLER_PLAN_H_
