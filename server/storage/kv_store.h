// Copyright 2026 The kvstore Authors.
//
// KvStore: the storage engine of one server. It owns the index and the space
// of the data arena, and is the single commit path for every transport: a
// RESP SET, a gRPC Put and (next) an RDMA WRITE + commit all end in Commit().
//
// Space is handed out in segments (--segment-size). A writer bump-allocates
// entries inside a segment it holds open (a Writer: one per event loop, one
// for the cleaner, one per RDMA write lease); an entry larger than a segment
// gets a run of consecutive segments to itself. Entries are never updated in
// place: an update writes a new entry and swaps the slot word; the old entry's
// bytes stop counting as live in their segment. A sealed segment with no live
// bytes is freed a grace period later (longer than any one-sided READ a client
// allows itself), and only once no local reader has it pinned. The cleaner
// compacts sealed segments that are mostly dead by copying their live entries
// elsewhere and republishing a slot only if it still points at the old copy.
//
// Errors: kInvalidArgument for limits and malformed entries,
// kResourceExhausted when the pool or the index is full (the store keeps
// serving; deleting or overwriting frees space).
//
// Thread safety: KvStore is thread-safe. A Writer is used by one thread.

#ifndef KVSTORE_SERVER_STORAGE_KV_STORE_H_
#define KVSTORE_SERVER_STORAGE_KV_STORE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "common/protocol/layout.h"
#include "common/protocol/limits.h"
#include "server/storage/kv_index.h"
#include "server/storage/memory_pool.h"

namespace kvstore {
namespace server {

struct KvStoreOptions {
  uint64_t segment_bytes = 4ull << 20;
  // How long a retired entry stays readable. Must exceed the longest
  // one-sided GET a client allows itself (see docs/architecture.md).
  absl::Duration grace_period = absl::Milliseconds(500);
  // The cleaner compacts sealed segments whose live fraction is below this.
  double clean_below_live_fraction = 0.5;
  // How often the cleaner wakes up (0 disables the background thread; tests
  // then call RunCleanerOnce()).
  absl::Duration cleaner_interval = absl::Milliseconds(50);
  Limits limits;
  uint64_t index_seed = 0;
  // Where the store registers its kvstore_keys/kvstore_pool_*/kvstore_*_total
  // series (not owned; must outlive the store). Null: a private registry,
  // for tests and tools that do not read figures.
  metrics::Registry* registry = nullptr;
};

// A contiguous run of segments held by one writer.
struct Chunk {
  uint64_t offset = 0;  // in the data arena
  uint64_t length = 0;
  uint32_t first_segment = 0;
  uint32_t segments = 0;
};

// Space for one entry, reserved but not yet committed.
struct Reservation {
  char* ptr = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
  // Set when the entry got a run of its own (larger than a segment); the
  // writer releases it in Writer::Done().
  std::optional<Chunk> dedicated;
};

class KvStore;

// A local reference to a committed value that keeps its memory from being
// reclaimed (the RESP path sends straight from pool memory). An entry that
// its lease holder can still overwrite is copied instead, and the copy is
// what was verified and what is sent. Move-only.
class PinnedValue {
 public:
  PinnedValue() = default;
  PinnedValue(PinnedValue&& other) noexcept { *this = std::move(other); }
  PinnedValue& operator=(PinnedValue&& other) noexcept;
  PinnedValue(const PinnedValue&) = delete;
  PinnedValue& operator=(const PinnedValue&) = delete;
  ~PinnedValue() { Release(); }

  absl::string_view value() const { return value_; }
  void Release();

 private:
  friend class KvStore;
  KvStore* store_ = nullptr;
  uint32_t segment_ = 0;
  absl::string_view value_;
  std::unique_ptr<char[]> copy_;  // the verified copy, when there is one
};

class KvStore {
 public:
  friend class PinnedValue;
  // A bump allocator over segments. Not thread-safe: one per thread/lease.
  class Writer {
   public:
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // Reserves space for an entry of key_len + value_len bytes.
    // kInvalidArgument over the limits, kResourceExhausted if the pool is full.
    absl::StatusOr<Reservation> Reserve(uint64_t key_len, uint64_t value_len);
    // Ends a reservation after Commit() or after giving up on it.
    void Done(Reservation& r);

   private:
    friend class KvStore;
    Writer(KvStore* store, bool cleaner) : store_(store), cleaner_(cleaner) {}
    KvStore* store_;
    const bool cleaner_;  // may use the segments reserved for compaction
    std::optional<Chunk> open_;
    uint64_t used_ = 0;  // bytes bump-allocated in open_
  };

  static absl::StatusOr<std::unique_ptr<KvStore>> Create(MemoryPool* pool,
                                                         const KvStoreOptions& options);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  std::unique_ptr<Writer> NewWriter() { return std::unique_ptr<Writer>(new Writer(this, false)); }

  // Publishes the entry already written at [offset, offset+size) of the data
  // arena: bounds, header, lengths (against the limits), checksum. The commit
  // path of every transport. `verify_checksum` may be false only for an
  // entry this server wrote and checksummed itself a moment ago (RESP SET,
  // gRPC Put): computing it twice on that hot path would buy nothing.
  // REQUIRES: the range was reserved by the caller.
  absl::Status Commit(uint64_t offset, uint64_t size, bool verify_checksum = true);

