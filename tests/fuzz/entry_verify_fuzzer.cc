// Copyright 2026 The kvstore Authors.
//
// Fuzzes what a client does with memory it READ from a server (untrusted:
// a buggy or hostile server, or a torn read): the one-sided GET's pipeline
// of the RDMA reader, with the real functions at each step:
//   bucket words -> layout::FindInBucket (fingerprint from layout::HashKey)
//   -> ServerLayout::Plausible (slot vs key and value limits, arena bounds)
//   -> ServerLayout::Resolve (the region holding the range, no straddling)
//   -> a READ of slot.size bytes (a copy of exactly that many bytes, so the
//      sanitizers see any read past it) -> layout::VerifyEntry.
// Then the encoder side: EncodeEntry -> VerifyEntry gives back key and value,
// and flipping any checksummed byte is always detected.
//
// Input: a key (length byte + bytes), 64 bytes of bucket words, a region
// split byte, a value-limit byte, a flip position (2 bytes), then the data
// arena (the rest).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/protocol/layout.h"
#include "common/rdma/initiator/server_layout.h"
#include "tests/fuzz/fuzz_input.h"

namespace kvstore {
namespace {

using layout::Slot;

// A layout of one index bucket (seed 7) over an arena of `arena_bytes`
// published as two regions split at `split` (a multiple of 64).
initiator::ServerLayout MakeLayout(uint64_t arena_bytes, uint64_t split, uint64_t max_value) {
  initiator::ServerLayout l;
  l.geometry.bucket_count = 1;
  l.geometry.seed = 7;
  l.limits.max_value_bytes = max_value;
  l.data_arena_bytes = arena_bytes;
  if (split > arena_bytes) split = arena_bytes;
  l.data.push_back({0, split, 0x10000, 1});
  l.data.push_back({split, arena_bytes - split, 0x10000 + split, 2});
  return l;
}

// One GET attempt over the fuzzed bucket and arena, as RdmaReader::GetOne.
void GetOne(absl::string_view key, const uint64_t* bucket, absl::string_view arena,
            const initiator::ServerLayout& l) {
  const layout::KeyHash h = layout::HashKey(key, l.geometry.seed, l.geometry.bucket_count);
  KV_FUZZ_CHECK(h.fingerprint != 0 && h.bucket[0] == 0);
  layout::FindInBucket(bucket, h.fingerprint, [&](const Slot& slot) {
    KV_FUZZ_CHECK(slot.fingerprint == h.fingerprint);
    if (!l.Plausible(slot, key.size())) return false;
    const initiator::DataRegion* r = l.Resolve(slot.offset, slot.size);
    if (r == nullptr) return false;
    KV_FUZZ_CHECK(slot.offset >= r->arena_offset &&
                  slot.offset + slot.size <= r->arena_offset + r->length);
    KV_FUZZ_CHECK(slot.offset + slot.size <= arena.size());
    // The READ: exactly slot.size bytes land in the client's buffer.
    std::vector<char> local(arena.begin() + slot.offset, arena.begin() + slot.offset + slot.size);
    auto v = layout::VerifyEntry(absl::string_view(local.data(), local.size()), key);
    if (!v.ok()) {
      KV_FUZZ_CHECK(absl::IsDataLoss(v.status()) || absl::IsNotFound(v.status()));
      return false;
    }
    KV_FUZZ_CHECK(v->key == key);
    KV_FUZZ_CHECK(layout::EntryBytes(v->key.size(), v->value.size()) <= slot.size);
    KV_FUZZ_CHECK(v->value.data() + v->value.size() <= local.data() + local.size());
    return true;
  });
}

// EncodeEntry -> VerifyEntry, and every single-byte change is caught.
void CheckEncoded(absl::string_view key, absl::string_view value, uint16_t flip) {
  std::vector<char> entry(layout::EntryBytes(key.size(), value.size()));
  layout::EncodeEntry(entry.data(), key, value, /*version=*/flip);
  const absl::string_view bytes(entry.data(), entry.size());
  auto v = layout::VerifyEntry(bytes, key);
  KV_FUZZ_CHECK(v.ok() && v->key == key && v->value == value);
  // Bytes past the value are padding, which the checksum does not cover.
  const size_t covered = layout::kEntryHeaderBytes + key.size() + value.size();
  entry[flip % covered] ^= 0x01;
  auto bad = layout::VerifyEntry(bytes, key);
  KV_FUZZ_CHECK(!bad.ok());
  KV_FUZZ_CHECK(absl::IsDataLoss(bad.status()) || absl::IsNotFound(bad.status()));
}

}  // namespace
}  // namespace kvstore

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvstore::fuzz::FuzzInput in(data, size);
  const absl::string_view key = in.Bytes(64);
  uint64_t bucket[kvstore::layout::kSlotsPerBucket] = {};
  for (uint64_t& w : bucket) w = in.Int<uint64_t>();
  const uint64_t split = uint64_t{in.Int<uint8_t>()} * kvstore::layout::kEntryAlign;
  const uint64_t max_value = uint64_t{in.Int<uint8_t>()} * 16;
  const uint16_t flip = in.Int<uint16_t>();
  const absl::string_view arena = in.Rest();
  // The arena in a buffer of exactly its size (no slack for overreads).
  const std::vector<char> arena_copy(arena.begin(), arena.end());
  if (!key.empty()) {
    kvstore::GetOne(key, bucket, absl::string_view(arena_copy.data(), arena_copy.size()),
                    kvstore::MakeLayout(arena_copy.size(), split, max_value));
  }
  kvstore::CheckEncoded(key, arena.substr(0, 512), flip);
  return 0;
}
