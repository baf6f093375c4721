// Copyright 2026 The kvstore Authors.
//
// ServerLayout: what an RDMA initiator needs to know about one server epoch to
// read and write its memory directly, taken from the handshake: limits,
// index geometry and address, the data regions of the arena, the fence
// words (common/protocol/fence.h) when the server publishes them, and the
// timing rules (read span, lease TTL).
//
// Thread safety: immutable once built; share freely.

#ifndef KVSTORE_COMMON_RDMA_INITIATOR_SERVER_LAYOUT_H_
#define KVSTORE_COMMON_RDMA_INITIATOR_SERVER_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/protocol/layout.h"
#include "common/protocol/limits.h"
#include "proto/kv_control.pb.h"

namespace kvstore {
namespace initiator {

// One registered region of the server's data arena.
struct DataRegion {
  uint64_t arena_offset;
  uint64_t length;
  uint64_t addr;
  uint32_t rkey;
};

struct ServerLayout {
  // Parses `hs`. kFailedPrecondition when the server's memory layout is not
  // the one this build knows; kUnavailable when it publishes no
  // usable RDMA regions (no index covering the geometry, no data region, or
  // no 16-byte GID).
  static absl::StatusOr<ServerLayout> FromHandshake(const v1::HandshakeResponse& hs);

  // The data region holding [offset, offset+len), or null when the range is
  // outside the arena or straddles two regions.
  const DataRegion* Resolve(uint64_t offset, uint64_t len) const;

  // Whether a slot read from remote memory (untrusted) can describe an entry
  // for a key of `key_len` bytes: its size fits the key and the value limit,
  // and its range fits the arena.
  bool Plausible(const layout::Slot& slot, size_t key_len) const;

  uint64_t epoch = 0;
  // The session the handshake opened; queue pairs and leases of this path
  // belong to it (0 from a server without sessions).
  uint64_t session_id = 0;
  Limits limits;
  layout::IndexGeometry geometry;
  absl::Duration max_read_span;  // a one-sided GET slower than this is redone
  absl::Duration lease_ttl;
  uint64_t index_addr = 0;
  uint32_t index_rkey = 0;
  std::vector<DataRegion> data;  // sorted by arena_offset
  uint64_t data_arena_bytes = 0;
  // The REGION_KIND_FENCE region (at least 16 bytes). rkey 0: the server
  // publishes none (it predates fencing) and readers skip the check.
  uint64_t fence_addr = 0;
  uint32_t fence_rkey = 0;
  bool has_fence() const { return fence_rkey != 0; }
};

}  // namespace initiator
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_INITIATOR_SERVER_LAYOUT_H_
