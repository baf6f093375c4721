// Copyright 2026 The kvstore Authors.
//
// KvStore's side of replication (architecture §19.3): a backup installing
// the entries and deletes its primary sends, and a primary copying entries
// out for a joining replica. None of it passes the write hook.

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

absl::Status KvStore::InstallReplica(absl::string_view entry, absl::Time deadline,
                                     const layout::KeyHash* key_hash,
                                     absl::string_view hashed_key) {
  // Only the lengths are read from the frame (at any alignment: `entry` may
  // lie anywhere in a batch's frame); the copy in pool memory is what is
  // verified, checksum included, so what is published is exactly what was
  // checked. Anything unusual is left to ReadEntryHeader() to name.
  uint32_t lengths[2] = {0, 0};  // key_len, value_len
  static_assert(offsetof(layout::EntryHeader, value_len) ==
                offsetof(layout::EntryHeader, key_len) + sizeof(uint32_t));
  if (entry.size() >= layout::kEntryHeaderBytes) {
    std::memcpy(lengths, entry.data() + offsetof(layout::EntryHeader, key_len), sizeof(lengths));
  }
  const uint32_t key_len = lengths[0];
  const uint32_t value_len = lengths[1];
  if (entry.size() < layout::kEntryHeaderBytes ||
      layout::EntryBytes(key_len, value_len) != entry.size()) {
    KV_RETURN_IF_ERROR(layout::ReadEntryHeader(entry).status());
    return absl::DataLossError("replicated entry lengths do not match its size");
  }
  absl::MutexLock lock(&replica_mu_);
  if (replica_writer_ == nullptr) replica_writer_ = NewWriter();
  const absl::Duration space_wait =
      deadline == absl::InfiniteFuture()
          ? absl::ZeroDuration()
          : std::clamp(deadline - absl::Now(), absl::ZeroDuration(), absl::Seconds(5));
  KV_ASSIGN_OR_RETURN(Reservation r, replica_writer_->Reserve(key_len, value_len, space_wait));
  if (space_wait > absl::ZeroDuration() && absl::Now() > deadline) {
    replica_writer_->Done(r);  // never committed: dead space
    return absl::DeadlineExceededError(
        "replicated write got space only after its deadline: not installed");
  }
  // The reservation is this writer's alone until it is committed, so the
  // entry is checked in place (magic, lengths, checksum) in the copy's pass;
  // then the limits, which Commit() would check; the rest of Commit()'s
  // checks hold for a reservation (CommitReserved()).
  absl::StatusOr<layout::EntryView> view = layout::CopyEntryInPlace(r.ptr, entry);
  absl::Status s = view.status();
  if (s.ok()) s = options_.limits.CheckKey(view->key);
  if (s.ok()) s = options_.limits.CheckValueLength(view->value.size());
  uint64_t version = 0;
  if (s.ok()) {
    version = layout::EntryVersion(*view->header);
    // The caller's hash only for the key the copy holds: a frame whose key
    // field and entry disagree must not index the entry under another
    // key's hash.
    s = CommitReservedThrough(r, /*hook=*/nullptr,
                              key_hash != nullptr && view->key == hashed_key ? key_hash : nullptr);
  }
  replica_writer_->Done(r);
  if (s.ok()) KeepVersionsAbove(version);
  return s;
}

absl::Status KvStore::CommitReplica(uint64_t offset, uint64_t size) {
  KV_RETURN_IF_ERROR(CommitEntry(offset, size, /*verify_checksum=*/true, /*hook=*/nullptr));
  // Committed and verified: the header is the one the checksum covered.
  auto view = layout::ParseEntryHeader(ArenaBytes(offset, size));
  if (view.ok()) KeepVersionsAbove(layout::EntryVersion(*view->header));
  return absl::OkStatus();
}

absl::string_view KvStore::ArenaBytes(uint64_t offset, uint64_t size) const {
  return absl::string_view(pool_->data() + offset, size);
}

// A backup promoted to primary must hand out versions above every version
// it holds, so they keep increasing across a failover.
void KvStore::KeepVersionsAbove(uint64_t version) {
  uint64_t next = next_version_.load(std::memory_order_relaxed);
  while (next <= version &&
         !next_version_.compare_exchange_weak(next, version + 1, std::memory_order_relaxed)) {
  }
}

absl::Status KvStore::DeleteReplica(absl::string_view key) {
  KV_RETURN_IF_ERROR(options_.limits.CheckKey(key));
  absl::Status s = Unpublish(key);
  return absl::IsNotFound(s) ? absl::OkStatus() : s;
}

bool KvStore::DeleteReplicaIf(absl::string_view key, const layout::Slot& seen) {
  if (!index_->RemoveIf(key, seen)) return false;
  Retire(seen);
  deletes_->Increment();
  return true;
}

absl::StatusOr<std::string> KvStore::CopyEntry(absl::string_view key) const {
  // As Get(): the slot may be replaced under us, so the copy is verified
  // against the key and retried a few times.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<layout::Slot> slot = index_->Lookup(key);
    if (!slot) return absl::NotFoundError("key not found");
    // A pin keeps the run from being freed while it is copied.
    const uint32_t head = segments_[SegmentOf(slot->offset)].run_head;
    segments_[head].pins.fetch_add(1, std::memory_order_acq_rel);
    std::string copy(pool_->data() + slot->offset, slot->size);
    segments_[head].pins.fetch_sub(1, std::memory_order_acq_rel);
    if (layout::VerifyEntry(copy, key).ok()) return copy;
  }
  return absl::UnavailableError("key kept changing under the copy; retry");
}

}  // namespace server
}  // namespace kvstore
