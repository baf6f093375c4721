// Copyright 2026 The kvstore Authors.
//
// KvStore's commits: the checks of a committed range and entry, the commit
// through the write hook (waiting for it, or started and finished by the
// hook: StartCommit) and the publication of an entry in the index.

#include <cassert>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

using layout::Slot;

absl::Status KvStore::Commit(uint64_t offset, uint64_t size, bool verify_checksum) {
  return CommitEntry(offset, size, verify_checksum, options_.write_hook);
}

absl::Status KvStore::CommitEntry(uint64_t offset, uint64_t size, bool verify_checksum,
                                  WriteHook* hook, bool key_locked) {
  KV_ASSIGN_OR_RETURN(const uint32_t head, CommitRun(offset, size));
  Segment& seg = segments_[head];
  // In a lease chunk the holder can rewrite the entry at any moment. With a
  // hook the entry travels to the backups: it is copied first and the copy
  // is what is checked and sent, so a holder scribbling over its own entry
  // cannot make a backup refuse it (and be dropped from the in-sync set).
  const bool lease = seg.remote_writable.load(std::memory_order_acquire);
  std::string entry_copy;
  absl::string_view bytes(pool_->data() + offset, size);
  if (lease && hook != nullptr) {
    entry_copy.assign(bytes.data(), bytes.size());
    bytes = entry_copy;
  }
  KV_ASSIGN_OR_RETURN(layout::EntryView view, CheckEntry(bytes, size, verify_checksum));

  // In a lease chunk the key is copied once, and that copy is what is
  // published and recorded.
  std::string key_copy;
  absl::string_view key = view.key;
  if (lease) {
    key_copy.assign(view.key.data(), view.key.size());
    key = key_copy;
    // Recorded before the hook runs: an overlapping commit is refused
    // before anything is sent to a backup.
    uint64_t checksum = view.header->checksum;
    absl::MutexLock lock(&seg.mu);
    KV_RETURN_IF_ERROR(RecordLeaseEntryLocked(seg, offset, size, checksum, key_copy));
  }
  bool published = false;
  const absl::Status s =
      PublishThroughHook(key, bytes, head, offset, size, layout::EntryExpiresAtMs(*view.header),
                         hook, key_locked, &published);
  if (!published && lease) {
    // Not published (the hook refused, or the index was full): a lease
    // holder may try the offset again.
    absl::MutexLock lock(&seg.mu);
    seg.lease_entries.erase(offset);
  }
  return s;
}

absl::Status KvStore::CommitReserved(const Reservation& r, const layout::KeyHash* key_hash) {
  return CommitReservedThrough(r, options_.write_hook, key_hash);
}

absl::Status KvStore::CommitReservedThrough(const Reservation& r, WriteHook* hook,
                                            const layout::KeyHash* key_hash) {
  assert(r.ptr == pool_->data() + r.offset);
  const uint32_t head = segments_[SegmentOf(r.offset)].run_head;
  assert(!segments_[head].remote_writable.load(std::memory_order_relaxed));
  layout::EntryHeader h;
  std::memcpy(&h, r.ptr, sizeof(h));
  const absl::string_view key(r.ptr + layout::kEntryHeaderBytes, h.key_len);
  bool published;
  return PublishThroughHook(key, absl::string_view(r.ptr, r.size), head, r.offset, r.size,
                            layout::EntryExpiresAtMs(h), hook, /*key_locked=*/false, &published,
                            key_hash);
}

absl::Status KvStore::PublishThroughHook(absl::string_view key, absl::string_view bytes,
                                         uint32_t head, uint64_t offset, uint64_t size,
                                         uint64_t expires_at_ms, WriteHook* hook, bool key_locked,
                                         bool* published, const layout::KeyHash* key_hash) {
  *published = false;
  // Hashed once, for the key's lock and for the index (or by the caller).
  assert(key_hash == nullptr || *key_hash == index_->Hash(key));
  const layout::KeyHash h = key_hash != nullptr ? *key_hash : index_->Hash(key);
  auto publish = [&] {
    absl::Status p = PublishEntry(key, head, offset, size, expires_at_ms, &h);
    *published = p.ok();
    return p;
  };
  // A client write (hook or not) holds its key's lock, so that an Update()
  // of the key never has a write land between its read and its own write.
  // Installs of replicated writes (hook null) come from the one primary, in
  // order, and need none.
  const bool lock = !key_locked && hook == options_.write_hook;
  if (lock) key_locks_.Lock(h);
  absl::Status s = hook != nullptr ? hook->Write(key, bytes, publish) : publish();
  if (lock) key_locks_.Unlock(h);
  return s;
}

