// Copyright 2026 The kvstore Authors.
//
// The fence words: 64 bytes of registered server memory (region kind
// REGION_KIND_FENCE) that one-sided readers READ in the same batch as their
// bucket READs. A NIC keeps answering READs for a process that is frozen or
// has lost its etcd lease, so the server cannot always stop readers itself;
// instead it publishes how long its data may be trusted, and the reader
// checks (docs/architecture.md §18.5).
//
//   bytes [0, 8)   map_epoch     the cluster map epoch the server applied
//   bytes [8, 16)  valid_until   unix milliseconds; the server renews it on
//                                every counted lease renewal (a keepalive,
//                                then a txn proving its member key and map
//                                current) to a moment before the lease can
//                                expire, reckoned from its previous value
//                                by the steady clock (a step of the
//                                server's wall clock forward never moves
//                                it later).
//                                0: fenced (the server stopped serving).
//                                kNoExpiry: single-node mode, never expires.
//   bytes [16, 64) zero, reserved
//
// Little-endian, each word written with one aligned 8-byte store. A reader
// may see the two words from different updates; each combination is a state
// the server was in, so the check stays safe.
//
// Thread safety: pure functions.

#ifndef KVSTORE_COMMON_PROTOCOL_FENCE_H_
#define KVSTORE_COMMON_PROTOCOL_FENCE_H_

#include <cstdint>
#include <limits>

#include "absl/status/status.h"

namespace kvstore {
namespace fence {

inline constexpr uint64_t kFenceBytes = 64;
inline constexpr uint64_t kNoExpiry = std::numeric_limits<uint64_t>::max();
// A reader refuses data whose valid_until is less than this far ahead of
// its own clock: the bound on clock skew between clients and servers that
// the fencing argument assumes (docs/architecture.md §18.5).
inline constexpr int64_t kClockSkewMarginMs = 250;

struct FenceWords {
  uint64_t map_epoch = 0;
  uint64_t valid_until_ms = 0;
};

// Decodes the first 16 bytes of a fence region. REQUIRES: 16 readable bytes.
FenceWords Decode(const void* bytes);
// Encodes into 16 bytes. REQUIRES: 16 writable bytes.
void Encode(const FenceWords& words, void* bytes);

// Whether data read in the same batch as `words` may be used by a reader
// that holds cluster map `reader_map_epoch` (0: single-node, no map) at
// `now_unix_ms`:
//   kUnavailable         (refusal kClusterDown, common/cluster/refusal.h)
//                        fenced, or valid_until is not at least
//                        kClockSkewMarginMs after now (lease lapsed or the
//                        server is frozen): drop the data, refresh the map;
//   kFailedPrecondition  (refusal kStaleShardEpoch) the server's map epoch
//                        differs from the reader's: drop the data, refresh
//                        the map and retry;
//   OK                   use it.
absl::Status Check(const FenceWords& words, uint64_t reader_map_epoch, int64_t now_unix_ms);

// What a one-sided reader may conclude about an entry's expiry time
// (layout::EntryExpiresAtMs, 0: none) from its own clock. The server
// decides expiry by its clock; the reader's may differ from it by up to
// kClockSkewMarginMs (the bound the fence check already assumes), so:
//   kLive       the time is more than the margin ahead: the server has not
//               expired it either; use the value;
//   kExpired    the time is more than the margin behind: the server has
//               expired it too; the key is absent;
//   kUncertain  within the margin either way: ask the server (a two-sided
//               GET), which decides by its own clock.
// A reader therefore never returns a value the server holds expired, and
// sends to the server only reads within 2 x margin of an expiry.
enum class ExpiryVerdict { kLive, kExpired, kUncertain };
ExpiryVerdict JudgeExpiry(uint64_t expires_at_ms, int64_t reader_now_ms);

}  // namespace fence
}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_FENCE_H_
