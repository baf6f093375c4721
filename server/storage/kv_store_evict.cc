// Copyright 2026 The kvstore Authors.
//
// KvStore's memory limit: eviction passes (eviction.h describes the
// policies). Entries kept are copied forward with the cleaner's move; the
// others are deleted through the write hook, so in cluster mode only the
// key's primary evicts, and the delete is replicated like any other.

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

using layout::Slot;

void KvStore::SetMaxMemory(uint64_t bytes) {
  if (bytes != 0) bytes = std::max(bytes, 2 * options_.segment_bytes);
  max_memory_.store(bytes, std::memory_order_relaxed);
  WakeCleaner();
}

uint64_t KvStore::UsedBytes() {
  absl::MutexLock lock(&alloc_mu_);
  return uint64_t{segment_count_ - free_segments_} * options_.segment_bytes;
}

// Two FIFO queues, as S3-FIFO (SOSP '23) has: clients' writes enter a
// probation queue, and only entries read there are copied into the main
// queue (the evictor's own segments). A key written once and never read
// again (a scan, a one-hit wonder) leaves after a tenth of the pool has
// been written instead of after all of it. While probation holds more
// than its share of the sealed segments it is swept first; otherwise the
// main queue is, where read entries get another round (CLOCK).
std::vector<uint32_t> KvStore::SealedByAge() {
  // A lock-free snapshot, as the cleaner's scan; EvictSegment() checks each
  // pick again once pinned.
  std::vector<std::pair<uint64_t, uint32_t>> queues[2];  // probation, main
  for (uint32_t i = 0; i < segment_count_; ++i) {
    const Segment& s = segments_[i];
    if (s.run_head != i || s.run_length != 1 || s.state.load() != SegState::kSealed ||
        s.remote_writable.load() || s.live_bytes.load() <= 0) {
      continue;
    }
    queues[s.probation.load(std::memory_order_relaxed) ? 0 : 1].emplace_back(
        s.seal_seq.load(std::memory_order_relaxed), i);
  }
  for (auto& q : queues) std::sort(q.begin(), q.end());
  constexpr size_t kProbationShare = 10;  // percent of the sealed segments
  const size_t sealed = queues[0].size() + queues[1].size();
  const bool probation_first = queues[0].size() * 100 > sealed * kProbationShare;
  std::vector<uint32_t> heads;
  heads.reserve(sealed);
  for (int q : {probation_first ? 0 : 1, probation_first ? 1 : 0}) {
    for (const auto& [seq, head] : queues[q]) heads.push_back(head);
  }
  return heads;
}

bool KvStore::EvictKey(absl::string_view key, const Slot& slot) {
  // Never wait for a key's lock: a writer that found the pool full may run
  // this pass while it holds a key lock itself. A busy key is kept.
  const layout::KeyHash locked = index_->Hash(key);
  if (!key_locks_.TryLock(locked)) return false;
  bool removed = false;
  const std::optional<Slot> now = index_->Lookup(key);
  WriteHook* hook = options_.write_hook;
  if (now && now->offset == slot.offset && now->size == slot.size &&
      (hook == nullptr || hook->MayWrite(key))) {
    auto publish = [&] {
      removed = index_->RemoveIf(key, *now);
      if (!removed) return absl::NotFoundError("key not found");
      Retire(*now);
      evicted_->Increment();
      return absl::OkStatus();
    };
    if (hook != nullptr) {
      (void)hook->Write(key, {}, publish);
    } else {
      (void)publish();
    }
  }
  key_locks_.Unlock(locked);
  return removed;
}

