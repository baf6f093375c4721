// Copyright 2026 The kvstore Authors.
//
// KeyLocks: the per-key write lock of a KvStore, striped. Every client
// write of a key (a commit from any transport, a delete, a read-modify-
// write, the expiry of a key) holds its key's stripe from deciding what to
// write until the write is published (or refused), which is what makes a
// read-modify-write atomic with respect to every other writer. Replicated
// installs on a backup do not take it: a backup has no client writers.
//
// Lock order: a KeyLocks stripe is taken before the write hook's locks (the
// replicator's shard barrier and key stripe) and the index's stripes; a
// caller holding several takes them through Guard, in stripe order.
//
// The stripes are HandoffMutexes: a write started on one thread and
// finished on another (KvStore::StartCommit) releases its stripe on the
// thread that finishes it.
//
// Thread safety: thread-safe.

#ifndef KVSTORE_SERVER_STORAGE_KEY_LOCKS_H_
#define KVSTORE_SERVER_STORAGE_KEY_LOCKS_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/protocol/layout.h"
#include "common/sync/handoff_mutex.h"

namespace kvstore {
namespace server {

class KeyLocks {
 public:
  // 65536 stripes (1 MiB), as the replicator's: two writers of different
  // keys meet on one stripe rarely enough not to matter, even while one
  // waits for a replication round. With 4096, a pipelined replicated load
  // (redis-benchmark -P 16, about 200 SETs in flight a node) met one in
  // about 70 writes, and each such SET left the started path for a commit
  // worker that blocked on the stripe: 1.5 % of the writes took 8 % of the
  // node's CPU (docs/performance.md §1.2).
  static constexpr size_t kStripes = 65536;

  KeyLocks() : stripes_(new HandoffMutex[kStripes]) {}

  // A key is named by its index hash (KvIndex::Hash): the store's write
  // path computes it once for both the lock and the index.
  using KeyHash = layout::KeyHash;

  // Takes the key's stripe if it is free (for work that must never wait on
  // a writer, e.g. eviction run by a writer that may hold a stripe itself);
  // Unlock() it after, on any thread.
  bool TryLock(const KeyHash& key) { return stripes_[Stripe(key)].TryLock(); }
  // Takes the key's stripe, waiting for it (counted in waits()): a Guard of
  // one key without the Guard, for the commit path.
  void Lock(const KeyHash& key) { LockStripe(Stripe(key)); }
  void Unlock(const KeyHash& key) { stripes_[Stripe(key)].Unlock(); }
  // How many times a Guard found a stripe held and waited for it (two
  // writes of one key, or of keys on one stripe, at the same time).
  uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }

  // Holds the stripes of every key in `keys` (each once, in stripe order, so
  // two guards never deadlock) until destroyed.
  class Guard {
   public:
    Guard(KeyLocks& locks, absl::Span<const KeyHash> keys) : locks_(&locks) {
      for (const KeyHash& k : keys) held_.push_back(Stripe(k));
      if (held_.size() > 1) {
        std::sort(held_.begin(), held_.end());
        held_.erase(std::unique(held_.begin(), held_.end()), held_.end());
      }
      LockHeld();
    }
    // Every client write takes one key's: no sorting for it.
    Guard(KeyLocks& locks, const KeyHash& key) : locks_(&locks) {
      held_.push_back(Stripe(key));
      LockHeld();
    }
    ~Guard() {
      for (auto it = held_.rbegin(); it != held_.rend(); ++it) locks_->stripes_[*it].Unlock();
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    void LockHeld() {
      for (size_t s : held_) locks_->LockStripe(s);
    }

    KeyLocks* locks_;
    absl::InlinedVector<size_t, 2> held_;
  };

 private:
  void LockStripe(size_t s) {
    if (stripes_[s].TryLock()) return;
    waits_.fetch_add(1, std::memory_order_relaxed);
    stripes_[s].Lock();
  }
  // Five bits of the first bucket's number above the 11 fingerprint bits:
  // 16 bits from the two independent halves of the key's 128-bit hash.
  static size_t Stripe(const KeyHash& key) {
    static_assert(kStripes == size_t{1} << 16 && layout::kFingerprintBits == 11);
    return static_cast<size_t>((key.bucket[0] << layout::kFingerprintBits | key.fingerprint) %
                               kStripes);
  }
  std::unique_ptr<HandoffMutex[]> stripes_;
  std::atomic<uint64_t> waits_{0};
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_KEY_LOCKS_H_
