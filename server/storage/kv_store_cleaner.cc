// Copyright 2026 The kvstore Authors.
//
// KvStore's space reclamation: the grace-period queue, the cleaner thread and
// compaction. Split from kv_store.cc by job; the segment states and the
// reclamation rules are described in kv_store.h.
//
// Why a grace period: a client's one-sided GET reads a slot word and then
// the entry it names, in two READs the server never sees. An entry that
// stops being live may still be under such a READ, so its run is freed only
// grace_period later; clients discard a GET whose READs did not finish within
// half of it. Local readers also pin the run while they use an entry, and a
// pinned run is not freed even after its grace period.

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

using layout::Slot;

void KvStore::MaybeScheduleReclaim(uint32_t head) {
  Segment& s = segments_[head];
  if (s.live_bytes.load(std::memory_order_acquire) != 0) return;
  // Seal(), the last Retire() and ReclaimReady() may get here at once; the
  // compare-exchange lets exactly one of them queue the run. An open run is
  // not queued: its writer may still commit into it, and Seal() comes back.
  SegState expected = SegState::kSealed;
  if (!s.state.compare_exchange_strong(expected, SegState::kReclaiming)) return;
  absl::MutexLock lock(&reclaim_mu_);
  pending_.push_back({head, clock_.Steady() + options_.grace_period});
}

uint32_t KvStore::SegmentsAwaitingGrace() {
  // A queued run's length is fixed until ReclaimReady() pops it.
  absl::MutexLock lock(&reclaim_mu_);
  uint32_t n = 0;
  for (const PendingFree& p : pending_) n += segments_[p.head].run_length;
  return n;
}

// Called by the cleaner and by any allocation that found no free run, so it
// may run on several threads at once: each queued run is popped by one.
size_t KvStore::ReclaimReady() {
  // Collect under reclaim_mu_, free after: reclaim_mu_ is a leaf, and freeing
  // takes other locks. The queue is in ready order except for pinned runs
  // re-queued below, which may wait behind a later run: longer, never less.
  std::vector<uint32_t> ready;
  {
    absl::MutexLock lock(&reclaim_mu_);
    const absl::Duration now = clock_.Steady();
    while (!pending_.empty() && pending_.front().ready <= now) {
      ready.push_back(pending_.front().head);
      pending_.pop_front();
    }
  }
  size_t freed = 0;
  for (uint32_t head : ready) {
    Segment& s = segments_[head];
    if (s.pins.load() != 0) {  // seq_cst: pairs with the pin in CompactOnce()
      // A local reader or an outstanding reservation still uses it. Pins are
      // short-lived (a reply being sent, an entry being filled, a compaction
      // pass), so look again soon rather than a whole grace period later.
      absl::MutexLock lock(&reclaim_mu_);
      pending_.push_back({head, clock_.Steady() + absl::Milliseconds(10)});
      continue;
    }
    if (s.live_bytes.load(std::memory_order_acquire) != 0) {
      // A reservation made before the seal was committed after it. Back to
      // sealed; whoever brings live bytes to zero next schedules it again.
      s.state.store(SegState::kSealed, std::memory_order_release);
      MaybeScheduleReclaim(head);
      continue;
    }
    // Nothing in the run is live or pinned: its entry list is history, and
    // shrink_to_fit() returns its memory (a run of small entries may have
    // recorded many).
    {
      absl::MutexLock lock(&s.mu);
      s.entries.clear();
      s.entries.shrink_to_fit();
    }
    // Under alloc_mu_, like every change to or from kFree: AllocateRun()
    // relies on free segments staying free while it holds the lock. Every
    // segment becomes the head of its own empty run again.
    absl::MutexLock lock(&alloc_mu_);
    const uint32_t n = s.run_length;
    for (uint32_t i = head; i < head + n; ++i) {
      segments_[i].run_head = i;
      segments_[i].state.store(SegState::kFree, std::memory_order_release);
    }
    s.run_length = 0;
    // ReleaseChunk() has cleared it already for a lease chunk; a reused head
    // must never start out flagged.
    s.remote_writable.store(false);
    free_segments_ += n;
    reclaimed_->Increment();
    ++freed;
  }
  return freed;
}