KvStore::EvictOutcome KvStore::EvictOrKeep(uint64_t offset, const layout::EntryHeader& h,
                                           absl::string_view key, EvictionPolicy policy,
                                           bool force) {
  const uint64_t unit = offset / layout::kEntryAlign;
  // `force`: reads are not looked at (a pool too full to copy into).
  const uint32_t reads = force ? 0 : access_->TakeOne(unit, CountsFrequency(policy));
  const bool candidate = !OnlyVolatile(policy) || layout::EntryExpiresAtMs(h) != 0;
  const Slot slot{0, offset, layout::EntryBytes(h.key_len, h.value_len)};
  if (reads == 0 && candidate && EvictKey(key, slot)) return EvictOutcome::kEvicted;
  // Kept: copied forward like a compaction move, with what is left of its
  // count (lfu: one less; lru: none, its second chance used).
  absl::StatusOr<std::optional<uint64_t>> to = MoveEntry(evict_writer_.get(), key, slot);
  if (!to.ok()) {
    // No space to copy into until emptied segments leave their grace
    // period: it stays where it is, with the count it had (EvictOnce() goes
    // on to other segments, and forces a sweep if none of them gave way).
    access_->Set(unit, reads);
    return EvictOutcome::kNoSpace;
  }
  if (to->has_value() && CountsFrequency(policy) && reads > 1) {
    access_->Set(**to / layout::kEntryAlign, reads - 1);
  }
  return EvictOutcome::kKept;
}

bool KvStore::HasReadEntries(uint32_t head, const std::vector<uint32_t>& entries) {
  const uint64_t base = uint64_t{head} * options_.segment_bytes;
  for (uint32_t unit : entries) {
    const uint64_t offset = base + uint64_t{unit} * layout::kEntryAlign;
    if (access_->Peek(offset / layout::kEntryAlign) == 0) continue;
    // Read, but is it still the published copy? A dead one keeps nothing.
    layout::EntryHeader h;
    std::memcpy(&h, pool_->data() + offset, sizeof(h));
    if (h.magic != layout::kEntryMagic || h.key_len > options_.limits.max_key_bytes ||
        offset + layout::EntryBytes(h.key_len, h.value_len) > base + options_.segment_bytes) {
      continue;
    }
    const std::string key(pool_->data() + offset + layout::kEntryHeaderBytes, h.key_len);
    const std::optional<Slot> slot = index_->Lookup(key);
    if (slot && slot->offset == offset) return true;
  }
  return false;
}

size_t KvStore::EvictSegment(uint32_t head, SweepMode mode, bool* no_space) {
  Segment& seg = segments_[head];
  seg.pins.fetch_add(1);  // seq_cst, as CompactOnce() pins
  if (seg.state.load() != SegState::kSealed || seg.run_head != head || seg.run_length != 1) {
    Unpin(head);
    return 0;
  }
  std::vector<uint32_t> entries;
  {
    absl::MutexLock lock(&seg.mu);
    entries = seg.entries;
  }
  if (mode == SweepMode::kWholeOnly && HasReadEntries(head, entries)) {
    Unpin(head);
    return 0;
  }
  const EvictionPolicy policy = eviction_policy();
  const uint64_t base = uint64_t{head} * options_.segment_bytes;
  size_t evicted = 0;
  for (uint32_t unit : entries) {
    const uint64_t offset = base + uint64_t{unit} * layout::kEntryAlign;
    layout::EntryHeader h;
    std::memcpy(&h, pool_->data() + offset, sizeof(h));
    if (h.magic != layout::kEntryMagic || h.key_len > options_.limits.max_key_bytes ||
        offset + layout::EntryBytes(h.key_len, h.value_len) > base + options_.segment_bytes) {
      continue;
    }
    const std::string key(pool_->data() + offset + layout::kEntryHeaderBytes, h.key_len);
    const std::optional<Slot> slot = index_->Lookup(key);
    if (!slot || slot->offset != offset) continue;  // dead copy
    const EvictOutcome o = EvictOrKeep(offset, h, key, policy, mode == SweepMode::kFifo);
    if (o == EvictOutcome::kNoSpace) *no_space = true;  // the rest are still tried
    evicted += o == EvictOutcome::kEvicted;
  }
  Unpin(head);
  return evicted;
}

