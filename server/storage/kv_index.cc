// Copyright 2026 The kvstore Authors.

#include "server/storage/kv_index.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvstore {
namespace server {

using layout::DecodeSlot;
using layout::EncodeSlot;
using layout::KeyHash;
using layout::LoadSlot;
using layout::Slot;
using layout::StoreSlot;

// Holds the stripe locks of a key's two buckets, taken in address order so
// two writers can never deadlock.
class KvIndex::StripeLock {
 public:
  StripeLock(const KvIndex& index, const KeyHash& h) {
    // Stripes are shared by buckets b, b + kStripes, ...: holding a stripe
    // excludes writers of all of them, which is coarser than needed but keeps
    // the lock array small and fixed.
    first_ = &index.stripes_[h.bucket[0] % kStripes];
    second_ = &index.stripes_[h.bucket[1] % kStripes];
    // Both buckets may map to one stripe; the lock is not reentrant.
    if (first_ == second_) second_ = nullptr;
    if (second_ != nullptr && second_ < first_) std::swap(first_, second_);
    first_->LockPlain();
    if (second_ != nullptr) second_->LockPlain();
  }
  ~StripeLock() {
    if (second_ != nullptr) second_->Unlock();
    first_->Unlock();
  }

 private:
  HandoffMutex* first_;
  HandoffMutex* second_;
};

KvIndex::KvIndex(char* buckets, const layout::IndexGeometry& geometry, const char* data,
                 uint64_t data_bytes)
    : buckets_(buckets), geometry_(geometry), data_(data), data_bytes_(data_bytes) {}

absl::string_view KvIndex::EntryKey(const Slot& slot) const {
  // Entries in a live lease chunk can still be rewritten by the lease
  // holder, so even a published entry's header is not trusted: its key must
  // lie inside the slot's range (and the arena), or it matches no key.
  if (slot.offset >= data_bytes_ || slot.size > data_bytes_ - slot.offset ||
      slot.size < layout::kEntryHeaderBytes) {
    return absl::string_view();
  }
  layout::EntryHeader h;
  std::memcpy(&h, data_ + slot.offset, sizeof(h));
  if (h.key_len == 0 || h.key_len > slot.size - layout::kEntryHeaderBytes) {
    return absl::string_view();
  }
  return absl::string_view(data_ + slot.offset + layout::kEntryHeaderBytes, h.key_len);
}

// REQUIRES: the caller holds h's StripeLock, so the words returned cannot
// change before the caller stores to them. Every match is collected, not
// only the first: a rewritten lease entry may have made a second slot name
// `key` (see the header).
absl::InlinedVector<uint64_t*, 2> KvIndex::FindAll(absl::string_view key, const KeyHash& h) const {
  absl::InlinedVector<uint64_t*, 2> found;
  const int nb = h.bucket[0] == h.bucket[1] ? 1 : 2;
  // Both buckets are read: start the second one's cache miss now, so the
  // two misses overlap instead of following each other.
  if (nb == 2) __builtin_prefetch(bucket(h.bucket[1]));
  for (int i = 0; i < nb; ++i) {
    uint64_t* words = bucket(h.bucket[i]);
    // Plain reads: only writers under the same stripe lock change them.
    for (uint32_t m = layout::SlotMatches(words, h.fingerprint); m != 0; m &= m - 1) {
      const int s = __builtin_ctz(m);
      if (EntryKey(DecodeSlot(words[s])) == key) found.push_back(&words[s]);
    }
  }
  return found;
}

// REQUIRES: the caller holds h's StripeLock. The entry is not read: what it
// holds now may be anything its lease holder wrote.
uint64_t* KvIndex::FindAt(const KeyHash& h, const Slot& slot) const {
  const int nb = h.bucket[0] == h.bucket[1] ? 1 : 2;
  for (int i = 0; i < nb; ++i) {
    uint64_t* words = bucket(h.bucket[i]);
    for (uint32_t m = layout::SlotMatches(words, h.fingerprint); m != 0; m &= m - 1) {
      const int s = __builtin_ctz(m);
      const Slot current = DecodeSlot(words[s]);
      if (current.offset == slot.offset && current.size == slot.size) {
        return &words[s];
      }
    }
  }
  return nullptr;
}

std::optional<Slot> KvIndex::Lookup(absl::string_view key) const {
  KeyHash h = layout::HashKey(key, geometry_.seed, geometry_.bucket_count);
  // Lock-free: slot words are read with acquire loads, and an entry is only
  // reclaimed a grace period after its slot stopped pointing at it.
  const int nb = h.bucket[0] == h.bucket[1] ? 1 : 2;
  // A random bucket in a large index is a cache (and often TLB) miss; the
  // key is in the second bucket about half the time, so its miss is
  // started alongside the first one's.
  if (nb == 2) __builtin_prefetch(bucket(h.bucket[1]));
  for (int i = 0; i < nb; ++i) {
    const uint64_t* words = bucket(h.bucket[i]);
    // Keep the slot that matched: re-reading its word could see a newer one.
    std::optional<Slot> found;
    layout::FindInBucket(words, h.fingerprint, [&](const Slot& slot) {
      if (EntryKey(slot) != key) return false;
      found = slot;
      return true;
    });
    if (found.has_value()) return found;
  }
  return std::nullopt;
}

// Request pipelining gives the RESP loop the next keys before it serves
// them; these let the bucket and entry cache misses of the next requests
// overlap the work on the current one.
void KvIndex::PrefetchBuckets(const KeyHash& h) const {
  __builtin_prefetch(bucket(h.bucket[0]));
  __builtin_prefetch(bucket(h.bucket[1]));
}

void KvIndex::PrefetchEntries(const KeyHash& h) const {
  for (uint64_t b : h.bucket) {
    const uint64_t* words = bucket(b);
    for (uint32_t m = layout::SlotMatches(words, h.fingerprint); m != 0; m &= m - 1) {
      const Slot slot = DecodeSlot(__atomic_load_n(&words[__builtin_ctz(m)], __ATOMIC_RELAXED));
      // A prefetch of a bad address is harmless, but stay inside the arena.
      if (slot.offset < data_bytes_) __builtin_prefetch(data_ + slot.offset);
    }
  }
}

absl::StatusOr<KvIndex::SlotList> KvIndex::Upsert(absl::string_view key, const Slot& slot,
                                                  const KeyHash& h) {
  // The fingerprint is always derived from `key` here, whatever the caller's
  // Slot carried, so FindAll() and remote readers find the word.
  Slot tagged = slot;
  tagged.fingerprint = h.fingerprint;
  const uint64_t word = EncodeSlot(tagged);
  StripeLock lock(*this, h);
  SlotList unpublished;
  if (absl::InlinedVector<uint64_t*, 2> existing = FindAll(key, h); !existing.empty()) {
    // One release store replaces the word: a reader sees the old entry or the
    // new one, each complete (the entry was written before this store).
    unpublished.push_back(DecodeSlot(*existing[0]));
    StoreSlot(existing[0], word);
    // Any other slot naming the key goes, so that the key has one slot and a
    // later Remove() or overwrite cannot leave a stale one behind.
    for (size_t i = 1; i < existing.size(); ++i) {
      unpublished.push_back(DecodeSlot(*existing[i]));
      StoreSlot(existing[i], 0);
      size_.fetch_sub(1, std::memory_order_relaxed);
    }
    return unpublished;
  }
  // A new key goes to the emptier of its two buckets (the "power of two
  // choices"), which keeps buckets evenly loaded: without displacement, the
  // first refusal then comes at a far higher load than filling the first
  // bucket first would allow.
  const int nb = h.bucket[0] == h.bucket[1] ? 1 : 2;
  uint64_t* best = nullptr;
  size_t best_free = 0;
  for (int i = 0; i < nb; ++i) {
    uint64_t* words = bucket(h.bucket[i]);
    // Plain reads are enough: this writer holds the stripe lock, and only
    // writers under the same lock change these words. Fingerprint 0: the
    // empty words.
    const uint32_t empty = layout::SlotMatches(words, 0);
    const size_t free_slots = static_cast<size_t>(__builtin_popcount(empty));
    if (free_slots > best_free) {
      best_free = free_slots;
      best = &words[__builtin_ctz(empty)];
    }
  }
  if (best != nullptr) {
    // Release: the entry at `slot`, written and sealed by the caller, is
    // visible to any thread whose acquire load sees this word. Clients read
    // the word and then the entry in a later RDMA READ, and verify the
    // entry's checksum regardless.
    StoreSlot(best, word);
    // Relaxed: size_ orders nothing, it is a counter.
    size_.fetch_add(1, std::memory_order_relaxed);
    return unpublished;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("index full: both candidate buckets of this key hold ", layout::kSlotsPerBucket,
                   " keys (", size(), " keys in ", geometry_.bucket_count,
                   " buckets); delete keys or restart with more --index_buckets"));
}

KvIndex::SlotList KvIndex::Remove(absl::string_view key) {
  KeyHash h = layout::HashKey(key, geometry_.seed, geometry_.bucket_count);
  StripeLock lock(*this, h);
  SlotList removed;
  for (uint64_t* word : FindAll(key, h)) {
    removed.push_back(DecodeSlot(*word));
    // 0 is the empty word (fingerprints are never 0). The entry stays in the
    // pool; the caller reclaims it after readers that loaded the old word
    // are done.
    StoreSlot(word, 0);
    size_.fetch_sub(1, std::memory_order_relaxed);
  }
  return removed;
}

bool KvIndex::ReplaceIf(absl::string_view key, const Slot& expected, const Slot& replacement) {
  KeyHash h = layout::HashKey(key, geometry_.seed, geometry_.bucket_count);
  StripeLock lock(*this, h);
  // The key was overwritten or re-put since the cleaner chose this entry
  // when no slot points at the old copy any more: the newer slot wins and
  // the cleaner drops its copy.
  uint64_t* existing = FindAt(h, expected);
  if (existing == nullptr) return false;
  Slot tagged = replacement;
  tagged.fingerprint = h.fingerprint;
  StoreSlot(existing, EncodeSlot(tagged));
  return true;
}

bool KvIndex::RemoveIf(absl::string_view key, const Slot& expected) {
  KeyHash h = layout::HashKey(key, geometry_.seed, geometry_.bucket_count);
  StripeLock lock(*this, h);
  uint64_t* existing = FindAt(h, expected);
  if (existing == nullptr) return false;
  StoreSlot(existing, 0);
  size_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

uint64_t KvIndex::Scan(uint64_t cursor, size_t count, absl::string_view prefix,
                       std::vector<std::string>* keys, uint64_t max_buckets) const {
  // The cursor is a bucket number, so a scan resumes exactly where it
  // stopped however the index changed in between.
  size_t found = 0;
  uint64_t b = cursor;
  // Written so that no sum can wrap (the cursor comes from the client).
  const uint64_t buckets = geometry_.bucket_count;
  const uint64_t end = max_buckets == 0 || max_buckets >= buckets || cursor >= buckets - max_buckets
                           ? buckets
                           : cursor + max_buckets;
  for (; b < end && found < count; ++b) {
    // Under the bucket's stripe lock no slot in it can change, so the
    // entries it points at are live while we copy their keys.
    HandoffMutex& stripe = stripes_[b % kStripes];
    stripe.LockPlain();
    const uint64_t* words = bucket(b);
    for (size_t s = 0; s < layout::kSlotsPerBucket; ++s) {
      uint64_t w = LoadSlot(&words[s]);
      if (w == 0) continue;
      absl::string_view key = EntryKey(DecodeSlot(w));
      // Each slot is visited once, so each key is listed once. An entry whose
      // header no longer reads back (rewritten by a lease holder) is skipped.
      if (key.empty() || !absl::StartsWith(key, prefix)) continue;
      keys->emplace_back(key);
      ++found;
    }
    stripe.Unlock();
  }
  return b >= geometry_.bucket_count ? 0 : b;
}

}  // namespace server
}  // namespace kvstore