void KvStore::RunCleanerOnce() {
  // Reclaim first: the segments it frees count as free when CompactOnce()
  // judges the pressure, and give it room to copy into.
  ReclaimReady();
  // Over the memory limit: evict (which empties the oldest segments) before
  // compacting, which would only copy what eviction is about to drop.
  EvictOnce();
  CompactOnce();
  cleaner_passes_->Increment();
}

// Picks the sparsest sealed single-segment runs, copies each one's live
// entries into the cleaner writer's segments and swings their slots over, so
// that the old run's live count can drop to 0 and the run be freed a grace
// period later.
// Multi-segment runs (one large entry, or a lease chunk longer than a
// segment) are left alone: they are freed when all their entries are dead.
// One long function on purpose: the candidate's pin, its entry walk and the
// early return on a full pool share state that a split would have to pass
// around (and the pin must be dropped on every path).
void KvStore::CompactOnce() {
  // Serialises passes (the cleaner thread and RunCleanerOnce() callers) and
  // guards the cleaner's writer.
  absl::MutexLock cleaner_lock(&cleaner_mu_);
  const uint64_t seg_bytes = options_.segment_bytes;
  uint32_t free_now;
  {
    absl::MutexLock lock(&alloc_mu_);
    free_now = free_segments_;
  }
  // Emptied runs waiting out their grace period count as free: copying
  // cannot free space sooner, since a compacted segment goes through the same
  // grace period. Counting them out made a steady stream of 1 MiB overwrites
  // (46 % of the pool live) look like a full pool: the cleaner copied
  // 95 %-live segments, moving 28 GB while clients wrote 15 GB, and the
  // copies used the free segments that writes needed (60 % refused).
  free_now += SegmentsAwaitingGrace();
  // Under pressure (few free segments) compact harder: more segments per
  // pass, and fuller ones (any segment with dead bytes frees something).
  const bool pressed = free_now < std::max<uint32_t>(4 * cleaner_reserve_, segment_count_ / 8);
  // Plenty of free space: nothing to gain from copying (see
  // KvStoreOptions::compact_when_free_below).
  if (!pressed && free_now >= segment_count_ * options_.compact_when_free_below) return;
  // Under an evicting policy a full pool is eviction's to empty, oldest
  // segment first, dead bytes dropped at no cost. Copying nearly full
  // segments as well only competes with it: at a limit reached through
  // overwrites (95 % of the pool live) the cleaner moved 7 entries per SET
  // and took the free segments the writes needed. So only segments at
  // least half dead, where a copy frees more than it takes, are compacted.
  const bool evicting = eviction_policy() != EvictionPolicy::kNoEviction;
  const double fraction =
      pressed ? (evicting ? std::min(0.5, options_.clean_below_live_fraction) : 0.95)
              : options_.clean_below_live_fraction;
  const size_t max_segments = pressed ? 64 : 4;
  const int64_t threshold = static_cast<int64_t>(seg_bytes * fraction);
  // Compact a few of the sparsest sealed single segments per pass.
  // The scan reads without locks: it is a snapshot, and each candidate is
  // checked again once pinned. Sparsest first: the most space freed per byte
  // copied.
  std::vector<std::pair<int64_t, uint32_t>> candidates;
  for (uint32_t i = 0; i < segment_count_; ++i) {
    Segment& s = segments_[i];
    if (s.run_head != i || s.run_length != 1 || s.state.load() != SegState::kSealed) continue;
    const int64_t live = s.live_bytes.load();
    if (live > 0 && live < threshold) candidates.emplace_back(live, i);
  }
  std::sort(candidates.begin(), candidates.end());
  if (candidates.size() > max_segments) candidates.resize(max_segments);
  for (const auto& [live, head] : candidates) {
    // Pin first, then confirm the segment is still sealed: a writer's
    // allocation may reclaim segments concurrently, and ReclaimReady() frees
    // only unpinned ones, after marking them kReclaiming. (seq_cst on both
    // sides: the pin and the state are separate words.)
    Segment& seg = segments_[head];
    seg.pins.fetch_add(1);
    if (seg.state.load() != SegState::kSealed || seg.run_head != head || seg.run_length != 1) {
      Unpin(head);
      continue;
    }
    std::vector<uint32_t> entries;
    {
      absl::MutexLock lock(&seg.mu);
      entries = seg.entries;
    }
    for (uint32_t unit : entries) {
      const uint64_t offset = uint64_t{head} * seg_bytes + uint64_t{unit} * layout::kEntryAlign;
      layout::EntryHeader h;
      std::memcpy(&h, pool_->data() + offset, sizeof(h));
      // Committed entries passed validation, but check the lengths anyway
      // before hashing a key out of pool memory.
      if (h.magic != layout::kEntryMagic || h.key_len > options_.limits.max_key_bytes ||
          offset + layout::EntryBytes(h.key_len, h.value_len) > (uint64_t{head} + 1) * seg_bytes) {
        continue;
      }
      absl::string_view key(pool_->data() + offset + layout::kEntryHeaderBytes, h.key_len);
      // Only the copy the index names is live; anything else in the list was
      // overwritten, deleted, already moved or never published.
      std::optional<Slot> slot = index_->Lookup(key);
      if (!slot || slot->offset != offset) continue;  // dead copy
      if (slot->size != layout::EntryBytes(h.key_len, h.value_len)) continue;
      // The cleaner's writer may take the reserved segments: without them a
      // pool whose every segment holds some live data could not be compacted.
      if (!MoveEntry(cleaner_writer_.get(), key, *slot).ok()) {  // pool full: next pass
        Unpin(head);
        return;
      }
    }
    Unpin(head);
  }
}

