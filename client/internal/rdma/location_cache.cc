// Copyright 2026 The kvstore Authors.
//
// A sequence lock per cell rather than a mutex: the GET hit path reads a
// cell on every call, and a lookup must not wait for, or make wait, another
// thread. A torn read is retried never: it is reported as a miss, which
// only costs the two-READ path.

#include "client/internal/rdma/location_cache.h"

#include <algorithm>

#include "common/protocol/layout.h"
#include "xxhash.h"

namespace kvstore {
namespace client {

namespace {
constexpr size_t kMaxCells = size_t{1} << 24;
constexpr int kSizeBits = layout::kSizeBits;  // sizes in kEntryAlign units, as in a slot word
}  // namespace

LocationCache::LocationCache(size_t capacity) {
  if (capacity == 0) return;
  size_t n = 1;
  while (n < std::min(capacity, kMaxCells)) n <<= 1;
  cells_ = std::make_unique<Cell[]>(n);
  mask_ = n - 1;
}

uint64_t LocationCache::Hash(absl::string_view key) {
  // A seed of our own, so the cell index does not correlate with the
  // server's bucket choice.
  return XXH3_64bits_withSeed(key.data(), key.size(), 0x6b76636163686531ULL);
}

uint64_t LocationCache::TagOf(uint64_t hash) const {
  const uint64_t gen = generation_.load(std::memory_order_acquire) & 0xffff;
  return (gen << 48) | (hash >> 16);
}

bool LocationCache::Lookup(uint64_t hash, Location* out) const {
  if (!cells_) return false;
  const Cell& c = cells_[hash & mask_];
  const uint64_t s0 = c.seq.load(std::memory_order_acquire);
  if (s0 & 1) return false;
  const uint64_t tag = c.gen_tag.load(std::memory_order_relaxed);
  const uint64_t where = c.where.load(std::memory_order_relaxed);
  const uint64_t sum = c.checksum.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (c.seq.load(std::memory_order_relaxed) != s0) return false;
  if (where == 0 || tag != TagOf(hash)) return false;
  out->offset = (where >> kSizeBits) * layout::kEntryAlign;
  out->size = (where & ((uint64_t{1} << kSizeBits) - 1)) * layout::kEntryAlign;
  out->checksum = sum;
  return true;
}

template <typename F>
void LocationCache::Write(uint64_t hash, F fill) {
  if (!cells_) return;
  Cell& c = cells_[hash & mask_];
  uint64_t s0 = c.seq.load(std::memory_order_relaxed);
  // Another writer holds the cell: skipping is safe, a cell only ever holds
  // a hint (an Erase that loses here is covered by the entry checks).
  if ((s0 & 1) || !c.seq.compare_exchange_strong(s0, s0 + 1, std::memory_order_acquire)) return;
  std::atomic_thread_fence(std::memory_order_release);
  fill(c);
  c.seq.store(s0 + 2, std::memory_order_release);
}

void LocationCache::Insert(uint64_t hash, const Location& loc) {
  // Offsets and sizes come from a slot word, so they fit its fields; one
  // that does not (a bug) is simply not cached.
  if (loc.offset % layout::kEntryAlign != 0 || loc.size % layout::kEntryAlign != 0 ||
      loc.size == 0 || loc.size > layout::kMaxEntryBytes || loc.offset >= layout::kMaxPoolBytes) {
    return;
  }
  const uint64_t where =
      (loc.offset / layout::kEntryAlign) << kSizeBits | (loc.size / layout::kEntryAlign);
  const uint64_t tag = TagOf(hash);
  Write(hash, [&](Cell& c) {
    c.gen_tag.store(tag, std::memory_order_relaxed);
    c.where.store(where, std::memory_order_relaxed);
    c.checksum.store(loc.checksum, std::memory_order_relaxed);
  });
}

void LocationCache::Erase(uint64_t hash) {
  const uint64_t tag = TagOf(hash);
  Write(hash, [&](Cell& c) {
    // Only this key's location: a colliding key's stays.
    if (c.gen_tag.load(std::memory_order_relaxed) == tag)
      c.where.store(0, std::memory_order_relaxed);
  });
}

void LocationCache::Clear() {
  // 65536 generations before a tag could match again; a cell last written
  // that many clears ago is in any case checked against the entry.
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace client
}  // namespace kvstore
