// Copyright 2026 The kvstore Authors.
//
// The memory layout shared by kvserver and every client: index buckets, slot
// words and self-verifying entries. This is the ONE definition; the server
// writes it and clients read it remotely (one-sided RDMA READs), so any change
// here is a wire-format change and must bump kLayoutVersion.
//
//   index region:  bucket[0] bucket[1] ... bucket[bucket_count-1]
//                  each bucket = 64 bytes = 8 slot words of 8 bytes
//
//   slot word (uint64, 0 = empty), written with one aligned release store:
//     63           53 52                          22 21                0
//     +--------------+------------------------------+------------------+
//     | fingerprint  |  entry offset / 32 in pool   | entry size / 32  |
//     |   11 bits    |          31 bits             |     22 bits      |
//     +--------------+------------------------------+------------------+
//
//   entry (32-byte aligned, never updated in place):
//     +-------+---------+-----------+-------+---------+----------+-----+-------+-----+
//     | magic | key_len | value_len | flags | version | checksum | key | value | pad |
//     |  u32  |   u32   |    u32    |  u32  |   u64   |   u64    |     |       |     |
//     +-------+---------+-----------+-------+---------+----------+-----+-------+-----+
//     checksum = XXH3-64 over header bytes [0, 24) + key + value.
//
// All integers are little-endian (x86-64 and every RDMA host we target).
//
// Thread-safety: every function here is pure or works on caller-owned
// memory, and is thread-safe. LoadSlot/StoreSlot order the publication of
// a slot word after the entry it points to (see kv_index.h).

#ifndef KVSTORE_COMMON_PROTOCOL_LAYOUT_H_
#define KVSTORE_COMMON_PROTOCOL_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// ThreadSanitizer would report SlotMatches()'s vector loads of words that
// writers store atomically; under it the scan reads word by word.
#if defined(__SANITIZE_THREAD__)
#define KVSTORE_LAYOUT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVSTORE_LAYOUT_TSAN 1
#endif
#endif
#ifndef KVSTORE_LAYOUT_TSAN
#define KVSTORE_LAYOUT_TSAN 0
#endif

// libxxhash's hash state, kept opaque here (see EntryHasher).
struct XXH3_state_s;

