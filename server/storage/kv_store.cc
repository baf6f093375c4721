// Copyright 2026 The kvstore Authors.
//
// KvStore's write and read paths: writers and their reservations, segment
// allocation, Commit, Get, Delete and the lease chunks. The grace-period
// queue, the cleaner thread and compaction are in kv_store_cleaner.cc.

#include "server/storage/kv_store.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/sync/thread_name.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {

using layout::Slot;

// ---------------------------------------------------------------------------
// Writer

KvStore::Writer::~Writer() {
  // The open segment takes no more entries: drop the writer's own pin and
  // seal it, so that it can be compacted or reclaimed as its entries die.
  if (open_) {
    store_->Unpin(open_->first_segment);
    store_->Seal(open_->first_segment);
  }
}

absl::StatusOr<Reservation> KvStore::Writer::Reserve(uint64_t key_len, uint64_t value_len,
                                                     absl::Duration space_wait) {
  if (!shared_) return ReserveLocked(key_len, value_len, space_wait);
  absl::MutexLock lock(&mu_);
  return ReserveLocked(key_len, value_len, space_wait);
}

absl::StatusOr<Reservation> KvStore::Writer::ReserveLocked(uint64_t key_len, uint64_t value_len,
                                                           absl::Duration space_wait) {
  // Limits before allocation: an oversized request takes no space.
  KV_RETURN_IF_ERROR(store_->options_.limits.CheckKeyLength(key_len));
  KV_RETURN_IF_ERROR(store_->options_.limits.CheckValueLength(value_len));
  const uint64_t size = layout::EntryBytes(key_len, value_len);
  const uint64_t seg = store_->options_.segment_bytes;
  Reservation r;
  r.size = size;
  if (size > seg) {
    // Larger than a segment: a run of its own, pinned until Done().
    KV_ASSIGN_OR_RETURN(
        Chunk run,
        store_->AllocateRun(static_cast<uint32_t>((size + seg - 1) / seg), cleaner_, space_wait));
    store_->segments_[run.first_segment].pins.fetch_add(1, std::memory_order_acq_rel);
    store_->segments_[run.first_segment].probation.store(!cleaner_, std::memory_order_relaxed);
    r.offset = run.offset;
    r.dedicated = run;
  } else {
    if (!open_ || used_ + size > open_->length) {
      // The entry does not fit: the rest of the open segment is left unused
      // (never live, so it costs nothing once the segment is reclaimed).
      // The new segment is allocated first, so a failure leaves the old one
      // open for smaller entries.
      KV_ASSIGN_OR_RETURN(Chunk next, store_->AllocateRun(1, cleaner_, space_wait));
      if (open_) {
        // The writer's own pin on the segment keeps it from being reclaimed
        // while reservations in it may still be outstanding; those hold pins
        // of their own.
        store_->Unpin(open_->first_segment);
        store_->Seal(open_->first_segment);
      }
      open_ = next;
      used_ = 0;
      store_->segments_[next.first_segment].probation.store(!cleaner_, std::memory_order_relaxed);
      store_->segments_[next.first_segment].pins.fetch_add(1, std::memory_order_acq_rel);
    }
    // EntryBytes() is a multiple of kEntryAlign, so every entry stays aligned.
    // The reservation's own pin (on the head: a single-segment run) lasts
    // until Done(), even after the writer has moved on to another segment.
    return TakeFromOpen(size);
  }
  r.ptr = store_->pool_->data() + r.offset;
  return r;
}

void KvStore::Writer::Done(Reservation& r) {
  if (r.ptr == nullptr) return;
  // The reservation's pin still holds, so run_head is the run it was made in.
  const uint32_t head = store_->segments_[store_->SegmentOf(r.offset)].run_head;
  store_->Unpin(head);
  // A dedicated run holds this one entry only, so it is finished now; a
  // shared segment is sealed when the writer moves on or is destroyed.
  if (r.dedicated) store_->Seal(head);
  r = Reservation();
}

// ---------------------------------------------------------------------------
// KvStore