  // Convenience for callers that hold the value in memory.
  absl::Status Put(Writer* writer, absl::string_view key, absl::string_view value);
  absl::StatusOr<PinnedValue> Get(absl::string_view key);
  bool Exists(absl::string_view key) const { return index_->Lookup(key).has_value(); }
  // kNotFound if absent.
  absl::Status Delete(absl::string_view key);

  // Keys for SCAN / the Scan RPC (see KvIndex::Scan).
  uint64_t Scan(uint64_t cursor, size_t count, absl::string_view prefix,
                std::vector<std::string>* keys) const {
    return index_->Scan(cursor, count, prefix, keys);
  }

  // A run of whole segments for an RDMA write lease: `bytes` rounded up to
  // segments. Until ReleaseChunk() (called after the lease's write key is
  // revoked) the lease holder can overwrite entries it committed there, so
  // Get() verifies the checksum of entries in it (kDataLoss when it fails).
  // ReleaseChunk() verifies every entry committed in it once more (the last
  // chance to catch an overwrite: the key is revoked by then), unpublishes
  // any that fail, and seals it; the others stay live.
  absl::StatusOr<Chunk> AllocateChunk(uint64_t bytes);
  void ReleaseChunk(const Chunk& chunk);

  // One cleaner pass: free segments whose grace period ended, then compact.
  void RunCleanerOnce();

  uint64_t Version() { return next_version_.fetch_add(1, std::memory_order_relaxed); }
  const Limits& limits() const { return options_.limits; }
  const KvStoreOptions& options() const { return options_; }
  const KvIndex& index() const { return *index_; }
  uint64_t size() const { return index_->size(); }
  // The registry holding this store's series (options.registry or its own).
  const metrics::Registry& registry() const { return *registry_; }

 private:
  enum class SegState : uint8_t { kFree, kOpen, kSealed, kReclaiming };

  struct Segment {
    std::atomic<SegState> state{SegState::kFree};
    std::atomic<int64_t> live_bytes{0};
    std::atomic<int32_t> pins{0};
    // A lease chunk: its holder can still WRITE over entries it committed,
    // so local readers verify their checksum (on the head).
    std::atomic<bool> remote_writable{false};
    uint32_t run_head = 0;    // first segment of the run this one belongs to
    uint32_t run_length = 0;  // valid on the head
    absl::Mutex mu;
    std::vector<uint32_t> entries ABSL_GUARDED_BY(mu);  // committed offsets in the run
  };

  explicit KvStore(MemoryPool* pool, const KvStoreOptions& options);

  // `for_cleaner` may take the last free segments, which are kept for the
  // cleaner: without them a pool whose segments all hold some live data
  // could never be compacted again.
  absl::StatusOr<Chunk> AllocateRun(uint32_t segments, bool for_cleaner = false);
  // Asks the cleaner thread for a pass now (pool running out).
  void WakeCleaner();
  void Seal(uint32_t head);
  // Drops `slot`'s bytes from its segment's live count.
  void Retire(const layout::Slot& slot);
  void MaybeScheduleReclaim(uint32_t head);
  // Frees segments whose grace period has passed. Returns how many.
  size_t ReclaimReady();
  void CompactOnce();
  void CleanerLoop();
  uint32_t SegmentOf(uint64_t offset) const {
    return static_cast<uint32_t>(offset / options_.segment_bytes);
  }
  void Unpin(uint32_t segment);
  // Registers the counters and the scrape-time gauges; constructor only.
  void RegisterMetrics();
  // Bytes of live entries over all runs (the kvstore_pool_live_bytes gauge).
  int64_t LiveBytes() const;

  // Declared first: every Counter* below points into it, so it dies last.
  std::unique_ptr<metrics::Registry> own_registry_;
  metrics::Registry* const registry_;
  MemoryPool* const pool_;
  const KvStoreOptions options_;
  std::unique_ptr<KvIndex> index_;
  const uint32_t segment_count_;
  std::unique_ptr<Segment[]> segments_;
  std::atomic<uint64_t> next_version_{1};

  absl::Mutex alloc_mu_;
  uint32_t free_segments_ ABSL_GUARDED_BY(alloc_mu_) = 0;
  uint32_t alloc_hint_ ABSL_GUARDED_BY(alloc_mu_) = 0;

  struct PendingFree {
    uint32_t head;
    absl::Time ready;
  };
  absl::Mutex reclaim_mu_;
  std::deque<PendingFree> pending_ ABSL_GUARDED_BY(reclaim_mu_);

  // Only the cleaner thread (or RunCleanerOnce callers, serialised) use this.
  absl::Mutex cleaner_mu_;
  std::unique_ptr<Writer> cleaner_writer_ ABSL_GUARDED_BY(cleaner_mu_);

  // Owned by *registry_; incremented on the paths that count them.
  metrics::Counter* commits_;
  metrics::Counter* deletes_;
  metrics::Counter* cleaner_passes_;
  metrics::Counter* moved_entries_;
  metrics::Counter* moved_bytes_;
  metrics::Counter* reclaimed_;
  metrics::Counter* pool_full_;
  metrics::Counter* index_full_;
  metrics::Counter* modified_;

  // Segments only the cleaner may allocate.
  uint32_t cleaner_reserve_ = 0;
  absl::Mutex wake_mu_;
  bool wake_ ABSL_GUARDED_BY(wake_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(wake_mu_) = false;
  std::thread cleaner_;
  // Declared last: destroyed (unregistered, waiting out a running scrape)
  // before the index, segments and mutexes their callbacks read.
  std::vector<metrics::CallbackHandle> gauges_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_KV_STORE_H_