namespace kvstore {
namespace layout {

// Carried in IndexGeometry; a client refuses a server whose version
// differs, since it would misread buckets and entries.
// Version 2: entries 32-byte aligned (was 64), fingerprints 11 bits (was
// 12), offsets 31 bits (was 30).
// Version 3: the header's reserved word and the top 16 bits of its version
// hold the entry's expiry time (see EntryHeader).
inline constexpr uint32_t kLayoutVersion = 3;

inline constexpr size_t kBucketBytes = 64;
inline constexpr size_t kSlotBytes = 8;
inline constexpr size_t kSlotsPerBucket = kBucketBytes / kSlotBytes;
// 32, not 64: a small entry (32-byte header, 16-byte key, 32-byte value)
// takes 96 bytes instead of 128, which is what puts the memory per key
// below Redis's. Nothing reads entries by cache line, so the alignment only
// sets the units of the slot word's offset and size.
inline constexpr size_t kEntryAlign = 32;

inline constexpr int kFingerprintBits = 11;
inline constexpr int kOffsetBits = 31;
inline constexpr int kSizeBits = 22;
static_assert(kFingerprintBits + kOffsetBits + kSizeBits == 64);

// Largest pool a slot word can address, and largest single entry.
inline constexpr uint64_t kMaxPoolBytes = (uint64_t{1} << kOffsetBits) * kEntryAlign;  // 64 GiB
inline constexpr uint64_t kMaxEntryBytes =
    ((uint64_t{1} << kSizeBits) - 1) * kEntryAlign;  // ~128 MiB

inline constexpr uint32_t kEntryMagic = 0x4B564531;  // "1EVK" little-endian: "KVE1"
// What the server stores over an entry's magic once the index stops naming
// it (overwrite, delete, cleaner move), before the write that did so is
// acknowledged. A reader that followed a slot word it READ earlier, or a
// client's cached location (client/internal/rdma/location_cache.h), then
// sees a dead entry instead of a superseded value that still verifies. Old
// readers take it for a torn entry and retry, so this needs no new
// kLayoutVersion.
inline constexpr uint32_t kRetiredEntryMagic = 0x44414544;  // "DEAD"

// An entry's header. The expiry time (unix milliseconds, 0: never) is 48
// bits split over two fields so that the header stays 32 bytes: adding a
// word would cost up to 32 bytes per key through the alignment, and 48 bits
// of milliseconds reach the year 10889. The version (unique and increasing
// per store) keeps 48 bits: 2.8e14 writes. Read and write both through the
// functions below, never the raw fields.
struct EntryHeader {
  uint32_t magic;
  uint32_t key_len;
  uint32_t value_len;
  uint32_t expiry_low;      // bits 0..31 of the expiry time
  uint64_t version_expiry;  // bits 0..47: version; 48..63: bits 32..47 of the expiry
  uint64_t checksum;        // over bytes [0, kChecksummedHeaderBytes) + key + value
};
static_assert(sizeof(EntryHeader) == 32);

inline constexpr int kVersionBits = 48;
inline constexpr uint64_t kMaxVersion = (uint64_t{1} << kVersionBits) - 1;
// The latest expiry a header can hold (about the year 10889). Later times
// are stored as this one: to a client they are "far in the future" either
// way.
inline constexpr uint64_t kMaxExpiresAtMs = (uint64_t{1} << 48) - 1;

inline uint64_t EntryVersion(const EntryHeader& h) { return h.version_expiry & kMaxVersion; }
inline uint64_t EntryExpiresAtMs(const EntryHeader& h) {
  return (h.version_expiry >> kVersionBits) << 32 | h.expiry_low;
}
// Sets both packed fields; `version` is cut to 48 bits and `expires_at_ms`
// clamped to kMaxExpiresAtMs. Does not touch the checksum.
inline void SetVersionAndExpiry(EntryHeader* h, uint64_t version, uint64_t expires_at_ms) {
  if (expires_at_ms > kMaxExpiresAtMs) expires_at_ms = kMaxExpiresAtMs;
  h->expiry_low = static_cast<uint32_t>(expires_at_ms);
  h->version_expiry = (version & kMaxVersion) | (expires_at_ms >> 32) << kVersionBits;
}
// Whether an entry expiring at `expires_at_ms` (0: never) is expired at
// `now_ms`. Expired at its expiry time exactly, as Redis: a key set with
// PX 100 at t is gone at t + 100.
inline bool Expired(uint64_t expires_at_ms, int64_t now_ms) {
  return expires_at_ms != 0 && now_ms >= 0 && static_cast<uint64_t>(now_ms) >= expires_at_ms;
}
inline constexpr size_t kEntryHeaderBytes = sizeof(EntryHeader);
inline constexpr size_t kChecksummedHeaderBytes = 24;

// A decoded slot word. `offset` and `size` are in bytes.
struct Slot {
  uint16_t fingerprint = 0;
  uint64_t offset = 0;
  uint64_t size = 0;

  friend bool operator==(const Slot& a, const Slot& b) {
    return a.fingerprint == b.fingerprint && a.offset == b.offset && a.size == b.size;
  }
};

// REQUIRES: fingerprint in [1, 2047], offset and size multiples of
// kEntryAlign, offset < kMaxPoolBytes, 0 < size <= kMaxEntryBytes.
uint64_t EncodeSlot(const Slot& slot);
// Inverse of EncodeSlot. Total: any word decodes (a slot word read
// remotely is untrusted), so callers bounds-check offset and size against
// the pool before reading the entry. Inline: every lookup decodes a few.
inline Slot DecodeSlot(uint64_t word) {
  constexpr uint64_t kOffsetMask = (uint64_t{1} << kOffsetBits) - 1;
  constexpr uint64_t kSizeMask = (uint64_t{1} << kSizeBits) - 1;
  Slot slot;
  // No validation: the caller checks the decoded range against the pool it
  // reads from (the word may come from a remote, untrusted READ).
  slot.fingerprint = static_cast<uint16_t>(word >> (kOffsetBits + kSizeBits));
  slot.offset = ((word >> kSizeBits) & kOffsetMask) * kEntryAlign;
  slot.size = (word & kSizeMask) * kEntryAlign;
  return slot;
}

// Where a key lives in an index of `bucket_count` buckets built with `seed`.
struct KeyHash {
  uint64_t bucket[2];    // two candidate buckets (distinct when bucket_count > 1)
  uint16_t fingerprint;  // never 0, so a live slot word is never 0
};
inline bool operator==(const KeyHash& a, const KeyHash& b) {
  return a.bucket[0] == b.bucket[0] && a.bucket[1] == b.bucket[1] && a.fingerprint == b.fingerprint;
}
// Deterministic across processes for the same (key, seed, bucket_count);
// that is what lets a client find a key without asking the server. A
// bucket_count of 0 is treated as 1.
KeyHash HashKey(absl::string_view key, uint64_t seed, uint64_t bucket_count);

// Bytes an entry occupies in the pool, header and padding included.
constexpr uint64_t EntryBytes(uint64_t key_len, uint64_t value_len) {
  return (kEntryHeaderBytes + key_len + value_len + kEntryAlign - 1) / kEntryAlign * kEntryAlign;
}

// Checksum of an entry whose value may live apart from its header and key
// (zero-copy PUT gathers them from two buffers).
uint64_t EntryChecksum(const EntryHeader& header, absl::string_view key, absl::string_view value);

// EntryChecksum() over a value that arrives in pieces: a chunked RDMA READ
// checksums each piece as it lands, while later pieces are still on the
// wire. Construct with the header and key, Update() with the value's
// pieces in order, then Digest() equals EntryChecksum(header, key, value).
// Not thread-safe; movable. Allocates its hash state (~600 bytes).
class EntryHasher {
 public:
  EntryHasher(const EntryHeader& header, absl::string_view key);
  void Update(absl::string_view value_piece);
  uint64_t Digest() const;