KvStore::KvStore(MemoryPool* pool, const KvStoreOptions& options)
    : own_registry_(options.registry == nullptr ? std::make_unique<metrics::Registry>() : nullptr),
      registry_(options.registry != nullptr ? options.registry : own_registry_.get()),
      pool_(pool),
      options_(options),
      clock_(options.clock != nullptr ? *options.clock : Clock::Real()),
      segment_count_(static_cast<uint32_t>(pool->data_bytes() / options.segment_bytes)),
      segments_(new Segment[segment_count_ == 0 ? 1 : segment_count_]),
      max_memory_(options.max_memory_bytes),
      policy_(options.eviction_policy),
      access_(std::make_unique<AccessCounts>(pool->data_bytes() / layout::kEntryAlign)) {
  RegisterMetrics();
}

absl::StatusOr<std::unique_ptr<KvStore>> KvStore::Create(MemoryPool* pool,
                                                         const KvStoreOptions& options) {
  KV_RETURN_IF_ERROR(options.limits.Validate());
  if (options.segment_bytes < 64 * 1024 || options.segment_bytes % layout::kEntryAlign != 0) {
    return absl::InvalidArgumentError(absl::StrCat("segment size must be a multiple of ",
                                                   layout::kEntryAlign, " and at least 64 KiB"));
  }
  if (options.grace_period < KvStoreOptions::kMinGracePeriod ||
      options.grace_period > KvStoreOptions::kMaxGracePeriod) {
    // Clients get grace/2 in whole milliseconds as their read span: under
    // 2 ms that is 0, and the client would round it up to a span as long
    // as the grace period itself.
    return absl::InvalidArgumentError(
        absl::StrCat("grace period ", absl::FormatDuration(options.grace_period), " is outside [",
                     absl::FormatDuration(KvStoreOptions::kMinGracePeriod), ", ",
                     absl::FormatDuration(KvStoreOptions::kMaxGracePeriod),
                     "]: clients read for at most half of it (in whole milliseconds, ",
                     absl::ToInt64Milliseconds(options.grace_period / 2), " ms here)"));
  }
  if (pool->data_bytes() < 2 * options.segment_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("pool of ", pool->data_bytes(),
                                                   " bytes holds fewer than two segments of ",
                                                   options.segment_bytes, " bytes"));
  }
  if (pool->data_bytes() > layout::kMaxPoolBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pool size is limited to ", layout::kMaxPoolBytes, " bytes by the slot format"));
  }
  layout::IndexGeometry geometry;
  geometry.bucket_count = pool->index_bytes() / layout::kBucketBytes;
  geometry.seed = options.index_seed;
  if (geometry.bucket_count == 0) return absl::InvalidArgumentError("index has no buckets");
  // Everything that can fail has been checked: from here the store is built
  // in full, and the cleaner thread starts last, on a complete store.
  std::unique_ptr<KvStore> store(new KvStore(pool, options));
  store->index_ =
      std::make_unique<KvIndex>(pool->index(), geometry, pool->data(), pool->data_bytes());
  // Every segment starts free and as the head of its own (empty) run.
  for (uint32_t i = 0; i < store->segment_count_; ++i) store->segments_[i].run_head = i;
  store->cleaner_reserve_ = std::max<uint32_t>(1, store->segment_count_ / 64);
  // No other thread exists yet; the locks satisfy the GUARDED_BY analysis.
  {
    absl::MutexLock lock(&store->alloc_mu_);
    store->free_segments_ = store->segment_count_;
  }
  {
    absl::MutexLock lock(&store->cleaner_mu_);
    store->cleaner_writer_ = std::unique_ptr<Writer>(new Writer(store.get(), /*cleaner=*/true));
  }
  {
    // Eviction copies kept entries forward as compaction does, and may use
    // the same reserve: it is what frees space.
    absl::MutexLock lock(&store->evict_mu_);
    store->evict_writer_ = std::unique_ptr<Writer>(new Writer(store.get(), /*cleaner=*/true));
  }
  store->SetMaxMemory(options.max_memory_bytes);
  if (options.cleaner_interval > absl::ZeroDuration()) {
    store->cleaner_ = std::thread([s = store.get()] {
      NameThread("kv-cleaner");
      s->CleanerLoop();
    });
  }
  if (options.expiry_interval > absl::ZeroDuration()) {
    store->expirer_ = std::thread([s = store.get()] {
      NameThread("kv-expiry");
      s->ExpiryLoop();
    });
  }
  return store;
}

