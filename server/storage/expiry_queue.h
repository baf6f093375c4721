// Copyright 2026 The kvstore Authors.
//
// ExpiryQueue: which entries expire when, so that expired keys are found
// without walking the index. Every entry committed with an expiry time adds
// one record (its expiry, offset and size); the store's expiry cycle pops
// the records that are due and deletes each key whose slot still names
// that entry. A record is only a hint: the entry may have been overwritten,
// deleted or moved by the cleaner since (the cleaner adds a record for the
// moved copy), and its bytes may even hold another entry by then, so the
// popper checks the index before it acts. Stale records cost a pop each and
// are dropped in bulk by Compact() when they outnumber the live ones.
//
// Why a heap and not Segcache's TTL-grouped segments: grouping needs a
// writer per TTL class in every event loop and RDMA lease; a heap gives the
// same "no full scan" with the segment layout unchanged, at 16 bytes of
// server heap per entry with an expiry (Redis's expires dictionary costs
// more per key). Memory of expired entries comes back through the usual
// path: deleted bytes are dead, emptied segments are freed, sparse ones
// compacted.
//
// Thread safety: thread-safe (one mutex; pushes are O(log n)).

#ifndef KVSTORE_SERVER_STORAGE_EXPIRY_QUEUE_H_
#define KVSTORE_SERVER_STORAGE_EXPIRY_QUEUE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace server {

class ExpiryQueue {
 public:
  struct Record {
    uint64_t expires_at_ms = 0;
    // Where the entry was published, in kEntryAlign units (a pool is at most
    // layout::kMaxPoolBytes, so both fit 32 bits).
    uint32_t offset_units = 0;
    uint32_t size_units = 0;
  };

  // Adds a record. REQUIRES: expires_at_ms != 0.
  void Push(const Record& r);
  // Moves up to `max` records due at `now_ms` (expires_at_ms <= now_ms),
  // earliest first, into `out` (cleared first). Returns how many.
  size_t PopDue(int64_t now_ms, size_t max, std::vector<Record>* out);
  // When the earliest record is due; 0 when the queue is empty.
  uint64_t NextDueMs() const;
  // Drops every record for which `live` returns false, when there are more
  // than `threshold` records. Returns how many were dropped. `live` runs
  // under the queue's lock: it must not call back into the queue.
  size_t Compact(size_t threshold, absl::FunctionRef<bool(const Record&)> live);
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<Record> heap_ ABSL_GUARDED_BY(mu_);  // a min-heap on expires_at_ms
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_EXPIRY_QUEUE_H_
