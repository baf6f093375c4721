// Copyright 2026 The kvstore Authors.
//
// Map-history checker: invariants over the sequence of cluster maps etcd
// held under the map key during a run (every revision, oldest first; see
// map_history_reader.h). A per-key history check sees only what clients
// saw; these invariants catch a map change that could lose data before any
// read does (a promotion of a replica that never had the data, a slot handed
// to a shard that never copied it).
//
// Within one map:
//   - every slot 0..16383 is owned by exactly one shard; shard ids unique;
//   - no node twice in one shard; every named node has a record in `nodes`;
//   - a DOWN shard (no replicas) has no syncing replica; `last_in_sync` is
//     set only on a DOWN shard;
//   - migrations: ids unique and below next_migration_id, source != target,
//     both shards exist, the slots belong to the source, at most one is
//     COPYING or HANDOFF.
// From one map to the next:
//   - the epoch strictly increases; cluster name and R never change;
//     next_migration_id never decreases; a shard never disappears;
//   - a shard's shard_epoch never decreases, and increases whenever its
//     in-sync list (members or order) or its slots change;
//   - a new primary was an in-sync replica of the shard in the previous map,
//     as the same process (process_id, else incarnation): a restarted,
//     empty process is not the replica it replaced;
//   - a node joins the in-sync set only from the shard's syncing list, as
//     the same process (exception: a shard that first appears, with no
//     slots: add-node's empty shard);
//   - a replica that stays in sync stays the same process;
//   - a shard going DOWN records its last in-sync set exactly (node ids and
//     processes); a DOWN shard keeps it; a DOWN shard comes back only with
//     one of those processes as its sole in-sync replica, or — for a shard in
//     `accepted_loss` only — with any single primary (kvctl cluster
//     accept-loss);
//   - an in-sync set below min_insync (not DOWN) lost only nodes that left
//     the map's node records (they died) or are draining (remove-node): a
//     primary never drops a live backup below the floor;
//   - a slot changes shard only by the flip of a HANDOFF migration of the
//     previous map from that source to that target; a migration's slots,
//     source and target never change, its state only moves forward
//     (PENDING, COPYING, HANDOFF), a new one is PENDING with an id not used
//     before, and one that leaves in HANDOFF has flipped;
//   - a draining node is not placed in a shard it was not in.
//
// Thread safety: pure functions.

#ifndef KVSTORE_TESTS_JEPSEN_MAP_HISTORY_H_
#define KVSTORE_TESTS_JEPSEN_MAP_HISTORY_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "proto/kv_cluster.pb.h"

namespace kvstore {
namespace jepsen {

// One version of the map key: the etcd mod_revision it was written at.
struct MapRevision {
  int64_t revision = 0;
  v1::ClusterMap map;
};

struct MapHistoryOptions {
  // The in-sync floor (--min_insync_replicas with its default applied).
  uint32_t min_insync = 1;
  // Shards an operator gave up with accept-loss during the run.
  std::set<uint32_t> accepted_loss;
};

struct MapHistoryResult {
  size_t maps = 0;
  // One line each, naming the revisions and epochs involved.
  std::vector<std::string> violations;
  bool ok() const { return violations.empty(); }
  // "N maps, epochs a..b: ok" or the first `max` violations.
  std::string Text(size_t max) const;
};

// `maps` oldest first. An empty history passes (nothing to check).
MapHistoryResult CheckMapHistory(const std::vector<MapRevision>& maps,
                                 const MapHistoryOptions& options);

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_MAP_HISTORY_H_