KvStore::~KvStore() {
  // stopping_ is set under wake_mu_ so the cleaner's Await sees it at once
  // rather than after its interval.
  {
    absl::MutexLock lock(&wake_mu_);
    stopping_ = true;
  }
  if (cleaner_.joinable()) cleaner_.join();
  if (expirer_.joinable()) expirer_.join();
  // The thread that used the cleaner's writer is gone; destroying the writer
  // seals its open segment.
  absl::MutexLock lock(&cleaner_mu_);
  cleaner_writer_.reset();
  absl::MutexLock replica_lock(&replica_mu_);
  replica_writer_.reset();
  absl::MutexLock evict_lock(&evict_mu_);
  evict_writer_.reset();
}

// A sealed run takes no new reservations, so once its live count reaches 0
// only a late commit of a reservation made before the seal can raise it
// again, and ReclaimReady() checks for that.
void KvStore::Seal(uint32_t head) {
  Segment& s = segments_[head];
  // Eviction's FIFO is by sealing, not allocation: a segment that took
  // writes for a long time (the evictor's own, filled with the entries it
  // kept) is as young as its last entry.
  s.seal_seq.store(next_seal_seq_.fetch_add(1, std::memory_order_relaxed) + 1,
                   std::memory_order_relaxed);
  for (uint32_t i = head; i < head + s.run_length; ++i) {
    segments_[i].state.store(SegState::kSealed, std::memory_order_release);
  }
  MaybeScheduleReclaim(head);
}

void KvStore::Retire(const Slot& slot, bool published) {
  if (published) {
    layout::EntryHeader h;
    std::memcpy(&h, pool_->data() + slot.offset, sizeof(h));
    if (layout::EntryExpiresAtMs(h) != 0) volatile_keys_.fetch_sub(1, std::memory_order_relaxed);
  }
  // Marked dead before anything can be acknowledged: a one-sided reader
  // holding this location (an earlier slot READ, or a client's location
  // cache) must not take a superseded entry for the current value.
  layout::MarkEntryRetired(pool_->data() + slot.offset);
  // The count lives on the run head. The caller that brings it to exactly
  // zero schedules the reclaim (a no-op unless the run is sealed).
  const uint32_t head = segments_[SegmentOf(slot.offset)].run_head;
  const int64_t left = segments_[head].live_bytes.fetch_sub(static_cast<int64_t>(slot.size)) -
                       static_cast<int64_t>(slot.size);
  if (left == 0) MaybeScheduleReclaim(head);
}

void KvStore::Unpin(uint32_t segment) {
  segments_[segment].pins.fetch_sub(1, std::memory_order_acq_rel);
}

absl::Status KvStore::Put(Writer* writer, absl::string_view key, absl::string_view value,
                          absl::Duration space_wait, uint64_t expires_at_ms) {
  KV_RETURN_IF_ERROR(options_.limits.CheckKey(key));
  KV_ASSIGN_OR_RETURN(Reservation r, writer->Reserve(key.size(), value.size(), space_wait));
  layout::EncodeEntry(r.ptr, key, value, Version(), expires_at_ms);
  // EncodeEntry() has just computed the checksum over these very bytes.
  absl::Status s = Commit(r.offset, r.size, /*verify_checksum=*/false);
  // Done() either way: after a failed commit the bytes are dead space.
  writer->Done(r);
  return s;
}

