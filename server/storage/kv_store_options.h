// Copyright 2026 The kvstore Authors.
//
// How a KvStore (kv_store.h) divides, cleans, expires and evicts its pool.

#ifndef KVSTORE_SERVER_STORAGE_KV_STORE_OPTIONS_H_
#define KVSTORE_SERVER_STORAGE_KV_STORE_OPTIONS_H_

#include <cstdint>

#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "common/protocol/layout.h"
#include "common/protocol/limits.h"
#include "server/storage/clock.h"
#include "server/storage/eviction.h"
#include "server/storage/write_hook.h"

namespace kvstore {
namespace server {

// The default segment: 4 MiB and 4 KiB. Values are often a power of two in
// size, and an entry adds its 32-byte header and key to the value, so a
// segment of exactly 4 MiB would hold three 1 MiB entries, not four (a
// quarter of it idle), and likewise one entry too few of every size from
// 8 KiB up. The 4 KiB more (0.1 %) lets a segment hold four 1 MiB values
// with keys up to 992 bytes, eight 512 KiB values with keys up to 480, and
// so on down to 64 KiB values with keys up to 32 bytes.
inline constexpr uint64_t kDefaultSegmentBytes = (4ull << 20) + (4ull << 10);

// How a KvStore divides and cleans its pool. Create() checks segment_bytes
// and limits against the pool and fails with kInvalidArgument.
struct KvStoreOptions {
  // The allocation and cleaning unit: a multiple of layout::kEntryAlign, at least 64 KiB,
  // and the pool's data arena must hold at least two of them.
  uint64_t segment_bytes = kDefaultSegmentBytes;
  // How long a retired entry stays readable. Must exceed the longest
  // one-sided GET a client allows itself (see docs/architecture.md): clients
  // are given half of it, in whole milliseconds, as their read span, so
  // Create() refuses less than kMinGracePeriod (a 0 ms span) and more than
  // kMaxGracePeriod (space freed that late is as good as leaked).
  absl::Duration grace_period = absl::Milliseconds(500);
  static constexpr absl::Duration kMinGracePeriod = absl::Milliseconds(2);
  static constexpr absl::Duration kMaxGracePeriod = absl::Hours(1);
  // The cleaner compacts sealed segments whose live fraction is below this.
  double clean_below_live_fraction = 0.5;
  // ... but only once fewer than this fraction of the pool's segments are
  // free. Compaction copies live entries to reclaim dead space; while the
  // pool has plenty of free segments that copying buys nothing (segments
  // whose entries all die are freed without it) and costs writers' CPU and
  // cache. 1.0 compacts whenever a sparse segment exists.
  double compact_when_free_below = 0.25;
  // How often the cleaner wakes up (0 disables the background thread; tests
  // then call RunCleanerOnce()).
  absl::Duration cleaner_interval = absl::Milliseconds(50);
  // How often the expiry cycle deletes keys whose expiry time has passed
  // (ExpireDue()); 0 disables the thread (tests call ExpireDue()). Reads
  // hide an expired key at once whatever this is; it bounds how long its
  // memory stays in use.
  absl::Duration expiry_interval = absl::Milliseconds(100);
  // The memory limit (bytes of segments in use, dead space included, as
  // Redis counts fragmentation; 0: the whole pool) and what happens at it
  // (eviction.h). Both can be changed later (SetMaxMemory,
  // SetEvictionPolicy: CONFIG SET).
  uint64_t max_memory_bytes = 0;
  EvictionPolicy eviction_policy = EvictionPolicy::kNoEviction;
  // The key and value limits enforced by Commit(), Put(), Delete() and
  // Writer::Reserve() (max_batch_keys is the transports' concern); Create()
  // rejects limits that fail Limits::Validate().
  Limits limits;
  // Seed of the index hash (layout::HashKey). It is published to clients
  // with the index geometry, so that they hash keys as the server does.
  uint64_t index_seed = 0;
  // Bytes that reads of entries in live lease chunks may hold copied at
  // once (such an entry is copied, then verified, then served from the copy,
  // since its holder can still rewrite it). A read that would go over the
  // budget fails with kUnavailable, except when no copy is held at all, so
  // one entry of any size can always be read. Bounds what many concurrent
  // GETs (or one MGET) of large leased entries can make the server allocate.
  uint64_t lease_read_copy_bytes = 64ull << 20;
  // The time sources (not owned; must outlive the store). Null: the real
  // clocks. Tests pass a fake to step the wall clock.
  const Clock* clock = nullptr;
  // Where the store registers its kvstore_keys/kvstore_pool_*/kvstore_*_total
  // series (not owned; must outlive the store). Null: a private registry,
  // for tests and tools that do not read figures.
  metrics::Registry* registry = nullptr;
  // Consulted before every client write is published (not owned; must
  // outlive the store): the replicator in cluster mode, null otherwise.
  // See write_hook.h.
  WriteHook* write_hook = nullptr;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_KV_STORE_OPTIONS_H_
