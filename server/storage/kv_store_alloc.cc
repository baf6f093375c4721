// Copyright 2026 The kvstore Authors.
//
// KvStore's allocation of segment runs: the first-fit search, and what a
// caller does when none is free (reclaim what is due, wait for what is
// coming due if it may, or refuse naming the cause). Split from kv_store.cc
// by job; the segment states are described in kv_store.h.

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

std::optional<Chunk> KvStore::TryAllocateRun(uint32_t n, uint32_t keep) {
  absl::MutexLock lock(&alloc_mu_);
  if (free_segments_ < n + keep) return std::nullopt;
  // Address-ordered first fit: the lowest free run. A freed segment has
  // already waited out the grace period that protects one-sided readers
  // (and a reader of a reused location fails its checksum and key checks),
  // so reusing it soon is safe; and it keeps the segments in use at the low
  // end of the arena, in the CPU's caches and TLB, as malloc keeps reusing
  // freed memory. A hint rotating through the arena instead made every
  // write of a small working set in a large pool touch memory untouched for
  // a whole lap of it: pipelined 4 KiB SETs into an 8 GiB pool spent half
  // their CPU in the copy into the entry.
  for (uint32_t start = 0; start + n <= segment_count_; ++start) {
    // Segments enter and leave kFree only under alloc_mu_, so the ones
    // found free here stay free until they are marked below.
    uint32_t len = 0;
    while (len < n && segments_[start + len].state.load() == SegState::kFree) ++len;
    if (len < n) continue;
    for (uint32_t i = start; i < start + n; ++i) {
      segments_[i].run_head = start;
      segments_[i].state.store(SegState::kOpen);
    }
    segments_[start].run_length = n;
    segments_[start].live_bytes.store(0);
    // Counts left by the run's previous entries must not keep new ones.
    access_->Clear(uint64_t{start} * options_.segment_bytes / layout::kEntryAlign,
                   uint64_t{n} * options_.segment_bytes / layout::kEntryAlign);
    free_segments_ -= n;
    segments_touched_ = std::max(segments_touched_, start + n);
    return Chunk{uint64_t{start} * options_.segment_bytes, uint64_t{n} * options_.segment_bytes,
                 start, n};
  }
  return std::nullopt;
}

absl::Status KvStore::CheckMemoryLimit(uint32_t n) {
  const uint64_t limit = max_memory();
  if (limit == 0) return absl::OkStatus();
  if (eviction_policy() != EvictionPolicy::kNoEviction) {
    // Past the limit: evict before taking more (Redis evicts before it runs
    // a command). The cleaner usually has already, ahead of writers.
    if (UsedBytes() + uint64_t{n} * options_.segment_bytes > limit) EvictOnce();
    return absl::OkStatus();
  }
  // noeviction: live bytes, not segments, are held against the limit, so
  // that dead space the cleaner has not compacted yet never refuses a write.
  // Checked when a writer takes a segment, so live bytes may pass the limit
  // by what writers' open segments still hold.
  if (static_cast<uint64_t>(LiveBytes()) >= limit) {
    pool_full_->Increment();
    return absl::ResourceExhaustedError(
        "OOM command not allowed when used memory > 'maxmemory' (policy noeviction; "
        "delete keys, raise --maxmemory or choose an evicting --maxmemory_policy)");
  }
  return absl::OkStatus();
}

std::optional<absl::Duration> KvStore::NextReclaimDue() {
  absl::MutexLock lock(&reclaim_mu_);
  std::optional<absl::Duration> due;
  // Nearly in order (pinned runs are re-queued at the back), so look at all.
  for (const PendingFree& p : pending_) due = due ? std::min(*due, p.ready) : p.ready;
  return due;
}

std::optional<absl::Duration> KvStore::SpaceReturnsIn() {
  {
    absl::MutexLock lock(&alloc_mu_);
    if (free_segments_ > cleaner_reserve_) return absl::ZeroDuration();
  }
  const std::optional<absl::Duration> due = NextReclaimDue();
  if (!due) return std::nullopt;
  return std::max(*due - clock_.Steady(), absl::ZeroDuration());
}

absl::StatusOr<Chunk> KvStore::AllocateRun(uint32_t n, bool for_cleaner,
                                           absl::Duration space_wait) {
  const uint32_t keep = for_cleaner ? 0 : cleaner_reserve_;
  if (!for_cleaner) KV_RETURN_IF_ERROR(CheckMemoryLimit(n));
  // The wait is measured and slept on the store's clock, which decides when
  // queued runs are due: a test's fake clock moves when slept on, so the
  // caller is never held back in real time behind a clock that stands still.
  const absl::Duration wait_until = clock_.Steady() + space_wait;
  for (;;) {
    if (std::optional<Chunk> c = TryAllocateRun(n, keep)) return *c;
    // Runs whose grace period has passed may still be queued (the cleaner
    // frees them every cleaner_interval): free them here and look again.
    if (ReclaimReady() > 0) {
      if (std::optional<Chunk> c = TryAllocateRun(n, keep)) return *c;
    }
    // An evicting policy never refuses a write for space: evict here (the
    // cleaner usually has, ahead of writers). What it empties is free after
    // the grace period, which a caller allowed to wait waits for below, and
    // a RESP loop holds the write back for (SpaceReturnsIn()).
    if (!for_cleaner && eviction_policy() != EvictionPolicy::kNoEviction && EvictOnce() > 0) {
      if (std::optional<Chunk> c = TryAllocateRun(n, keep)) return *c;
    }
    if (for_cleaner || space_wait <= absl::ZeroDuration()) break;
    const std::optional<absl::Duration> due = NextReclaimDue();
    const absl::Duration now = clock_.Steady();
    if (!due || *due > wait_until || now >= wait_until) break;
    // At least 100 us, so that a run due now but still pinned (re-queued
    // 10 ms later) is not polled in a tight loop.
    clock_.Sleep(std::max(*due - now, absl::Microseconds(100)));
    space_waits_->Increment();
  }
  pool_full_->Increment();
  // The cleaner is the one who can make room by compacting; it is never
  // woken by its own failure (it is already running).
  if (!for_cleaner) WakeCleaner();
  // Read after alloc_mu_ is released: the two locks are never nested.
  // Say what holds the emptied runs: a pin (a reply still being sent to a
  // slow reader, an unfinished write) is not the grace period's doing.
  size_t waiting, pinned = 0;
  {
    absl::MutexLock lock(&reclaim_mu_);
    waiting = pending_.size();
    for (const auto& p : pending_) pinned += segments_[p.head].pins.load() != 0;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "pool full: no run of ", n, " free segment(s) of ", options_.segment_bytes, " bytes in ",
      segment_count_, " (", waiting, " emptied run(s) await reuse: ", pinned,
      " still pinned by readers or unfinished writes, e.g. replies queued for slow clients; ",
      waiting - pinned, " within the ", absl::FormatDuration(options_.grace_period),
      " grace period); delete or overwrite keys to free space"));
}

}  // namespace server
}  // namespace kvstore
