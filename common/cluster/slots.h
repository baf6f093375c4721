// Copyright 2026 The kvstore Authors.
//
// Hash slots, computed exactly as Redis Cluster computes them, so that a
// cluster-aware Redis client and kvstore agree on where every key lives:
//
//   slot = CRC16-XMODEM(tag) mod 16384
//
// where `tag` is the key, or, when the key holds a '{' followed later by a
// '}' with at least one byte between them, the bytes between the first '{'
// and the first '}' after it ("{user1}.name" and "{user1}.mail" share a
// slot; "{}x" hashes whole).
//
// Thread safety: pure functions.

#ifndef KVSTORE_COMMON_CLUSTER_SLOTS_H_
#define KVSTORE_COMMON_CLUSTER_SLOTS_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace kvstore {
namespace cluster {

inline constexpr uint32_t kSlotCount = 16384;

// CRC16 with polynomial 0x1021, initial value 0, no reflection (XMODEM):
// Crc16("123456789") == 0x31C3.
uint16_t Crc16(absl::string_view data);

// The part of `key` that is hashed (the hash tag rule above).
absl::string_view HashTag(absl::string_view key);

// The hash slot of `key`, in [0, kSlotCount).
uint32_t KeySlot(absl::string_view key);

}  // namespace cluster
}  // namespace kvstore

#endif  // KVSTORE_COMMON_CLUSTER_SLOTS_H_
