// Copyright 2026 The kvstore Authors.
//
// LocationCache: where this client last found a key's entry in one server's
// pool (offset and size from the key's slot word, and the entry's checksum),
// so that a GET can READ the entry at once instead of first READing the
// key's buckets (docs/architecture.md §10.2).
//
// A location is only a hint. The caller must check what it READs there:
// the magic (the server overwrites it with layout::kRetiredEntryMagic when
// the index stops naming the entry, before the overwrite or delete is
// acknowledged), the key, the size, that the entry's checksum is the one
// recorded here and that it verifies. Anything else is a miss, after which
// the caller takes the two-READ path and records what it found.
//
// Structure: a fixed array of `capacity` (rounded up to a power of two)
// cells, direct-mapped by a 64-bit hash of the key; the key itself is not
// stored (the entry holds it), so a hash collision only costs a miss. Each
// cell is a sequence lock over atomic words: lookups take no lock, allocate
// nothing and never block; a writer that finds its cell being written by
// another thread skips the write. Clear() is O(1): it bumps a generation
// that every cell carries.
//
// Thread safety: thread-safe.

#ifndef KVSTORE_CLIENT_INTERNAL_RDMA_LOCATION_CACHE_H_
#define KVSTORE_CLIENT_INTERNAL_RDMA_LOCATION_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"

namespace kvstore {
namespace client {

// Options::rdma_location_cache_entries' default.
inline constexpr size_t kDefaultLocationCacheEntries = 65536;

class LocationCache {
 public:
  // A recorded location: the entry's byte offset and size in the data arena
  // (as in its slot word) and the checksum its header carried.
  struct Location {
    uint64_t offset = 0;
    uint64_t size = 0;
    uint64_t checksum = 0;
  };

  // `capacity` 0: disabled (every Lookup misses, Insert does nothing).
  // Otherwise rounded up to a power of two, at most 2^24 cells of 32 bytes.
  explicit LocationCache(size_t capacity);
  LocationCache(const LocationCache&) = delete;
  LocationCache& operator=(const LocationCache&) = delete;

  bool enabled() const { return cells_ != nullptr; }
  size_t capacity() const { return cells_ ? mask_ + 1 : 0; }

  // The hash every other call takes (computed once per operation).
  static uint64_t Hash(absl::string_view key);

  // The location recorded for the key of `hash`, if any (possibly another
  // key's with the same hash: the caller checks the entry's key).
  bool Lookup(uint64_t hash, Location* out) const;
  // Records `loc` for the key of `hash`, replacing what its cell held.
  void Insert(uint64_t hash, const Location& loc);
  // Forgets the key of `hash` (its own PUT or DELETE, or a failed check).
  void Erase(uint64_t hash);
  // Forgets everything (a new cluster map epoch).
  void Clear();

 private:
  // seq is odd while a writer fills the cell; gen_tag packs the cache
  // generation (high 16 bits) with the hash's top 48 bits.
  struct Cell {
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> gen_tag{0};
    std::atomic<uint64_t> where{0};  // offset / 64 << 22 | size / 64, 0 = empty
    std::atomic<uint64_t> checksum{0};
  };
  uint64_t TagOf(uint64_t hash) const;
  // Runs `fill` on `hash`'s cell under its sequence lock, unless another
  // writer holds it.
  template <typename F>
  void Write(uint64_t hash, F fill);

  std::unique_ptr<Cell[]> cells_;
  size_t mask_ = 0;
  std::atomic<uint64_t> generation_{1};
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_RDMA_LOCATION_CACHE_H_
