// Copyright 2026 The kvstore Authors.
//
// ScanSlots: every entry of a set of slots in a primary's store, each
// copied under its key's stripe lock (Replicator::StripeOf), so a copy is
// never taken between a write's forward and its publish: whoever received
// the forwarded write holds either the copied entry or a newer one. Shared
// by SyncShard (a joiner's copy, §19.4) and the migration driver's copy
// (§19.9).
//
// Thread safety: runs on the caller's thread; the store and the replicator
// are thread-safe.

#ifndef KVSTORE_SERVER_CLUSTER_MIGRATION_SLOT_SCAN_H_
#define KVSTORE_SERVER_CLUSTER_MIGRATION_SLOT_SCAN_H_

#include <bitset>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/slots.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/replication/replicator.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

using SlotSet = std::bitset<cluster::kSlotCount>;

// The slots of `ranges` (ends beyond the last slot are clipped).
SlotSet SlotsOf(const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges);
SlotSet SlotsOf(const v1::SlotRange& range);

// The slots every replica of `shard` must hold in `map`: those it owns and
// those of every migration into it that is COPYING or HANDOFF (its primary
// imported them, and they become the shard's at the flip without another
// copy). What a joiner's copy (SyncShard) streams.
SlotSet ReplicaSlots(const cluster::ClusterMapView& map, const v1::Shard& shard);

// Calls `emit` with every entry of `slots` in `store`, in scan order; a key
// deleted meanwhile is skipped, as is an entry that fails its check (logged).
// Stops with the first error of `emit`, or kCancelled once `cancelled`
// returns true (asked between scan steps).
absl::Status ScanSlots(KvStore& store, Replicator& replicator, const SlotSet& slots,
                       absl::FunctionRef<absl::Status(std::string entry)> emit,
                       absl::FunctionRef<bool()> cancelled);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MIGRATION_SLOT_SCAN_H_
