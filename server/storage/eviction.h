// Copyright 2026 The kvstore Authors.
//
// Eviction policies of a KvStore with a memory limit, named as Redis names
// its maxmemory-policy values, and the access counters they read.
//
// The store is log-structured, so eviction works the way Segcache (NSDI
// '21) merges segments: the oldest sealed segment is emptied, its entries
// that were read since the hand last passed are copied forward (as the
// cleaner copies them) and the others are deleted. The segments form two
// FIFO queues, as in S3-FIFO (SOSP '23): clients' writes fill probation
// segments, and only what is read there is copied into the main queue (the
// evictor's segments); probation is swept first while it holds over a tenth
// of the sealed segments, so a key written once and never read leaves
// early and a scan cannot flush the main queue. Within each queue it is
// CLOCK, a FIFO-with-reinsertion, with the access record kept per entry in
// a side table instead of in the entry:
//   allkeys-lru   one "read since" bit: kept once, then evicted if not read
//                 again before the hand comes back (second chance; an
//                 approximation of LRU, as Redis's sampling is);
//   allkeys-lfu   a 2-bit saturating count of reads, decremented each time
//                 the hand passes, evicted at 0 (S3-FIFO's and SIEVE's
//                 frequency idea at two bits: a key read three times
//                 survives three passes);
//   volatile-lru / volatile-lfu
//                 the same among keys with an expiry; others are copied;
//   volatile-ttl  the keys whose expiry is nearest go first (from the
//                 store's expiry queue), then the cleaner compacts;
//   noeviction    writes past the limit are refused with -OOM.
// Reads count whichever way they come: server GETs directly, one-sided
// RDMA GETs through the batched access reports of their clients.
//
// Thread safety: AccessCounts is thread-safe and lock-free.

#ifndef KVSTORE_SERVER_STORAGE_EVICTION_H_
#define KVSTORE_SERVER_STORAGE_EVICTION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace server {

enum class EvictionPolicy {
  kNoEviction,
  kAllKeysLru,
  kAllKeysLfu,
  kVolatileLru,
  kVolatileLfu,
  kVolatileTtl,
};

// "noeviction", "allkeys-lru", ...: Redis's spelling.
absl::string_view PolicyName(EvictionPolicy p);
// The policy named `name` (any case, '-' or '_'), or nullopt.
std::optional<EvictionPolicy> ParsePolicy(absl::string_view name);
// A memory limit as --maxmemory and CONFIG SET maxmemory take it: "0"
// (none), a size ("768M", "2G", "1073741824"; K/M/G/T and Redis's kb/mb/gb
// suffixes) or a percentage of the pool ("75%", 1..100). kInvalidArgument
// otherwise, naming what is accepted.
absl::StatusOr<uint64_t> ParseMaxMemory(absl::string_view text, uint64_t pool_bytes);

// Whether the policy uses a frequency (lfu) rather than a bit (lru).
inline bool CountsFrequency(EvictionPolicy p) {
  return p == EvictionPolicy::kAllKeysLfu || p == EvictionPolicy::kVolatileLfu;
}
inline bool OnlyVolatile(EvictionPolicy p) {
  return p == EvictionPolicy::kVolatileLru || p == EvictionPolicy::kVolatileLfu ||
         p == EvictionPolicy::kVolatileTtl;
}

// A 2-bit saturating counter for every kEntryAlign unit of the data arena,
// indexed by entry offset: 1 bit of server memory per 16 bytes of pool.
class AccessCounts {
 public:
  // `units`: data arena bytes / layout::kEntryAlign.
  explicit AccessCounts(uint64_t units);
  // A read of the entry at `offset_units`: the count goes up by one, to 3
  // at most. Out-of-range offsets (a stale client report) are ignored.
  void Touch(uint64_t offset_units);
  // The count, after which it is lowered by one (lfu) or cleared (lru).
  uint32_t TakeOne(uint64_t offset_units, bool frequency);
  // The count, left as it is.
  uint32_t Peek(uint64_t offset_units) const;
  // Sets the count of a copied entry (so a copy keeps its history).
  void Set(uint64_t offset_units, uint32_t count);
  // Zeroes [first, first + n): a run's counts when it is allocated again.
  void Clear(uint64_t first_unit, uint64_t n_units);

 private:
  const uint64_t units_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;  // 32 counters a word
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_EVICTION_H_
