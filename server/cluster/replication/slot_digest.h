// Copyright 2026 The kvstore Authors.
//
// Per-slot digests of a store's entries, for a new primary that makes its
// in-sync backups equal to itself (ShardReconciler, the backup's
// ReplicaInstaller::ShardDigest) and for a joiner's delta resync (SyncShard):
// two replicas compare one number per slot and exchange entries only for
// the slots whose numbers differ.
//
// A slot's digest is the XOR, over its entries, of a mix of each entry's
// own checksum (layout.h: it covers version, key and value). A backup
// installs the primary's entry byte for byte, so equal entries give equal
// digests on every node; XOR makes the order of the scan irrelevant.
//
// Thread safety: functions of a thread-safe store; a key written during a
// scan may be seen before or after the write.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_SLOT_DIGEST_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_SLOT_DIGEST_H_

#include <bitset>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/slots.h"
#include "proto/kv_cluster.pb.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

using SlotBits = std::bitset<cluster::kSlotCount>;

// The slot ranges of `slots` (ascending, maximal runs) and back; ends
// beyond the last slot are clipped.
void AddRanges(const SlotBits& slots, google::protobuf::RepeatedPtrField<v1::SlotRange>* out);
SlotBits BitsOf(const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges);

// The slots of `shard` whose keys a new primary makes equal on its backups:
// the ones it owns in `map`, except those of every migration out of it or
// into it that started (not PENDING). A node may be a replica of both
// shards of a migration, and then one store holds both sides of those
// slots: the target may have acknowledged writes of them (after the
// handoff) that the source lacks, and the source writes the target has not
// copied yet, so neither side's primary may delete the other's keys.
SlotBits ReconcilableSlots(const cluster::ClusterMapView& map, const v1::Shard& shard);

// The digest one entry contributes to its slot's.
uint64_t EntryDigest(absl::string_view entry);

// Calls `fn` with every key of `store` whose slot is in `slots`.
void ForEachKeyIn(const KvStore& store, const SlotBits& slots,
                  absl::FunctionRef<void(const std::string& key)> fn);

// The digest of every slot of `slots` that holds an entry in `store` (a slot
// without one is absent, whatever its XOR would be).
absl::flat_hash_map<uint32_t, uint64_t> DigestSlots(const KvStore& store, const SlotBits& slots);

// The slots of `slots` whose digest in `store` differs from `theirs` (a
// slot, in DigestSlots' form, only one side holds entries of differs).
// What a joiner's delta resync streams.
SlotBits DifferingSlots(const KvStore& store, const SlotBits& slots,
                        const absl::flat_hash_map<uint32_t, uint64_t>& theirs);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_SLOT_DIGEST_H_
