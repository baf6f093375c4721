// Copyright 2026 The kvstore Authors.
//
// KvStore's RDMA write-lease chunks: handing out a chunk, recording what was
// committed in it, and checking every entry once more when the lease ends.

#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

using layout::Slot;

absl::Status KvStore::RecordLeaseEntryLocked(Segment& seg, uint64_t offset, uint64_t size,
                                             uint64_t checksum, const std::string& key) {
  // The first committed entry at or after `offset`, and the one before it:
  // the only two that could overlap [offset, offset + size).
  auto next = seg.lease_entries.lower_bound(offset);
  bool overlaps = next != seg.lease_entries.end() && next->first < offset + size;
  if (!overlaps && next != seg.lease_entries.begin()) {
    auto prev = std::prev(next);
    overlaps = prev->first + prev->second.size > offset;
  }
  if (overlaps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "entry range [", offset, ", +", size,
        ") overlaps an entry already committed in this lease; entries are committed once"));
  }
  seg.lease_entries.emplace(offset, CommittedEntry{size, checksum, key});
  return absl::OkStatus();
}

absl::StatusOr<Chunk> KvStore::AllocateChunk(uint64_t bytes, absl::Duration space_wait) {
  const uint64_t seg = options_.segment_bytes;
  if (bytes == 0) return absl::InvalidArgumentError("lease size must be positive");
  // Not for the cleaner: a lease may not take the cleaner's reserve. The
  // flag is set before the chunk is handed out, so it is visible before any
  // entry in the chunk can be committed and looked up (Get() loads it with
  // acquire after finding such an entry).
  absl::StatusOr<Chunk> c = AllocateRun(static_cast<uint32_t>((bytes + seg - 1) / seg),
                                        /*for_cleaner=*/false, space_wait);
  if (c.ok()) segments_[c->first_segment].remote_writable.store(true, std::memory_order_release);
  return c;
}

void KvStore::ReleaseChunk(const Chunk& chunk) {
  const uint32_t head = chunk.first_segment;
  // Moved out so that seg.mu (a leaf lock) is not held while the walk takes
  // the index's locks; no commit can add to the record any more.
  std::map<uint64_t, CommittedEntry> committed;
  {
    absl::MutexLock lock(&segments_[head].mu);
    committed.swap(segments_[head].lease_entries);
  }
  for (const auto& [offset, entry] : committed) CheckReleasedEntry(offset, entry);
  // Nothing can write the chunk any more and every surviving entry has been
  // verified: from here reads serve them from pool memory without a
  // checksum, like any other entry.
  segments_[head].remote_writable.store(false, std::memory_order_release);
  Seal(head);
}

bool KvStore::CheckReleasedEntry(uint64_t offset, const CommittedEntry& committed) {
  // The bytes must still be the committed entry: same key, same checksum,
  // and a checksum that verifies. The checksum compare is what catches a
  // holder that rewrote its own key's value (or another key's entry over
  // this one) after the commit without committing again.
  const absl::string_view bytes(pool_->data() + offset, committed.size);
  auto view = layout::VerifyEntry(bytes, committed.key);
  if (view.ok() && view->header->checksum == committed.checksum) return false;
  // Found by offset, not by the key now in the entry (which the holder may
  // have changed, or destroyed with the header): RemoveIf matches the slot of
  // the committed key's fingerprint that points at this offset. A slot that
  // was replaced meanwhile is not touched.
  const Slot slot{0, offset, committed.size};
  if (!index_->RemoveIf(committed.key, slot)) return false;
  Retire(slot);
  modified_->Increment();
  LOG(WARNING) << "entry of a " << committed.key.size() << "-byte key at offset " << offset
               << " was modified after its commit; removed when its lease ended";
  return true;
}

}  // namespace server
}  // namespace kvstore
