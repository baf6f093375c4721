// Copyright 2026 The kvstore Authors.
//
// KvStore's read-modify-write paths (Stat, Update, UpdateKeys) and the
// expiry cycle that deletes keys whose time has passed.

#include <cstring>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

using layout::Slot;

absl::StatusOr<KeyInfo> KvStore::Stat(absl::string_view key) {
  KeyInfo info;
  KV_ASSIGN_OR_RETURN(PinnedValue v, GetEntry(key, &info.expires_at_ms));
  info.value_len = v.value().size();
  return info;
}

absl::Status KvStore::ReadCurrent(absl::string_view key, CurrentValue* current, PinnedValue* pin) {
  absl::StatusOr<PinnedValue> v = GetEntry(key, &current->expires_at_ms);
  if (absl::IsNotFound(v.status())) {
    *current = CurrentValue();
    return absl::OkStatus();
  }
  KV_RETURN_IF_ERROR(v.status());
  *pin = std::move(*v);
  current->exists = true;
  current->value = pin->value();
  return absl::OkStatus();
}

absl::Status KvStore::Update(Writer* writer, absl::string_view key, UpdateFn decide,
                             absl::Duration space_wait) {
  KV_RETURN_IF_ERROR(options_.limits.CheckKey(key));
  KeyLocks::Guard lock(key_locks_, index_->Hash(key));
  CurrentValue current;
  PinnedValue pin;  // keeps current.value readable until the write is done
  KV_RETURN_IF_ERROR(ReadCurrent(key, &current, &pin));
  KV_ASSIGN_OR_RETURN(KeyUpdate u, decide(current));
  if (u.action == KeyUpdate::Action::kDelete && !current.exists) return absl::OkStatus();
  return ApplyLocked(writer, key, u, space_wait);
}

absl::Status KvStore::UpdateKeys(Writer* writer, absl::Span<const absl::string_view> keys,
                                 MultiUpdateFn decide) {
  for (absl::string_view k : keys) KV_RETURN_IF_ERROR(options_.limits.CheckKey(k));
  absl::InlinedVector<layout::KeyHash, 4> hashes;
  for (absl::string_view k : keys) hashes.push_back(index_->Hash(k));
  KeyLocks::Guard lock(key_locks_, hashes);
  std::vector<CurrentValue> current(keys.size());
  std::vector<PinnedValue> pins(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    KV_RETURN_IF_ERROR(ReadCurrent(keys[i], &current[i], &pins[i]));
  }
  std::vector<KeyUpdate> updates;
  KV_RETURN_IF_ERROR(decide(current, &updates));
  for (size_t i = 0; i < keys.size() && i < updates.size(); ++i) {
    if (updates[i].action == KeyUpdate::Action::kDelete && !current[i].exists) continue;
    KV_RETURN_IF_ERROR(ApplyLocked(writer, keys[i], updates[i], absl::ZeroDuration()));
  }
  return absl::OkStatus();
}

absl::Status KvStore::ApplyLocked(Writer* writer, absl::string_view key, const KeyUpdate& u,
                                  absl::Duration space_wait) {
  switch (u.action) {
    case KeyUpdate::Action::kKeep:
      return absl::OkStatus();
    case KeyUpdate::Action::kDelete: {
      absl::Status s = DeleteLocked(key);
      return absl::IsNotFound(s) ? absl::OkStatus() : s;
    }
    case KeyUpdate::Action::kWrite:
      break;
  }
  uint64_t len = 0;
  for (absl::string_view piece : u.value) len += piece.size();
  KV_ASSIGN_OR_RETURN(Reservation r, writer->Reserve(key.size(), len, space_wait));
  // The pieces may point into the key's current entry, which stays pinned
  // (and unchanged: entries are never updated in place) until the caller's
  // PinnedValue goes.
  layout::BeginEntry(r.ptr, key, static_cast<uint32_t>(len), Version(), u.expires_at_ms);
  char* dst = r.ptr + layout::kEntryHeaderBytes + key.size();
  for (absl::string_view piece : u.value) {
    if (!piece.empty()) std::memcpy(dst, piece.data(), piece.size());
    dst += piece.size();
  }
  layout::SealEntry(r.ptr);
  absl::Status s = CommitEntry(r.offset, r.size, /*verify_checksum=*/false, options_.write_hook,
                               /*key_locked=*/true);
  writer->Done(r);
  return s;
}

