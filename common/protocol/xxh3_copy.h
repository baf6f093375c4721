// Copyright 2026 The kvstore Authors.
//
// XXH3-64 of a byte run whose tail is copied in while it is hashed: one pass
// over those bytes where a memcpy followed by XXH3_64bits() makes two. A
// SET's value arrives in the receive buffer and must both land in its pool
// entry and be covered by the entry's checksum (layout.h); copying each
// 64-byte stripe as the hash loads it saves the copy's own loads and loop
// (about 400 instructions for a 4 KiB value).
//
// The hash is libxxhash's XXH3_64bits() with its default secret and no seed,
// bit for bit (xxh3_copy_test compares them); only runs longer than 240
// bytes take this path, since shorter ones are hashed by XXH3's
// short-input code, which reads the bytes in another order.
//
// Pure functions over caller-owned memory; thread-safe.

#ifndef KVSTORE_COMMON_PROTOCOL_XXH3_COPY_H_
#define KVSTORE_COMMON_PROTOCOL_XXH3_COPY_H_

#include <cstddef>
#include <cstdint>

namespace kvstore {
namespace xxh3 {

// Runs of at most this many bytes are not for CopyAndHash().
inline constexpr size_t kShortInputMax = 240;

// Whether CopyAndHash() can run here: it needs AVX2 (checked once, at first
// call). The Soft-RoCE VM's CPU has none; callers then copy and hash as
// two steps, with the same result.
bool CopyAndHashAvailable();

// Copies `len - from` bytes from `src` to `run + from` and returns
// XXH3_64bits(run, len) of the result. `run[0, from)` must hold its bytes
// already; `src` may be unaligned and must not overlap `run`.
// REQUIRES: len > kShortInputMax, from <= len, CopyAndHashAvailable().
uint64_t CopyAndHash(char* run, size_t len, size_t from, const char* src);

}  // namespace xxh3
}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_XXH3_COPY_H_