size_t KvStore::EvictSoonestExpiring(uint64_t bytes_wanted) {
  // The expiry queue is ordered by expiry time: its head is the key that
  // expires soonest, due or not.
  size_t evicted = 0;
  uint64_t freed = 0;
  std::vector<ExpiryQueue::Record> batch;
  while (freed < bytes_wanted &&
         expiry_.PopDue(std::numeric_limits<int64_t>::max(), 256, &batch) > 0) {
    for (const ExpiryQueue::Record& r : batch) {
      const uint64_t offset = uint64_t{r.offset_units} * layout::kEntryAlign;
      if (!RecordLive(r)) continue;
      layout::EntryHeader h;
      std::memcpy(&h, pool_->data() + offset, sizeof(h));
      const std::string key(pool_->data() + offset + layout::kEntryHeaderBytes, h.key_len);
      const Slot slot{0, offset, uint64_t{r.size_units} * layout::kEntryAlign};
      if (EvictKey(key, slot)) {
        ++evicted;
        freed += slot.size;
      } else {
        expiry_.Push(r);  // busy or not ours: it still expires in time
      }
    }
    if (evicted == 0) break;  // nothing here can go: stop, do not spin
  }
  return evicted;
}

uint64_t KvStore::EvictionHeadroomBytes() const {
  return options_.segment_bytes *
         std::max<uint64_t>({2, cleaner_reserve_ + 1, segment_count_ / 32});
}

size_t KvStore::EvictOnce() {
  const EvictionPolicy policy = eviction_policy();
  if (policy == EvictionPolicy::kNoEviction) return 0;
  absl::MutexLock lock(&evict_mu_);
  const uint64_t seg_bytes = options_.segment_bytes;
  const uint64_t limit = max_memory() != 0 ? max_memory() : segment_count_ * seg_bytes;
  // Free room for writers to take new segments from between two passes,
  // and the cleaner's reserve: a pool kept exactly at its limit would make
  // every writer that fills its segment evict for itself, then wait out the
  // grace period for the space. Segments writers hold open count as used.
  const uint64_t headroom = EvictionHeadroomBytes();
  const uint64_t target = limit > headroom + 2 * seg_bytes ? limit - headroom : 2 * seg_bytes;
  // Runs already emptied come back after their grace period: they are not
  // counted, or one eviction would look like too little for 500 ms.
  auto over = [&] { return UsedBytes() - uint64_t{SegmentsAwaitingGrace()} * seg_bytes > target; };
  size_t evicted = 0;
  if (policy == EvictionPolicy::kVolatileTtl) {
    // Deleting scattered keys frees bytes, not segments; the cleaner
    // compacts them (it is under pressure by then). Aim at live bytes.
    for (int pass = 0; pass < 64 && over(); ++pass) {
      if (static_cast<uint64_t>(LiveBytes()) <= target) break;
      const size_t n = EvictSoonestExpiring(seg_bytes);
      if (n == 0) break;
      evicted += n;
      WakeCleaner();
    }
    return evicted;
  }
  // Oldest first, until under the target. Once the read entries of a
  // segment could not be copied (no free segment), the sweep takes only
  // segments nobody read: going on as before would delete the unread keys
  // of every segment while freeing none of them, since each would keep the
  // read ones it could not copy. If that is not enough, a second sweep
  // ignores reads, oldest first, so that the segment left half done (and
  // only as many more as needed) empties: CLOCK degrades to FIFO rather
  // than let a full pool refuse writes.
  for (int sweep = 0; sweep < 2 && over(); ++sweep) {
    bool no_space = false;
    for (uint32_t head : SealedByAge()) {
      const SweepMode mode = sweep == 1 ? SweepMode::kFifo
                             : no_space ? SweepMode::kWholeOnly
                                        : SweepMode::kKeepRead;
      evicted += EvictSegment(head, mode, &no_space);
      if (!over()) break;
    }
    if (!no_space) break;
  }
  return evicted;
}

}  // namespace server
}  // namespace kvstore
