// Copyright 2026 The kvstore Authors.

#include "server/cluster/migration/slot_scan.h"

#include <utility>
#include <vector>

#include "glog/logging.h"

namespace kvstore {
namespace server {

SlotSet SlotsOf(const v1::SlotRange& range) {
  SlotSet slots;
  for (uint32_t s = range.start(); s <= range.end() && s < cluster::kSlotCount; ++s) slots.set(s);
  return slots;
}

SlotSet SlotsOf(const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges) {
  SlotSet slots;
  for (const v1::SlotRange& r : ranges) slots |= SlotsOf(r);
  return slots;
}

SlotSet ReplicaSlots(const cluster::ClusterMapView& map, const v1::Shard& shard) {
  SlotSet slots = SlotsOf(shard.slots());
  for (const v1::Migration& m : map.proto().migrations()) {
    if (m.target_shard() != shard.shard_id()) continue;
    if (m.state() == v1::MIGRATION_COPYING || m.state() == v1::MIGRATION_HANDOFF) {
      slots |= SlotsOf(m.slots());
    }
  }
  return slots;
}

absl::Status ScanSlots(KvStore& store, Replicator& replicator, const SlotSet& slots,
                       absl::FunctionRef<absl::Status(std::string entry)> emit,
                       absl::FunctionRef<bool()> cancelled) {
  std::vector<std::string> keys;
  uint64_t cursor = 0;
  do {
    if (cancelled()) return absl::CancelledError("the copy was cancelled");
    keys.clear();
    cursor = store.Scan(cursor, 256, "", &keys);
    for (const std::string& key : keys) {
      if (!slots.test(cluster::KeySlot(key))) continue;
      absl::StatusOr<std::string> entry;
      {
        // Never between a write's forward and its publish: a write the
        // receiver got is either in the copy or newer than it.
        HandoffLock stripe(&replicator.StripeOf(key));
        entry = store.CopyEntry(key);
      }
      if (absl::IsNotFound(entry.status())) continue;  // deleted meanwhile
      if (!entry.ok()) {
        // Only an entry its lease holder overwrote after the commit fails
        // its check under the stripe lock; readers get kDataLoss for it too.
        LOG(WARNING) << "not copying a " << key.size() << "-byte key: " << entry.status();
        continue;
      }
      if (absl::Status s = emit(*std::move(entry)); !s.ok()) return s;
    }
  } while (cursor != 0);
  return absl::OkStatus();
}

}  // namespace server
}  // namespace kvstore