absl::StatusOr<PinnedValue> KvStore::Get(absl::string_view key) {
  uint64_t expires_at_ms, offset;
  absl::StatusOr<PinnedValue> v = GetEntry(key, &expires_at_ms, &offset);
  // Client reads only (Update() and Stat() read through GetEntry()).
  (v.ok() ? hits_ : misses_)->Increment();
  if (v.ok() && eviction_policy() != EvictionPolicy::kNoEviction) {
    access_->Touch(offset / layout::kEntryAlign);
  }
  return v;
}

absl::StatusOr<PinnedValue> KvStore::GetEntry(absl::string_view key, uint64_t* expires_at_ms,
                                              uint64_t* offset) {
  // Bounded retries: a key overwritten faster than it can be read answers
  // kUnavailable instead of keeping a server thread spinning.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::optional<Slot> slot = index_->Lookup(key);
    if (!slot) return absl::NotFoundError("key not found");
    // The pin keeps the run from being freed (ReclaimReady() skips pinned
    // runs) for as long as the caller holds the PinnedValue, which for a
    // RESP reply lasts until writev has sent the value from pool memory.
    const uint32_t head = segments_[SegmentOf(slot->offset)].run_head;
    segments_[head].pins.fetch_add(1, std::memory_order_acq_rel);
    // Copied out, not cast: the pool is raw bytes, and the checks below read
    // one copy of the header even if a lease holder rewrites it meanwhile.
    layout::EntryHeader h;
    const char* entry = pool_->data() + slot->offset;
    std::memcpy(&h, entry, sizeof(h));
    // The slot was read a grace period before its entry could be freed;
    // confirm it still names this key (an overwrite may have raced us).
    if (h.magic == layout::kEntryMagic && h.key_len == key.size() &&
        slot->size >= layout::EntryBytes(key.size(), 0) &&
        std::memcmp(entry + layout::kEntryHeaderBytes, key.data(), key.size()) == 0 &&
        layout::EntryBytes(h.key_len, h.value_len) == slot->size) {
      // An expired entry reads as absent on every node at once; only the
      // primary's expiry cycle deletes it (ExpireDue()). The clock is read
      // only for entries that have an expiry.
      *expires_at_ms = layout::EntryExpiresAtMs(h);
      if (offset != nullptr) *offset = slot->offset;
      if (*expires_at_ms != 0 && layout::Expired(*expires_at_ms, NowMs())) {
        Unpin(head);
        return absl::NotFoundError("key not found");
      }
      if (segments_[head].remote_writable.load(std::memory_order_acquire)) {
        auto copied = CopyLeasedEntry(key, *slot, head);
        // kAborted: the entry was retired while we copied it; look again.
        if (copied.status().code() == absl::StatusCode::kAborted) continue;
        return copied;
      }
      PinnedValue v;
      v.store_ = this;
      v.segment_ = head;
      v.value_ = absl::string_view(entry + layout::kEntryHeaderBytes + h.key_len, h.value_len);
      return v;
    }
    // Not this key's entry any more: unpin and look the key up again.
    Unpin(head);
  }
  return absl::UnavailableError("key kept changing under the reader; retry");
}

bool KvStore::TakeCopyBudget(uint64_t bytes) {
  uint64_t held = copy_bytes_.load(std::memory_order_acquire);
  do {
    // Nothing held: one copy of any size goes, so no entry is unreadable.
    if (held != 0 && held + bytes > options_.lease_read_copy_bytes) return false;
  } while (!copy_bytes_.compare_exchange_weak(held, held + bytes, std::memory_order_acq_rel));
  return true;
}