absl::StatusOr<std::optional<uint64_t>> KvStore::MoveEntry(Writer* writer, absl::string_view key,
                                                           const Slot& slot) {
  layout::EntryHeader h;
  std::memcpy(&h, pool_->data() + slot.offset, sizeof(h));
  KV_ASSIGN_OR_RETURN(Reservation r, writer->Reserve(h.key_len, h.value_len));
  // A byte copy: same header, version and checksum, so a client that
  // reads the entry at its new offset verifies it as before. Not through
  // Commit(): the copy is published only if the slot still names the old
  // one (ReplaceIf below), which Commit()'s unconditional Upsert() cannot
  // express. As in Commit(), the bytes count as live before the slot can
  // point at them.
  std::memcpy(r.ptr, pool_->data() + slot.offset, slot.size);
  const uint32_t new_head = segments_[SegmentOf(r.offset)].run_head;
  segments_[new_head].live_bytes.fetch_add(static_cast<int64_t>(r.size));
  {
    absl::MutexLock lock(&segments_[new_head].mu);
    segments_[new_head].entries.push_back(static_cast<uint32_t>(
        (r.offset - uint64_t{new_head} * options_.segment_bytes) / layout::kEntryAlign));
  }
  std::optional<uint64_t> moved;
  // The old copy stays readable for the grace period after the swap, for
  // readers that loaded the old slot word.
  if (index_->ReplaceIf(key, slot, Slot{0, r.offset, r.size})) {
    // The copy expires where the original did; the original's record
    // goes stale (it no longer names the published entry).
    if (const uint64_t at = layout::EntryExpiresAtMs(h); at != 0) {
      volatile_keys_.fetch_add(1, std::memory_order_relaxed);  // the copy; Retire drops the old
      expiry_.Push({at, static_cast<uint32_t>(r.offset / layout::kEntryAlign),
                    static_cast<uint32_t>(r.size / layout::kEntryAlign)});
    }
    Retire(slot);
    moved_entries_->Increment();
    moved_bytes_->Increment(r.size);
    moved = r.offset;
  } else {
    Retire(Slot{0, r.offset, r.size}, /*published=*/false);  // lost a race with a writer
  }
  // Whether or not the copy won: a lost copy is dead space like any
  // retired entry.
  writer->Done(r);
  return moved;
}

// absl::Mutex re-evaluates the cleaner's Await condition when wake_mu_ is
// released, so the cleaner starts a pass at once instead of at its interval.
void KvStore::WakeCleaner() {
  absl::MutexLock lock(&wake_mu_);
  wake_ = true;
}

void KvStore::CleanerLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&wake_mu_);
      auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(wake_mu_) { return wake_ || stopping_; };
      wake_mu_.AwaitWithTimeout(absl::Condition(&woken), options_.cleaner_interval);
      if (stopping_) return;
      // Cleared before the pass, so a wake-up that arrives during the pass
      // runs another one right after it.
      wake_ = false;
    }
    // Outside wake_mu_: an allocation that wakes the cleaner never waits for
    // a pass.
    RunCleanerOnce();
  }
}

}  // namespace server
}  // namespace kvstore
