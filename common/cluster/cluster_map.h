// Copyright 2026 The kvstore Authors.
//
// ClusterMapView: a validated, indexed, immutable view of one ClusterMap
// (proto/kv_cluster.proto), the one description of who serves which slot.
// Servers, the controller, the RESP layer and the client library all route
// through it, so they cannot disagree on how a map is read.
//
// Build() checks the map: every slot in exactly one shard, ranges in
// [0, 16383] with start <= end, unique shard ids, at least one replica per
// shard unless the shard is down, every replica and syncing node named in
// `nodes`, no node twice in one shard; every migration with a known state,
// unique id, distinct existing source and target shards, its slots all owned
// by its source shard, no slot in two migrations, and at most one migration
// COPYING or HANDOFF. kInvalidArgument names the first problem.
//
// Thread safety: immutable after Build(); share it as
// std::shared_ptr<const ClusterMapView> across threads.

#ifndef KVSTORE_COMMON_CLUSTER_CLUSTER_MAP_H_
#define KVSTORE_COMMON_CLUSTER_CLUSTER_MAP_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster/slots.h"
#include "proto/kv_cluster.pb.h"

namespace kvstore {
namespace cluster {

class ClusterMapView {
 public:
  static absl::StatusOr<std::shared_ptr<const ClusterMapView>> Build(v1::ClusterMap map);

  const v1::ClusterMap& proto() const { return map_; }
  uint64_t epoch() const { return map_.epoch(); }

  // The shard owning `slot` (< kSlotCount), or nullptr when no shard does
  // (only in a map under construction; Build() refuses gaps).
  const v1::Shard* ShardForSlot(uint32_t slot) const;
  const v1::Shard* ShardForKey(absl::string_view key) const { return ShardForSlot(KeySlot(key)); }
  const v1::Shard* ShardById(uint32_t shard_id) const;
  // The node's description, or nullptr when the map does not name it.
  const v1::ClusterNode* Node(absl::string_view node_id) const;
  // The COPYING or HANDOFF migration whose slots cover `slot`, or nullptr
  // (none, or only a PENDING one: it changes nothing yet).
  const v1::Migration* ActiveMigrationForSlot(uint32_t slot) const;
  // The migration with `id`, or nullptr.
  const v1::Migration* MigrationById(uint32_t id) const;
  // The primary of `shard` (replicas[0]), or nullptr when the shard is down.
  const v1::ClusterNode* Primary(const v1::Shard& shard) const;
  // Shards in which `node_id` is the primary / an in-sync backup / syncing.
  std::vector<const v1::Shard*> ShardsLedBy(absl::string_view node_id) const;
  std::vector<const v1::Shard*> ShardsBackedBy(absl::string_view node_id) const;
  std::vector<const v1::Shard*> ShardsSyncingOn(absl::string_view node_id) const;

 private:
  explicit ClusterMapView(v1::ClusterMap map) : map_(std::move(map)) {}
  // Checks map_.migrations (after the slots are indexed) and finds the
  // running one.
  absl::Status IndexMigrations();

  v1::ClusterMap map_;
  // slot -> index into map_.shards(), -1 for none. 32 KiB: one array lookup
  // per keyed command.
  std::array<int16_t, kSlotCount> slot_to_shard_;
  absl::flat_hash_map<std::string, int> node_index_;
  // Index into map_.migrations() of the COPYING/HANDOFF one, -1 for none.
  int active_migration_ = -1;
};

// Slot ranges [start, end] covering 0..16383 split as evenly as possible in
// `shards` parts, in order (shard i gets the i-th range), as a new cluster's
// first map assigns them. REQUIRES: 1 <= shards <= kSlotCount.
std::vector<v1::SlotRange> EvenSlotRanges(uint32_t shards);

// Moves the slots of `range` from `from` to `to` (a migration's flip):
// `from`'s ranges lose them (split where needed), `to`'s gain them, sorted
// and with adjacent ranges merged. Slots of `range` that `from` does not own
// are still added to `to`.
void MoveSlots(const v1::SlotRange& range, v1::Shard* from, v1::Shard* to);

// The number of slots `shard` owns.
uint32_t SlotCountOf(const v1::Shard& shard);

// "0-5460,10923-16383": the ranges of a shard, for logs and kvctl.
std::string FormatSlotRanges(const v1::Shard& shard);

// Brings shard.syncing_since in line with shard.syncing before the shard is
// written: a syncing node without an entry gets the shard's (already
// bumped) shard_epoch — the map that adds it — and entries of nodes no
// longer syncing go, so a node removed and added again later starts anew.
// The controller (which adds syncing nodes) calls it on every map it writes.
void StampSyncingSince(v1::Shard* shard);
// Only the second half: entries of nodes no longer syncing go. The
// primary's edits (which never add a syncing node) call it, so that a node
// removed and added again later starts anew.
void DropStaleSyncingSince(v1::Shard* shard);

}  // namespace cluster
}  // namespace kvstore

#endif  // KVSTORE_COMMON_CLUSTER_CLUSTER_MAP_H_