absl::StatusOr<PinnedValue> KvStore::CopyLeasedEntry(absl::string_view key, const Slot& slot,
                                                     uint32_t head) {
  if (!TakeCopyBudget(slot.size)) {
    Unpin(head);
    copy_refused_->Increment();
    return absl::UnavailableError(absl::StrCat("reads of entries in live write leases hold ",
                                               options_.lease_read_copy_bytes,
                                               " bytes of copies already; retry"));
  }
  // Its lease holder can still WRITE here: copy first, then verify and
  // serve the copy, so what is sent is exactly what was checked.
  PinnedValue v;
  v.budget_store_ = this;
  v.budget_bytes_ = slot.size;
  v.copy_ = std::make_unique<char[]>(slot.size);
  std::memcpy(v.copy_.get(), pool_->data() + slot.offset, slot.size);
  // The copy needs no pool memory: the pin ends here, not with `v`.
  Unpin(head);
  auto view = layout::VerifyEntry(absl::string_view(v.copy_.get(), slot.size), key);
  uint32_t copied_magic;
  std::memcpy(&copied_magic, v.copy_.get(), sizeof(copied_magic));
  if (!view.ok() && copied_magic == layout::kRetiredEntryMagic) {
    // An overwrite retired the entry under the copy: not the holder's doing.
    return absl::AbortedError("entry retired while it was copied");
  }
  if (!view.ok()) {
    modified_->Increment();
    return absl::DataLossError(
        "the entry was overwritten after its commit by the client holding its write lease");
  }
  v.value_ = view->value;
  return v;
}

absl::Status KvStore::Delete(absl::string_view key) {
  // A key no commit could have stored is kInvalidArgument, not kNotFound.
  KV_RETURN_IF_ERROR(options_.limits.CheckKey(key));
  KeyLocks::Guard lock(key_locks_, index_->Hash(key));
  return DeleteLocked(key);
}

absl::Status KvStore::DeleteLocked(absl::string_view key) {
  // A DELETE of an absent key replicates too: deciding "absent" before the
  // hook's stripe lock would race a concurrent PUT of the key.
  auto publish = [&] { return Unpublish(key); };
  return options_.write_hook != nullptr ? options_.write_hook->Write(key, {}, publish) : publish();
}

absl::Status KvStore::Unpublish(absl::string_view key) {
  KvIndex::SlotList old = index_->Remove(key);
  if (old.empty()) return absl::NotFoundError("key not found");
  // A key whose time had passed was already gone to every reader: deleting
  // it is its expiry, and the caller sees it absent (DEL answers 0, as in
  // Redis). The header is read before Retire() marks the entry dead.
  layout::EntryHeader h;
  std::memcpy(&h, pool_->data() + old.front().offset, sizeof(h));
  const uint64_t expires_at_ms = layout::EntryExpiresAtMs(h);
  const bool expired = expires_at_ms != 0 && layout::Expired(expires_at_ms, NowMs());
  for (const Slot& slot : old) Retire(slot);
  if (expired) {
    expired_->Increment();
    return absl::NotFoundError("key not found");
  }
  deletes_->Increment();
  return absl::OkStatus();
}

int64_t KvStore::LiveBytes() const {
  // Run heads carry the run's count; a transiently negative count (retire
  // racing the commit's add) reads as zero rather than wrapping.
  int64_t live = 0;
  for (uint32_t i = 0; i < segment_count_; ++i) {
    if (segments_[i].run_head == i) live += std::max<int64_t>(0, segments_[i].live_bytes.load());
  }
  return live;
}

