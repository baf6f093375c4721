// Copyright 2026 The kvstore Authors.
//
// BatchPrefetch: cache hints for a batch of writes whose keys are all known
// before the first is applied (a backup's replication batch, a primary's
// batch of replies). As the RESP look-ahead does for a pipeline, before
// item i is applied it requests item i+2's index buckets and item i+1's
// entries (KvStore::PrefetchBuckets / PrefetchEntries), so their cache
// misses overlap the work on item i. Each key is hashed once: the bucket
// stage's hash is kept for the entry stage. Hints only: nothing read or
// written depends on them.
//
// Thread-compatible; one per batch, on the thread that applies it. The
// store and the keys must outlive it.

#ifndef KVSTORE_SERVER_STORAGE_BATCH_PREFETCH_H_
#define KVSTORE_SERVER_STORAGE_BATCH_PREFETCH_H_

#include <cstddef>
#include <type_traits>

#include "absl/strings/string_view.h"
#include "common/protocol/layout.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

// `KeyAt`: callable size_t -> absl::string_view, the key of item i (an
// empty key has no hint: skipped), or size_t -> const layout::KeyHash*,
// its hash already computed (null: no hint).
template <typename KeyAt>
class BatchPrefetch {
 public:
  // Requests the buckets of the first two items. A null store, or a batch
  // of one (nothing to overlap), does nothing.
  BatchPrefetch(const KvStore* store, size_t n, KeyAt key_at)
      : store_(n > 1 ? store : nullptr), n_(n), key_at_(key_at) {
    for (size_t i = 0; i < 2 && i < n_; ++i) Buckets(i);
  }

  // Item i's key hash (KvIndex::Hash, as the index takes it), or null when
  // no hint was made for it (no store, a batch of one, an empty key).
  // Valid from Before(i) until Before(i + 1).
  const layout::KeyHash* HashOf(size_t i) const {
    return store_ != nullptr && have_[i % 3] ? &hashes_[i % 3] : nullptr;
  }

  // Call before applying item i (i = 0, 1, ... in order).
  void Before(size_t i) {
    if (i + 2 < n_) Buckets(i + 2);
    if (i + 1 < n_ && store_ != nullptr && have_[(i + 1) % 3]) {
      store_->PrefetchEntries(hashes_[(i + 1) % 3]);
    }
  }

 private:
  void Buckets(size_t i) {
    if (store_ == nullptr) return;
    if constexpr (std::is_convertible_v<decltype(key_at_(i)), const layout::KeyHash*>) {
      const layout::KeyHash* h = key_at_(i);
      have_[i % 3] = h != nullptr;
      if (h != nullptr) {
        hashes_[i % 3] = *h;
        store_->PrefetchBuckets(*h);
      }
    } else {
      const absl::string_view key = key_at_(i);
      have_[i % 3] = !key.empty();
      if (have_[i % 3]) hashes_[i % 3] = store_->PrefetchBuckets(key);
    }
  }

  const KvStore* const store_;
  const size_t n_;
  KeyAt key_at_;
  // Items i, i+1, i+2 at their index modulo 3.
  layout::KeyHash hashes_[3] = {};
  bool have_[3] = {false, false, false};
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_BATCH_PREFETCH_H_
