// Copyright 2026 The kvstore Authors.
//
// KvIndex: the hash index that lives in the index arena, in the format of
// common/protocol/layout.h, so that clients can read buckets remotely.
//
// Every key has two candidate buckets of 8 slot words. The server is the only
// writer (commit path and cleaner); writers serialise per bucket with striped
// mutexes, and publish each change with one aligned 8-byte release store, so
// a concurrent reader (a local GET or a remote RDMA READ) sees either the old
// or the new slot word, never a mix. There is no displacement between
// buckets: a key whose two buckets are full is refused (kResourceExhausted).
//
// One key, one slot. A slot names its key only through the entry it points
// at, and an entry in a live lease chunk can be rewritten by the lease holder
// into a valid entry for another key with the same fingerprint and buckets
// (the seed is public). Two slots can then name one key for a while; Upsert()
// and Remove() therefore act on every slot that names the key, and the
// conditional updates (ReplaceIf, RemoveIf) find their slot by the offset it
// points at, never by re-reading the key from the entry.
//
// Thread safety: all methods are thread-safe. Lookup() takes no lock.

#ifndef KVSTORE_SERVER_STORAGE_KV_INDEX_H_
#define KVSTORE_SERVER_STORAGE_KV_INDEX_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/protocol/layout.h"
#include "common/sync/handoff_mutex.h"

namespace kvstore {
namespace server {

class KvIndex {
 public:
  // `buckets` points at geometry.bytes() zeroed bytes; `data` is the arena
  // of `data_bytes` bytes that slot offsets refer to (keys are compared
  // there). Neither is owned; both must outlive the index. REQUIRES:
  // `buckets` is 8-byte aligned and geometry.bucket_count >= 1.
  KvIndex(char* buckets, const layout::IndexGeometry& geometry, const char* data,
          uint64_t data_bytes);
  KvIndex(const KvIndex&) = delete;
  KvIndex& operator=(const KvIndex&) = delete;

  const layout::IndexGeometry& geometry() const { return geometry_; }

  // The slot that holds `key`, if any. Lock-free; the result is a snapshot
  // that a concurrent writer may already have replaced, and the entry it
  // points at stays readable only for the reclamation grace period (see
  // KvStore).
  std::optional<layout::Slot> Lookup(absl::string_view key) const;
  // Hints that `key` will be looked up or written soon; no effect on any
  // result. PrefetchBuckets() starts loading its two buckets;
  // PrefetchEntries() reads them (best once they have arrived) and starts
  // loading the header of every entry whose fingerprint matches. Lock-free.
  void PrefetchBuckets(absl::string_view key) const { PrefetchBuckets(Hash(key)); }
  void PrefetchEntries(absl::string_view key) const { PrefetchEntries(Hash(key)); }
  // The same for a hash from Hash(): a caller that prefetches a key in two
  // stages (buckets, then entries) hashes it once.
  void PrefetchBuckets(const layout::KeyHash& h) const;
  void PrefetchEntries(const layout::KeyHash& h) const;
  // `key`'s hash under this index's geometry (layout::HashKey).
  layout::KeyHash Hash(absl::string_view key) const {
    return layout::HashKey(key, geometry_.seed, geometry_.bucket_count);
  }

  // Slots a write unpublished: almost always none or one, so they are kept
  // inline (an allocation per overwrite otherwise).
  using SlotList = absl::InlinedVector<layout::Slot, 2>;

  // Points `key` at `slot`. Returns the slots it unpublished: the one it
  // replaced and any other that also named `key` (empty when the key is
  // new); the caller owns reclaiming their entries. kResourceExhausted when
  // the key is new and both of its buckets are full. REQUIRES: the entry at
  // `slot` holds `key`.
  absl::StatusOr<SlotList> Upsert(absl::string_view key, const layout::Slot& slot) {
    return Upsert(key, slot, Hash(key));
  }
  // The same with the key's Hash(), for a caller that has it already.
  absl::StatusOr<SlotList> Upsert(absl::string_view key, const layout::Slot& slot,
                                  const layout::KeyHash& h);

  // Clears every slot that names `key` and returns them (empty if the key
  // was absent). The caller owns reclaiming their entries.
  SlotList Remove(absl::string_view key);

  // Replaces the slot of `key`'s fingerprint, in `key`'s buckets, that points
  // at expected.offset with expected.size (the cleaner moving an entry), by
  // `replacement`. Returns whether such a slot was there. The entry at the
  // old offset is not read. REQUIRES: the entry at `replacement` holds `key`.
  bool ReplaceIf(absl::string_view key, const layout::Slot& expected,
                 const layout::Slot& replacement);

  // Clears the slot of `key`'s fingerprint, in `key`'s buckets, that points
  // at expected.offset with expected.size, whatever the entry there holds
  // now. Returns whether it did.
  bool RemoveIf(absl::string_view key, const layout::Slot& expected);

  // Appends keys starting with `prefix` from buckets at or after `cursor` (a
  // bucket number) to `keys`, stopping after the bucket in which the count
  // reached `count` (so up to count + kSlotsPerBucket - 1 keys). Returns the
  // cursor to continue from, 0 when the whole index has been visited. A key
  // present for the whole scan is listed exactly once.
  // At most `max_buckets` buckets are visited (0: no bound), so a prefix
  // that matches nothing cannot walk the whole index in one call.
  uint64_t Scan(uint64_t cursor, size_t count, absl::string_view prefix,
                std::vector<std::string>* keys, uint64_t max_buckets = 0) const;

  // Number of keys. A relaxed counter: exact once writers are quiescent,
  // approximate while they run (for stats and error messages).
  uint64_t size() const { return size_.load(std::memory_order_relaxed); }
  uint64_t capacity() const { return geometry_.bucket_count * layout::kSlotsPerBucket; }

 private:
  static constexpr size_t kStripes = 256;

  uint64_t* bucket(uint64_t b) const {
    return reinterpret_cast<uint64_t*>(buckets_ + b * layout::kBucketBytes);
  }
  // The key stored in the entry a live slot points at (trusted: server-written).
  absl::string_view EntryKey(const layout::Slot& slot) const;
  // The words in `h`'s buckets whose entries hold `key` (normally at most one).
  // Inline storage: a key has one slot but in a rare race, so the usual
  // result needs no allocation.
  absl::InlinedVector<uint64_t*, 2> FindAll(absl::string_view key, const layout::KeyHash& h) const;
  // The word in `h`'s buckets with h's fingerprint that points at `slot`'s
  // offset and size, or nullptr.
  uint64_t* FindAt(const layout::KeyHash& h, const layout::Slot& slot) const;

  class StripeLock;

  char* const buckets_;
  const layout::IndexGeometry geometry_;
  const char* const data_;
  const uint64_t data_bytes_;
  std::atomic<uint64_t> size_{0};
  // Held for a bucket scan or two at a time, by any thread (a RESP loop,
  // a gRPC worker, a replica installer), so a one-word lock taken with
  // LockPlain(): its uncontended take and release are one atomic operation
  // each, inline, where an absl::Mutex's were two calls (~60 instructions of
  // every SET's ~6,000). Nothing waits inside it, and nothing in it needs a
  // waiting thread, so a contended take just sleeps.
  mutable std::array<HandoffMutex, kStripes> stripes_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_KV_INDEX_H_
