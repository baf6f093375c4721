// Copyright 2026 The kvstore Authors.

#include "common/protocol/layout.h"

#include <cstddef>
#include <cstring>

#include "absl/base/optimization.h"
#include "absl/strings/str_cat.h"
// XXH3_state_t is only complete with XXH_STATIC_LINKING_ONLY; we keep it on
// the stack instead of allocating one per checksum.
#define XXH_STATIC_LINKING_ONLY
#include "xxhash.h"
// The entry checksum is XXH3; libxxhash's dispatching entry points pick the
// widest vector unit the CPU has at run time (AVX2 where present) and give
// the same hashes as the portable code. The build targets x86-64-v2 (the
// Soft-RoCE VM has no AVX2), so the compiler alone cannot use AVX2 here.
#if defined(__x86_64__)
#include "xxh_x86dispatch.h"
#endif
#include "common/protocol/xxh3_copy.h"

namespace kvstore {
namespace layout {

namespace {
constexpr uint64_t kOffsetMask = (uint64_t{1} << kOffsetBits) - 1;
constexpr uint64_t kSizeMask = (uint64_t{1} << kSizeBits) - 1;
constexpr uint64_t kFingerprintMask = (uint64_t{1} << kFingerprintBits) - 1;
// Up to this many hashed bytes, EntryChecksum() copies them together and
// hashes once. XXH3's own limit for its short-input paths (XXH3_MIDSIZE_MAX):
// beyond it the one-shot and streaming hashes run the same long loop.
constexpr size_t kGatherBytes = 240;
static_assert(kGatherBytes == xxh3::kShortInputMax, "the same limit as XXH3's own");
}  // namespace

uint64_t EncodeSlot(const Slot& slot) {
  // The masks make an out-of-contract Slot wrap instead of corrupting the
  // neighbouring field; the REQUIRES in layout.h keeps them from mattering.
  // Offsets and sizes are stored in kEntryAlign units, which is why entries
  // are kEntryAlign-aligned and padded.
  return (uint64_t{slot.fingerprint} & kFingerprintMask) << (kOffsetBits + kSizeBits) |
         ((slot.offset / kEntryAlign) & kOffsetMask) << kSizeBits |
         ((slot.size / kEntryAlign) & kSizeMask);
}

KeyHash HashKey(absl::string_view key, uint64_t seed, uint64_t bucket_count) {
  // 128 bits: the low half picks the buckets, the high half the fingerprint,
  // so a fingerprint says nothing about which bucket it sits in.
  XXH128_hash_t h = XXH3_128bits_withSeed(key.data(), key.size(), seed);
  KeyHash out;
  // The two 32-bit halves of low64 pick the two candidate buckets.
  // Modulo bias is negligible for 32-bit inputs and realistic bucket counts.
  const uint64_t n = bucket_count == 0 ? 1 : bucket_count;
  out.bucket[0] = (h.low64 & 0xffffffffu) % n;
  out.bucket[1] = (h.low64 >> 32) % n;
  // Distinct buckets whenever possible, so a key always has two places.
  if (out.bucket[1] == out.bucket[0] && n > 1) out.bucket[1] = (out.bucket[0] + 1) % n;
  uint16_t fp = static_cast<uint16_t>(h.high64 & kFingerprintMask);
  // 0 would make an empty word indistinguishable from a live one; mapping it
  // to 1 slightly favours fingerprint 1, which costs only an extra key compare.
  out.fingerprint = fp == 0 ? 1 : fp;
  return out;
}

uint64_t EntryChecksum(const EntryHeader& header, absl::string_view key, absl::string_view value) {
  // The checksum itself is excluded from the hashed header bytes;
  // kChecksummedHeaderBytes ends right before it. The hashed bytes are not
  // contiguous anywhere (the checksum field sits between header and key, and
  // a zero-copy PUT's value lives in a buffer of its own), so they are either
  // gathered or streamed; XXH3 gives the same hash both ways.
  const size_t total = kChecksummedHeaderBytes + key.size() + value.size();
  if (total <= kGatherBytes) {
    // Small entries (every location-cache hit of a small value checks one):
    // XXH3's streaming state costs ~440 instructions to set up, feed and
    // digest, three times the one-shot hash of these few bytes plus the
    // copy that makes them contiguous.
    char gathered[kGatherBytes];
    std::memcpy(gathered, &header, kChecksummedHeaderBytes);
    if (!key.empty()) std::memcpy(gathered + kChecksummedHeaderBytes, key.data(), key.size());
    if (!value.empty()) {
      std::memcpy(gathered + kChecksummedHeaderBytes + key.size(), value.data(), value.size());
    }
    return XXH3_64bits(gathered, total);
  }
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &header, kChecksummedHeaderBytes);
  XXH3_64bits_update(&state, key.data(), key.size());
  XXH3_64bits_update(&state, value.data(), value.size());
  return XXH3_64bits_digest(&state);
}

// The same three updates as EntryChecksum(), the value's spread over calls:
// XXH3's streaming digest does not depend on how the input was split.
EntryHasher::EntryHasher(const EntryHeader& header, absl::string_view key)
    : state_(new XXH3_state_t) {  // over-aligned: C++17's aligned new
  XXH3_64bits_reset(state_.get());
  XXH3_64bits_update(state_.get(), &header, kChecksummedHeaderBytes);
  XXH3_64bits_update(state_.get(), key.data(), key.size());
}

void EntryHasher::Update(absl::string_view value_piece) {
  XXH3_64bits_update(state_.get(), value_piece.data(), value_piece.size());
}

uint64_t EntryHasher::Digest() const { return XXH3_64bits_digest(state_.get()); }

void EntryHasher::FreeState::operator()(XXH3_state_s* s) const { delete s; }

EntryHeader MakeHeader(absl::string_view key, absl::string_view value, uint64_t version,
                       uint64_t expires_at_ms) {
  EntryHeader h;
  h.magic = kEntryMagic;
  h.key_len = static_cast<uint32_t>(key.size());
  h.value_len = static_cast<uint32_t>(value.size());
  SetVersionAndExpiry(&h, version, expires_at_ms);
  h.checksum = EntryChecksum(h, key, value);
  return h;
}

void EncodeEntry(char* dst, absl::string_view key, absl::string_view value, uint64_t version,
                 uint64_t expires_at_ms) {
  // Written first and checksummed where it lies, in one pass (SealEntry).
  BeginEntry(dst, key, static_cast<uint32_t>(value.size()), version, expires_at_ms);
  FillAndSealEntry(dst, value);
}

// REQUIRES: `dst` has EntryBytes(key.size(), value_len) bytes. The entry is
// not valid (checksum 0) until SealEntry(); it must not be published in a
// slot before then.
void BeginEntry(char* dst, absl::string_view key, uint32_t value_len, uint64_t version,
                uint64_t expires_at_ms) {
  EntryHeader h;
  h.magic = kEntryMagic;
  h.key_len = static_cast<uint32_t>(key.size());
  h.value_len = value_len;
  SetVersionAndExpiry(&h, version, expires_at_ms);
  h.checksum = 0;
  std::memcpy(dst, &h, sizeof(h));
  std::memcpy(dst + kEntryHeaderBytes, key.data(), key.size());
}

namespace {
// EntryChecksum() of the entry at `entry`, whose header is `h`, hashed in
// one pass. In an entry the hashed bytes are contiguous but for the checksum
// field between header and key; moving the 24 hashed header bytes 8 bytes
// up, over that field, makes them one run, and XXH3's one-shot hash of a
// 4 KiB run executes about a quarter fewer instructions than its streaming
// state fed three pieces (every SET computes one, every backup checks one).
// The header bytes are put back before returning; the checksum field is
// left holding header bytes, for the caller to overwrite.
// REQUIRES: the entry's lengths were checked against its buffer, and no
// other thread relies on its bytes meanwhile (an unpublished entry: a
// one-sided reader following a stale location to it sees a checksum
// mismatch, as it would while the entry is being written).
uint64_t ChecksumInPlace(char* entry, const EntryHeader& h) {
  static_assert(offsetof(EntryHeader, checksum) == kChecksummedHeaderBytes &&
                    sizeof(EntryHeader) == kChecksummedHeaderBytes + sizeof(uint64_t),
                "the checksum field must sit between the hashed header bytes and the key");
  const char* key = entry + kEntryHeaderBytes;
  const size_t hashed = kChecksummedHeaderBytes + size_t{h.key_len} + h.value_len;
  if (hashed <= kGatherBytes) {
    return EntryChecksum(h, absl::string_view(key, h.key_len),
                         absl::string_view(key + h.key_len, h.value_len));
  }
  char* run = entry + sizeof(uint64_t);
  std::memmove(run, entry, kChecksummedHeaderBytes);
  const uint64_t sum = XXH3_64bits(run, hashed);
  std::memcpy(entry, &h, kChecksummedHeaderBytes);
  return sum;
}
}  // namespace

// REQUIRES: the header was written by BeginEntry() and the value has fully
// arrived. Only the checksum field differs afterwards, so the value may have
// been placed by someone else (an RDMA WRITE into pool memory).
void SealEntry(char* dst) {
  EntryHeader h;
  std::memcpy(&h, dst, sizeof(h));
  h.checksum = ChecksumInPlace(dst, h);
  std::memcpy(dst + offsetof(EntryHeader, checksum), &h.checksum, sizeof(h.checksum));
}

// REQUIRES: as SealEntry(), with value.size() the header's value_len and
// `value` outside the entry.
void FillAndSealEntry(char* dst, absl::string_view value) {
  EntryHeader h;
  std::memcpy(&h, dst, sizeof(h));
  const size_t hashed = kChecksummedHeaderBytes + size_t{h.key_len} + h.value_len;
  if (hashed <= kGatherBytes || !xxh3::CopyAndHashAvailable()) {
    if (!value.empty())
      std::memcpy(dst + kEntryHeaderBytes + h.key_len, value.data(), value.size());
    SealEntry(dst);
    return;
  }
  // One run as in ChecksumInPlace(): the hashed header bytes moved up over
  // the checksum field, then the key, then the value, copied as it is hashed.
  char* run = dst + sizeof(uint64_t);
  std::memmove(run, dst, kChecksummedHeaderBytes);
  h.checksum = xxh3::CopyAndHash(run, hashed, kChecksummedHeaderBytes + h.key_len, value.data());
  std::memcpy(dst, &h, sizeof(h));
}

absl::StatusOr<EntryView> ParseEntryInPlace(char* entry, size_t size) {
  absl::StatusOr<EntryView> view = ParseEntryHeader(absl::string_view(entry, size));
  if (!view.ok()) return view;
  // Copied out first: ChecksumInPlace() moves the header bytes it hashes.
  EntryHeader h;
  std::memcpy(&h, entry, sizeof(h));
  const uint64_t sum = ChecksumInPlace(entry, h);
  std::memcpy(entry + offsetof(EntryHeader, checksum), &h.checksum, sizeof(h.checksum));
  if (sum != h.checksum) return absl::DataLossError("entry checksum mismatch");
  return view;
}

absl::StatusOr<EntryView> CopyEntryInPlace(char* dst, absl::string_view src) {
  const size_t size = src.size();
  if (size >= kEntryHeaderBytes && xxh3::CopyAndHashAvailable()) {
    // The header first: its lengths decide how much of `src` to read.
    std::memcpy(dst, src.data(), kEntryHeaderBytes);
    absl::StatusOr<EntryView> view = ParseEntryHeader(absl::string_view(dst, size));
    if (!view.ok()) return view;
    const size_t key_len = view->key.size();
    const size_t end = kEntryHeaderBytes + key_len + view->value.size();
    const size_t hashed = end - sizeof(uint64_t);
    if (hashed > kGatherBytes) {
      EntryHeader h;
      std::memcpy(&h, dst, sizeof(h));
      std::memcpy(dst + kEntryHeaderBytes, src.data() + kEntryHeaderBytes, key_len);
      // One run as in ChecksumInPlace(), the value copied as it is hashed.
      char* run = dst + sizeof(uint64_t);
      std::memmove(run, dst, kChecksummedHeaderBytes);
      const uint64_t sum = xxh3::CopyAndHash(run, hashed, kChecksummedHeaderBytes + key_len,
                                             src.data() + kEntryHeaderBytes + key_len);
      std::memcpy(dst, &h, sizeof(h));
      std::memcpy(dst + end, src.data() + end, size - end);  // the padding
      if (sum != h.checksum) return absl::DataLossError("entry checksum mismatch");
      return view;
    }
  }
  std::memcpy(dst, src.data(), size);
  return ParseEntryInPlace(dst, size);
}

// A torn read (the client READ an entry while its slot was being reused)
// shows up here as a checksum mismatch (kDataLoss), which a reader treats
// as torn and may retry.
absl::StatusOr<EntryView> ParseEntry(absl::string_view bytes) {
  absl::StatusOr<EntryView> view = ParseEntryHeader(bytes);
  if (view.ok() && EntryChecksum(*view->header, view->key, view->value) != view->header->checksum) {
    return absl::DataLossError("entry checksum mismatch");
  }
  return view;
}

absl::StatusOr<EntryFields> ReadEntryHeader(absl::string_view bytes) {
  if (bytes.size() < kEntryHeaderBytes) {
    return absl::DataLossError(absl::StrCat("entry shorter than its header: ", bytes.size()));
  }
  // Every field is untrusted until checked; only the size check above makes
  // reading the header itself safe.
  EntryFields f;
  std::memcpy(&f.header, bytes.data(), sizeof(f.header));
  const EntryHeader& h = f.header;
  if (h.magic != kEntryMagic) {
    return absl::DataLossError(absl::StrCat("bad entry magic 0x", absl::Hex(h.magic)));
  }
  // 64-bit arithmetic: neither length can overflow the sum.
  const uint64_t need = uint64_t{kEntryHeaderBytes} + h.key_len + h.value_len;
  if (need > bytes.size()) {
    return absl::DataLossError(absl::StrCat("entry lengths (key ", h.key_len, ", value ",
                                            h.value_len, ") exceed the ", bytes.size(),
                                            " bytes read"));
  }
  // Both views lie inside `bytes`; trailing padding is ignored.
  f.key = absl::string_view(bytes.data() + kEntryHeaderBytes, h.key_len);
  f.value = absl::string_view(f.key.data() + f.key.size(), h.value_len);
  return f;
}

absl::StatusOr<EntryView> ParseEntryHeader(absl::string_view bytes) {
  // ReadEntryHeader's checks, reading only the three fields they need
  // instead of copying the header out (every commit and every verified read
  // parses a header: ~40 instructions saved each). Its errors, too: any
  // failure is handed to it.
  if (ABSL_PREDICT_TRUE(bytes.size() >= kEntryHeaderBytes)) {
    uint32_t word[3];  // magic, key_len, value_len
    std::memcpy(word, bytes.data() + offsetof(EntryHeader, magic), sizeof(word));
    static_assert(offsetof(EntryHeader, key_len) == offsetof(EntryHeader, magic) + 4 &&
                  offsetof(EntryHeader, value_len) == offsetof(EntryHeader, magic) + 8);
    if (ABSL_PREDICT_TRUE(word[0] == kEntryMagic &&
                          uint64_t{kEntryHeaderBytes} + word[1] + word[2] <= bytes.size())) {
      const absl::string_view key(bytes.data() + kEntryHeaderBytes, word[1]);
      return EntryView{reinterpret_cast<const EntryHeader*>(bytes.data()), key,
                       absl::string_view(key.data() + key.size(), word[2])};
    }
  }
  return ReadEntryHeader(bytes).status();
}

absl::StatusOr<EntryView> VerifyEntry(absl::string_view bytes, absl::string_view key) {
  auto view = ParseEntry(bytes);
  if (!view.ok()) return view;
  // kNotFound, not kDataLoss: a fingerprint collision or a reused slot is a
  // normal outcome of a lock-free lookup, not corruption.
  if (view->key != key) return absl::NotFoundError("entry holds another key");
  return view;
}

}  // namespace layout
}  // namespace kvstore