 private:
  struct FreeState {
    void operator()(XXH3_state_s* s) const;
  };
  std::unique_ptr<XXH3_state_s, FreeState> state_;
};

// Fills `header` for key/value and computes its checksum. `expires_at_ms`:
// unix milliseconds after which the entry reads as absent (0: never).
EntryHeader MakeHeader(absl::string_view key, absl::string_view value, uint64_t version,
                       uint64_t expires_at_ms = 0);

// Writes a complete entry at `dst` (REQUIRES: EntryBytes(key, value) bytes).
void EncodeEntry(char* dst, absl::string_view key, absl::string_view value, uint64_t version,
                 uint64_t expires_at_ms = 0);

// Writes header+key at `dst` for a value that the caller places (or has
// placed) at dst + kEntryHeaderBytes + key.size(). Used where the value is
// received straight into pool memory: call SealEntry() once it has arrived.
void BeginEntry(char* dst, absl::string_view key, uint32_t value_len, uint64_t version,
                uint64_t expires_at_ms = 0);
// Computes and stores the checksum of the entry at `dst` (BeginEntry()'s
// header, the value in place). Moves header bytes while it hashes (see
// ParseEntryInPlace()), so `dst` must not be published yet.
void SealEntry(char* dst);
// Copies `value` (value_len bytes, outside the entry) behind the key of the
// entry BeginEntry() wrote at `dst` and seals it: the same bytes as a
// memcpy and SealEntry(), in one pass over the value where the CPU allows
// (xxh3_copy.h). The same REQUIRES as SealEntry().
void FillAndSealEntry(char* dst, absl::string_view value);

// The parts of an entry that verified.
// Borrows the bytes passed to ParseEntry()/VerifyEntry(): every member
// points into them and is valid only while they are.
struct EntryView {
  const EntryHeader* header;
  absl::string_view key;
  absl::string_view value;
};

// Verifies an entry held in `bytes` (header first), treating every byte as
// untrusted: magic, lengths within `bytes`, checksum. Returns
// kDataLoss-coded errors for bad content, never crashes.
absl::StatusOr<EntryView> ParseEntry(absl::string_view bytes);

// ParseEntry() for an entry in memory the caller owns and nobody else uses
// meanwhile (a backup's copy of a replicated entry, before it is
// published): the checksum is computed in one pass by briefly moving the
// header's bytes, which are back in place when it returns. `entry` must be
// 8-byte aligned and writable; the view points into it.
absl::StatusOr<EntryView> ParseEntryInPlace(char* entry, size_t size);

// ParseEntryInPlace() of a copy: `src` (an untrusted entry at any
// alignment, e.g. inside a network frame) copied to `dst` (8-byte aligned,
// src.size() bytes, the caller's alone) and verified, the value hashed as
// it is copied where the CPU allows (xxh3_copy.h). The view points into
// `dst`. On an error `dst` holds some of `src` and must not be published.
absl::StatusOr<EntryView> CopyEntryInPlace(char* dst, absl::string_view src);

// ParseEntry() without the checksum: for an entry this process has just
// written and checksummed itself. REQUIRES: `bytes` 8-byte aligned (the
// view points at the header in place), as pool memory always is.
absl::StatusOr<EntryView> ParseEntryHeader(absl::string_view bytes);

// ParseEntryHeader() for bytes at any alignment (an entry inside a network
// frame, where a header read in place would be a misaligned access): the
// header is copied out, the key and value are views into `bytes`.
struct EntryFields {
  EntryHeader header;
  absl::string_view key;
  absl::string_view value;
};
absl::StatusOr<EntryFields> ReadEntryHeader(absl::string_view bytes);

// ParseEntry() plus the requirement that the entry holds `key`
// (kNotFound-coded "key mismatch" otherwise: a fingerprint collision or a
// slot reused under the reader).
absl::StatusOr<EntryView> VerifyEntry(absl::string_view bytes, absl::string_view key);

// Stores kRetiredEntryMagic over the magic of the entry at `entry` with one
// aligned 4-byte store (the rest of the entry is left as it is: readers that
// already checked the magic may still be copying the value). REQUIRES:
// `entry` 64-byte aligned, in memory the caller owns.
inline void MarkEntryRetired(char* entry) {
  __atomic_store_n(reinterpret_cast<uint32_t*>(entry), kRetiredEntryMagic, __ATOMIC_RELEASE);
}

// Atomic access to a slot word that lives in (possibly registered) memory.
inline uint64_t LoadSlot(const uint64_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
inline void StoreSlot(uint64_t* word, uint64_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

// Bit i (i < kSlotsPerBucket) set when slot word i of `bucket` carries
// `fingerprint`. Fingerprints are never 0 and an empty word is 0, so
// SlotMatches(bucket, 0) is the set of empty slots. The words are read
// once, all together (on x86 two 16-byte loads per half bucket; each
// aligned 8-byte word is read whole), and compared without a branch per
// word: a scan of a mostly empty bucket costs a few instructions instead of
// one test and branch per word. A hint only where writers run alongside:
// a caller that acts on a bit re-reads that word with LoadSlot (acquire).
// REQUIRES: `bucket` 8-byte aligned, kSlotsPerBucket readable words.
inline uint32_t SlotMatches(const uint64_t* bucket, uint16_t fingerprint) {
  static_assert(kSlotsPerBucket == 8 && kOffsetBits + kSizeBits == 53,
                "eight words per bucket, the fingerprint in each word's top 11 bits");
#if defined(__SSE2__) && !KVSTORE_LAYOUT_TSAN
  // The high 32 bits of each word hold the fingerprint in their top 11:
  // gather four words' high halves into one vector, shift, compare.
  const __m128i want = _mm_set1_epi32(fingerprint);
  uint32_t mask = 0;
  for (int half = 0; half < 2; ++half) {
    const __m128i* p = reinterpret_cast<const __m128i*>(bucket + 4 * half);
    const __m128 lo = _mm_castsi128_ps(_mm_loadu_si128(p));
    const __m128 hi = _mm_castsi128_ps(_mm_loadu_si128(p + 1));
    const __m128i high_words = _mm_castps_si128(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m128i eq = _mm_cmpeq_epi32(_mm_srli_epi32(high_words, 21), want);
    mask |= static_cast<uint32_t>(_mm_movemask_ps(_mm_castsi128_ps(eq))) << (4 * half);
  }
  return mask;
#else
  uint32_t mask = 0;
  for (size_t i = 0; i < kSlotsPerBucket; ++i) {
    mask |= uint32_t{(LoadSlot(&bucket[i]) >> (kOffsetBits + kSizeBits)) == fingerprint} << i;
  }
  return mask;
#endif
}

// The bucket search, shared by the server's index and the client's one-sided
// GET: scans the kSlotsPerBucket slot words at `bucket` in order, skipping
// empty words and words whose fingerprint is not `fingerprint`, and calls
// `match` on each remaining slot until it returns true. Returns the index of
// the slot `match` accepted, or -1 when none was. `bucket` must be 8-byte
// aligned; words are read with LoadSlot (acquire), so it may be live memory
// another thread publishes into (the server) or a local copy (a client's
// READ buffer). The fingerprint only narrows the search: `match` decides,
// typically by comparing the entry's key.
// REQUIRES: `bucket` points at kSlotsPerBucket readable words. A template,
// so that `match` (a lambda, on every GET's path) is inlined.
template <typename Match>
int FindInBucket(const uint64_t* bucket, uint16_t fingerprint, Match&& match) {
  for (uint32_t m = SlotMatches(bucket, fingerprint); m != 0; m &= m - 1) {
    const int i = __builtin_ctz(m);
    // Acquire: if the word is a slot published by StoreSlot (release), the
    // entry bytes it points to are visible to this thread too. Read again:
    // the word may have changed since SlotMatches() saw it.
    const uint64_t word = LoadSlot(&bucket[i]);
    const Slot slot = DecodeSlot(word);
    if (slot.fingerprint != fingerprint) continue;  // also an emptied slot
    if (match(slot)) return i;
  }
  return -1;
}

// Index geometry, published in the handshake for each server epoch.
struct IndexGeometry {
  uint64_t bucket_count = 0;
  uint64_t seed = 0;
  uint32_t layout_version = kLayoutVersion;

  uint64_t bytes() const { return bucket_count * kBucketBytes; }
};

}  // namespace layout
}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_LAYOUT_H_