// --- Expiry ------------------------------------------------------------------

bool KvStore::RecordLive(const ExpiryQueue::Record& r) const {
  const uint64_t offset = uint64_t{r.offset_units} * layout::kEntryAlign;
  const uint64_t size = uint64_t{r.size_units} * layout::kEntryAlign;
  if (offset + size > pool_->data_bytes() || size < layout::kEntryHeaderBytes) return false;
  // The record is a hint: the bytes may hold anything by now, so every
  // field is checked before the key is taken from them.
  layout::EntryHeader h;
  std::memcpy(&h, pool_->data() + offset, sizeof(h));
  if (h.magic != layout::kEntryMagic || h.key_len > options_.limits.max_key_bytes ||
      layout::EntryBytes(h.key_len, h.value_len) != size) {
    return false;
  }
  absl::string_view key(pool_->data() + offset + layout::kEntryHeaderBytes, h.key_len);
  const std::optional<Slot> slot = index_->Lookup(key);
  return slot && slot->offset == offset && slot->size == size;
}

bool KvStore::ExpireRecord(const ExpiryQueue::Record& r, int64_t now_ms) {
  if (!RecordLive(r)) return false;
  const uint64_t offset = uint64_t{r.offset_units} * layout::kEntryAlign;
  layout::EntryHeader h;
  std::memcpy(&h, pool_->data() + offset, sizeof(h));
  // A copy of the key: once unlocked below, the entry's bytes may be reused.
  const std::string key(pool_->data() + offset + layout::kEntryHeaderBytes, h.key_len);
  KeyLocks::Guard lock(key_locks_, index_->Hash(key));
  // Looked up again under the key's lock: a write of the key since the
  // record was checked has replaced the entry (and brought its own record).
  const std::optional<Slot> slot = index_->Lookup(key);
  if (!slot || slot->offset != offset || !layout::Expired(layout::EntryExpiresAtMs(h), now_ms)) {
    return false;
  }
  WriteHook* hook = options_.write_hook;
  if (hook != nullptr && !hook->MayWrite(key)) {
    // Not this node's to delete (a backup, or a slot moving away): readers
    // here already see it absent, and the primary's delete will come. Look
    // again later in case this node becomes the key's primary meanwhile.
    expiry_.Push({static_cast<uint64_t>(now_ms) + 2000, r.offset_units, r.size_units});
    return false;
  }
  bool removed = false;
  auto publish = [&] {
    // Only this entry: RemoveIf never takes a newer write of the key.
    removed = index_->RemoveIf(key, *slot);
    if (!removed) return absl::NotFoundError("key not found");
    Retire(*slot);
    expired_->Increment();
    return absl::OkStatus();
  };
  const absl::Status s = hook != nullptr ? hook->Write(key, {}, publish) : publish();
  if (!s.ok() && !removed && !absl::IsNotFound(s)) {
    // Refused (a replica unreachable, the map changing): try again later.
    expiry_.Push({static_cast<uint64_t>(now_ms) + 1000, r.offset_units, r.size_units});
  }
  return removed;
}

size_t KvStore::ExpireDue() {
  const int64_t now_ms = NowMs();
  size_t expired = 0;
  std::vector<ExpiryQueue::Record> due;
  // In batches, so the queue's lock is never held for long; a batch may
  // re-queue records (later), which a later pass sees.
  while (expiry_.PopDue(now_ms, 1024, &due) > 0) {
    for (const ExpiryQueue::Record& r : due) expired += ExpireRecord(r, now_ms);
    absl::MutexLock lock(&wake_mu_);
    if (stopping_) break;
  }
  // Records of overwritten or deleted entries stay until due; drop them in
  // bulk once they outnumber the live keys, so a key rewritten with a long
  // TTL over and over cannot grow the queue without bound.
  expiry_.Compact(2 * index_->size() + 65536,
                  [this](const ExpiryQueue::Record& r) { return RecordLive(r); });
  return expired;
}

void KvStore::ExpiryLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&wake_mu_);
      auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(wake_mu_) { return stopping_; };
      wake_mu_.AwaitWithTimeout(absl::Condition(&stop), options_.expiry_interval);
      if (stopping_) return;
    }
    ExpireDue();
  }
}

}  // namespace server
}  // namespace kvstore