// Runs in the constructor, before any path can increment a counter, so the
// Counter pointers are never null once the store is in use.
void KvStore::RegisterMetrics() {
  metrics::Registry& r = *registry_;
  commits_ = r.AddCounter("kvstore_commits_total", "Entries published, by every transport.");
  deletes_ = r.AddCounter("kvstore_deletes_total", "Keys deleted, by every transport.");
  cleaner_passes_ = r.AddCounter("kvstore_cleaner_passes_total", "Cleaner passes run.");
  moved_entries_ = r.AddCounter("kvstore_cleaner_moved_entries_total",
                                "Live entries the cleaner copied out of sparse segments.");
  moved_bytes_ = r.AddCounter("kvstore_cleaner_moved_bytes_total",
                              "Bytes of live entries the cleaner copied.");
  reclaimed_ = r.AddCounter("kvstore_pool_segments_reclaimed_total",
                            "Segments freed after their grace period.");
  pool_full_ = r.AddCounter("kvstore_pool_full_errors_total",
                            "Allocations refused because the pool had no free segment.");
  space_waits_ = r.AddCounter("kvstore_pool_space_waits_total",
                              "Sleeps of writers held back, instead of refused, until a segment "
                              "left its grace period (only callers that allow a wait).");
  index_full_ = r.AddCounter("kvstore_index_full_errors_total",
                             "Commits refused because the key's index bucket was full.");
  modified_ = r.AddCounter("kvstore_modified_after_commit_total",
                           "Reads or releases that caught a lease holder's overwrite of a "
                           "committed entry.");
  expired_ = r.AddCounter("kvstore_expired_keys_total",
                          "Keys deleted because their expiry time had passed.");
  evicted_ = r.AddCounter("kvstore_evicted_keys_total",
                          "Keys deleted to keep memory under the limit (--maxmemory).");
  hits_ = r.AddCounter("kvstore_keyspace_hits_total",
                       "Server-side reads (RESP GET/MGET, gRPC Get) that found the key.");
  misses_ = r.AddCounter("kvstore_keyspace_misses_total",
                         "Server-side reads that found no live key (absent or expired).");
  copy_refused_ = r.AddCounter("kvstore_lease_read_copy_refused_total",
                               "Reads of entries in live leases refused because the copies "
                               "held reached the store's copy budget.");
  // Figures that live in the index, the pool and the segment table are read
  // at scrape time, so the hot path never copies them.
  // The callbacks capture `this`; their handles live in gauges_, declared
  // last in the class so they unregister before the state they read dies.
  auto gauge = [&](const char* name, const char* help, std::function<int64_t()> fn) {
    gauges_.push_back(r.AddCallbackGauge(name, help, {}, std::move(fn)));
  };
  gauge("kvstore_keys", "Keys in the index.", [this] { return int64_t(index_->size()); });
  gauges_.push_back(r.AddCallbackCounter(
      "kvstore_key_lock_waits_total",
      "Client writes that found their key's write lock held by another write of the same key "
      "(or stripe) and waited for it.",
      {}, [this] { return key_locks_.waits(); }));
  gauge("kvstore_keys_with_expiry", "Keys in the index that have an expiry time.",
        [this] { return std::max<int64_t>(0, volatile_keys_.load(std::memory_order_relaxed)); });
  gauge("kvstore_index_slots", "Slot capacity of the index.",
        [this] { return int64_t(index_->capacity()); });
  // The load factor in thousandths (gauges are integers): refusals
  // (kvstore_index_full_errors_total) start near 700 with two 8-slot
  // buckets per key, so an operator watching this sees them coming.
  gauge("kvstore_index_load_permille", "Keys per index slot, in thousandths.", [this] {
    return int64_t(index_->size() * 1000 / std::max<uint64_t>(index_->capacity(), 1));
  });
  gauge("kvstore_index_bytes", "Bytes of the remotely readable index.",
        [this] { return int64_t(pool_->index_bytes()); });
  gauge("kvstore_pool_bytes", "Bytes of the data arena.",
        [this] { return int64_t(pool_->data_bytes()); });
  gauge("kvstore_pool_live_bytes", "Bytes of live entries in the data arena.",
        [this] { return LiveBytes(); });
  gauge("kvstore_pool_segments", "Segments in the data arena.",
        [this] { return int64_t(segment_count_); });
  gauge("kvstore_pool_segments_touched",
        "The highest segment ever handed out, plus one: how far into the arena writes have "
        "reached (a working set far smaller than the pool keeps it small).",
        [this] {
          absl::MutexLock lock(&alloc_mu_);
          return int64_t(segments_touched_);
        });
  gauge("kvstore_pool_segments_free", "Segments free for allocation.", [this] {
    absl::MutexLock lock(&alloc_mu_);
    return int64_t(free_segments_);
  });
  gauge("kvstore_pool_segments_awaiting_grace",
        "Emptied segments waiting out their grace period before reuse.", [this] {
          absl::MutexLock lock(&reclaim_mu_);
          return int64_t(pending_.size());
        });
}

}  // namespace server
}  // namespace kvstore