absl::StatusOr<uint32_t> KvStore::CommitRun(uint64_t offset, uint64_t size) const {
  // An RDMA commit's range comes off the wire: written so that no sum can
  // overflow before the range is known to lie inside the arena.
  if (size == 0 || offset % layout::kEntryAlign != 0 || size % layout::kEntryAlign != 0 ||
      offset >= pool_->data_bytes() || size > pool_->data_bytes() - offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry range [", offset, ", +", size, ") is not a valid pool range"));
  }
  // The whole entry must lie in one allocated run: its live bytes and its
  // entry-list record are kept on that run's head.
  const uint32_t head = segments_[SegmentOf(offset)].run_head;
  const Segment& seg = segments_[head];
  const uint64_t run_end = (uint64_t{head} + seg.run_length) * options_.segment_bytes;
  if (offset + size > run_end || seg.state.load() == SegState::kFree) {
    return absl::InvalidArgumentError("entry range is not inside one allocated run");
  }
  return head;
}

absl::StatusOr<layout::EntryView> KvStore::CheckEntry(absl::string_view bytes, uint64_t size,
                                                      bool verify_checksum) const {
  // The bytes were written before the commit, by this server or by a
  // client's RDMA WRITE into its lease chunk; either way they are parsed
  // against exactly [offset, offset + size), checksum included unless the
  // server computed it itself.
  KV_ASSIGN_OR_RETURN(layout::EntryView view, verify_checksum ? layout::ParseEntry(bytes)
                                                              : layout::ParseEntryHeader(bytes));
  if (layout::EntryBytes(view.key.size(), view.value.size()) != size) {
    return absl::InvalidArgumentError("entry lengths do not match the committed size");
  }
  KV_RETURN_IF_ERROR(options_.limits.CheckKey(view.key));
  KV_RETURN_IF_ERROR(options_.limits.CheckValueLength(view.value.size()));
  return view;
}

bool KvStore::StartCommit(uint64_t offset, uint64_t size, bool verify_checksum,
                          std::function<void(absl::Status)> done) {
  WriteHook* hook = options_.write_hook;
  if (hook == nullptr) return false;
  // Anything Commit() would refuse, it refuses with its reason.
  absl::StatusOr<uint32_t> head = CommitRun(offset, size);
  if (!head.ok()) return false;
  const uint32_t run = *head;
  Segment& seg = segments_[run];
  // In a lease chunk the holder can rewrite the entry at any moment: as in
  // CommitEntry, a copy is what is checked and sent (and names the key),
  // kept until `done`, and whether it was published decides whether the
  // offset stays recorded. Elsewhere the pool's bytes stay put until `done`
  // (the caller's reservation).
  std::shared_ptr<LeaseCommitCopy> copy;
  absl::string_view bytes(pool_->data() + offset, size);
  if (seg.remote_writable.load(std::memory_order_acquire)) {
    copy = std::make_shared<LeaseCommitCopy>();
    copy->entry.assign(bytes.data(), bytes.size());
    bytes = copy->entry;
  }
  absl::StatusOr<layout::EntryView> view = CheckEntry(bytes, size, verify_checksum);
  if (!view.ok()) return false;
  const absl::string_view key = view->key;
  // Held until the write ends, as CommitEntry holds it; a busy stripe (a
  // write of the key, or of one sharing its stripe, under way) would make
  // this thread wait: the caller's Commit() does that instead.
  const layout::KeyHash h = index_->Hash(key);
  if (!key_locks_.TryLock(h)) return false;
  if (copy != nullptr) {
    // Recorded before the hook runs, as in CommitEntry: an overlapping
    // commit is refused before anything is sent to a backup.
    absl::MutexLock lock(&seg.mu);
    if (!RecordLeaseEntryLocked(seg, offset, size, view->header->checksum, std::string(key)).ok()) {
      key_locks_.Unlock(h);
      return false;
    }
  }
  return StartPublishThroughHook(hook, key, h, bytes, run, offset, size,
                                 layout::EntryExpiresAtMs(*view->header), std::move(copy),
                                 std::move(done));
}

bool KvStore::StartCommitReserved(const Reservation& r, std::function<void(absl::Status)> done) {
  WriteHook* hook = options_.write_hook;
  if (hook == nullptr) return false;
  assert(r.ptr == pool_->data() + r.offset);
  const uint32_t run = segments_[SegmentOf(r.offset)].run_head;
  layout::EntryHeader h;
  std::memcpy(&h, r.ptr, sizeof(h));
  const absl::string_view key(r.ptr + layout::kEntryHeaderBytes, h.key_len);
  // As in StartCommit(): a busy stripe sends the caller to CommitReserved().
  const layout::KeyHash kh = index_->Hash(key);
  if (!key_locks_.TryLock(kh)) return false;
  return StartPublishThroughHook(hook, key, kh, absl::string_view(r.ptr, r.size), run, r.offset,
                                 r.size, layout::EntryExpiresAtMs(h), /*copy=*/nullptr,
                                 std::move(done));
}

struct KvStore::StartedWrite {
  absl::string_view key;
  layout::KeyHash h;
  uint32_t run;
  uint64_t offset;
  uint64_t size;
  uint64_t expires_at_ms;
  std::shared_ptr<LeaseCommitCopy> copy;
  std::function<void(absl::Status)> done;
};

