// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/slot_digest.h"

#include <vector>

#include "common/protocol/layout.h"

namespace kvstore {
namespace server {

void AddRanges(const SlotBits& slots, google::protobuf::RepeatedPtrField<v1::SlotRange>* out) {
  for (uint32_t s = 0; s < cluster::kSlotCount; ++s) {
    if (!slots[s]) continue;
    uint32_t end = s;
    while (end + 1 < cluster::kSlotCount && slots[end + 1]) ++end;
    v1::SlotRange* r = out->Add();
    r->set_start(s);
    r->set_end(end);
    s = end;
  }
}

SlotBits BitsOf(const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges) {
  SlotBits bits;
  for (const v1::SlotRange& r : ranges) {
    for (uint32_t s = r.start(); s <= r.end() && s < cluster::kSlotCount; ++s) bits.set(s);
  }
  return bits;
}

SlotBits ReconcilableSlots(const cluster::ClusterMapView& map, const v1::Shard& shard) {
  SlotBits slots = BitsOf(shard.slots());
  for (const v1::Migration& m : map.proto().migrations()) {
    if (m.state() == v1::MIGRATION_PENDING) continue;
    if (m.source_shard() != shard.shard_id() && m.target_shard() != shard.shard_id()) continue;
    for (uint32_t s = m.slots().start(); s <= m.slots().end() && s < cluster::kSlotCount; ++s) {
      slots.reset(s);
    }
  }
  return slots;
}

uint64_t EntryDigest(absl::string_view entry) {
  auto view = layout::ParseEntryHeader(entry);
  if (!view.ok()) return 0;
  // splitmix64's finalizer: checksums that differ in few bits give digests
  // that differ in about half, so XORs of several rarely cancel.
  uint64_t x = view->header->checksum;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

void ForEachKeyIn(const KvStore& store, const SlotBits& slots,
                  absl::FunctionRef<void(const std::string& key)> fn) {
  uint64_t cursor = 0;
  do {
    std::vector<std::string> keys;
    cursor = store.Scan(cursor, 512, "", &keys);
    for (const std::string& key : keys) {
      if (slots[cluster::KeySlot(key)]) fn(key);
    }
  } while (cursor != 0);
}

absl::flat_hash_map<uint32_t, uint64_t> DigestSlots(const KvStore& store, const SlotBits& slots) {
  absl::flat_hash_map<uint32_t, uint64_t> digests;
  ForEachKeyIn(store, slots, [&](const std::string& key) {
    absl::StatusOr<std::string> entry = store.CopyEntry(key);
    if (!entry.ok()) return;  // deleted meanwhile
    digests[cluster::KeySlot(key)] ^= EntryDigest(*entry);
  });
  return digests;
}

SlotBits DifferingSlots(const KvStore& store, const SlotBits& slots,
                        const absl::flat_hash_map<uint32_t, uint64_t>& theirs) {
  const absl::flat_hash_map<uint32_t, uint64_t> ours = DigestSlots(store, slots);
  SlotBits differ;
  for (uint32_t s = 0; s < cluster::kSlotCount; ++s) {
    if (!slots[s]) continue;
    auto o = ours.find(s);
    auto t = theirs.find(s);
    const bool same =
        o == ours.end() ? t == theirs.end() : t != theirs.end() && t->second == o->second;
    if (!same) differ.set(s);
  }
  return differ;
}

}  // namespace server
}  // namespace kvstore