bool KvStore::StartPublishThroughHook(WriteHook* hook, absl::string_view key,
                                      const layout::KeyHash& h, absl::string_view bytes,
                                      uint32_t run, uint64_t offset, uint64_t size,
                                      uint64_t expires_at_ms, std::shared_ptr<LeaseCommitCopy> copy,
                                      std::function<void(absl::Status)> done) {
  // One block for both callbacks, which capture two pointers each and so
  // live inside their std::function: capturing the fields themselves cost
  // a heap block per callback. The hook runs `publish` (at most once)
  // before `finish`, and `finish` exactly once when it took the write,
  // never when it declined: `finish` owns the block.
  auto* w =
      new StartedWrite{key, h, run, offset, size, expires_at_ms, std::move(copy), std::move(done)};
  auto publish = [this, w] {
    absl::Status p = PublishEntry(w->key, w->run, w->offset, w->size, w->expires_at_ms, &w->h);
    if (w->copy != nullptr && p.ok()) w->copy->published.store(true, std::memory_order_release);
    return p;
  };
  auto end = [this](StartedWrite& sw) {
    if (sw.copy != nullptr) ForgetUnpublishedLeaseEntry(sw.run, sw.offset, *sw.copy);
    key_locks_.Unlock(sw.h);
  };
  auto finish = [w, end](absl::Status s) {
    std::unique_ptr<StartedWrite> owned(w);
    end(*owned);
    owned->done(std::move(s));
  };
  if (hook->StartWrite(key, h, bytes, std::move(publish), std::move(finish))) return true;
  std::unique_ptr<StartedWrite> owned(w);
  end(*owned);
  return false;
}

bool KvStore::StartDelete(absl::string_view key, std::function<void(absl::Status)> done) {
  WriteHook* hook = options_.write_hook;
  if (hook == nullptr || !options_.limits.CheckKey(key).ok()) return false;
  // The caller's key may be a view into a buffer it reuses at once (an
  // RDMA receive): the write keeps its own copy until `done`.
  auto owned = std::make_shared<const std::string>(key);
  const layout::KeyHash h = index_->Hash(*owned);
  if (!key_locks_.TryLock(h)) return false;
  auto publish = [this, owned] { return Unpublish(*owned); };
  auto finish = [this, owned, h, done = std::move(done)](absl::Status s) {
    key_locks_.Unlock(h);
    done(std::move(s));
  };
  // An empty entry is a delete (WriteHook::Write).
  if (hook->StartWrite(*owned, h, {}, std::move(publish), std::move(finish))) return true;
  key_locks_.Unlock(h);
  return false;
}

void KvStore::ForgetUnpublishedLeaseEntry(uint32_t head, uint64_t offset,
                                          const LeaseCommitCopy& copy) {
  if (copy.published.load(std::memory_order_acquire)) return;
  // Not published (declined, refused, or the index was full): a lease
  // holder may try the offset again.
  Segment& seg = segments_[head];
  absl::MutexLock lock(&seg.mu);
  seg.lease_entries.erase(offset);
}

absl::Status KvStore::PublishEntry(absl::string_view key, uint32_t head, uint64_t offset,
                                   uint64_t size, uint64_t expires_at_ms,
                                   const layout::KeyHash* hash) {
  Segment& seg = segments_[head];
  {
    absl::MutexLock lock(&seg.mu);
    // Count the bytes live before the slot can point at them, so a
    // concurrent overwrite that retires this entry never drives the count
    // negative.
    seg.live_bytes.fetch_add(static_cast<int64_t>(size));
    // The run's entry list is what the cleaner walks. The offset is kept in
    // kEntryAlign units from the run's start, which fits 32 bits in a pool of
    // at most layout::kMaxPoolBytes.
    seg.entries.push_back(static_cast<uint32_t>((offset - uint64_t{head} * options_.segment_bytes) /
                                                layout::kEntryAlign));
  }
  // Publication: Upsert() stores the slot word with release semantics after
  // the entry's bytes are in place, so a local reader whose acquire load
  // sees the word reads the complete entry; a client reads the word, then
  // the entry in a later READ, and verifies its checksum regardless. The
  // fingerprint is filled in by Upsert().
  auto old = hash != nullptr ? index_->Upsert(key, Slot{0, offset, size}, *hash)
                             : index_->Upsert(key, Slot{0, offset, size});
  if (!old.ok()) {
    // Index full: never published, so the bytes counted above are dead.
    index_full_->Increment();
    Retire(Slot{0, offset, size}, /*published=*/false);
    return old.status();
  }
  // The replaced entries stop counting as live; readers that loaded an old
  // slot word can still read its entry for the grace period.
  for (const Slot& replaced : *old) Retire(replaced);
  if (expires_at_ms != 0) {
    volatile_keys_.fetch_add(1, std::memory_order_relaxed);
    expiry_.Push({expires_at_ms, static_cast<uint32_t>(offset / layout::kEntryAlign),
                  static_cast<uint32_t>(size / layout::kEntryAlign)});
  }
  commits_->Increment();
  return absl::OkStatus();
}

}  // namespace server
}  // namespace kvstore
