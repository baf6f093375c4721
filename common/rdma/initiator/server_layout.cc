// Copyright 2026 The kvstore Authors.
//
// Everything here comes from the server and is checked before use: a client
// must never READ outside what the server registered, whatever it is told.

#include "common/rdma/initiator/server_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace initiator {

// The layout version check comes first: a server with another layout would
// make every bucket and entry read meaningless.
absl::StatusOr<ServerLayout> ServerLayout::FromHandshake(const v1::HandshakeResponse& hs) {
  ServerLayout l;
  l.epoch = hs.epoch();
  l.session_id = hs.session_id();
  l.limits.max_key_bytes = hs.limits().max_key_bytes();
  l.limits.max_value_bytes = hs.limits().max_value_bytes();
  l.limits.max_batch_keys = hs.limits().max_batch_keys();
  l.geometry.bucket_count = hs.index().bucket_count();
  l.geometry.seed = hs.index().seed();
  // Floors guard against a server that sends 0: a zero span would fail every
  // read, a tiny TTL would renew leases continuously.
  l.max_read_span = absl::Milliseconds(std::max<uint32_t>(1, hs.limits().max_read_span_ms()));
  l.lease_ttl = absl::Milliseconds(std::max<uint32_t>(100, hs.limits().lease_ttl_ms()));
  if (hs.index().layout_version() != layout::kLayoutVersion ||
      hs.index().bucket_bytes() != layout::kBucketBytes) {
    return absl::FailedPreconditionError(absl::StrCat("server uses memory layout version ",
                                                      hs.index().layout_version(), ", this client ",
                                                      layout::kLayoutVersion));
  }
  bool have_index = false;
  for (const auto& r : hs.regions()) {
    if (r.kind() == v1::REGION_KIND_INDEX) {
      l.index_addr = r.addr();
      l.index_rkey = r.rkey();
      // Divided, not multiplied: count * 64 wraps for a hostile count. A
      // count of 0 is refused: HashKey reads it as 1, so bucket 0 is READ.
      have_index = l.geometry.bucket_count > 0 &&
                   r.length() / layout::kBucketBytes >= l.geometry.bucket_count;
    } else if (r.kind() == v1::REGION_KIND_DATA) {
      l.data.push_back({r.arena_offset(), r.length(), r.addr(), r.rkey()});
    } else if (r.kind() == v1::REGION_KIND_FENCE && r.length() >= 16 && r.rkey() != 0) {
      // Shorter than the two words: not a fence region this client can check.
      l.fence_addr = r.addr();
      l.fence_rkey = r.rkey();
    }
  }
  // Sorted so that Resolve() scans regions in arena order.
  std::sort(l.data.begin(), l.data.end(), [](const DataRegion& a, const DataRegion& b) {
    return a.arena_offset < b.arena_offset;
  });
  // The GID is how the queue pair reaches the server; without it (or the
  // regions) no RDMA path can be built.
  if (!have_index || l.data.empty() || hs.endpoints().rdma_gid().size() != 16) {
    return absl::UnavailableError("the server publishes no RDMA regions");
  }
  l.data_arena_bytes = hs.data_arena_bytes();
  return l;
}

// A linear scan: a server publishes few data regions.
const DataRegion* ServerLayout::Resolve(uint64_t offset, uint64_t len) const {
  // Written so that offset + len cannot overflow on untrusted input.
  if (offset > data_arena_bytes || len > data_arena_bytes - offset) return nullptr;
  for (const DataRegion& r : data) {
    if (offset >= r.arena_offset && offset + len <= r.arena_offset + r.length) return &r;
  }
  return nullptr;
}

// Checked before any entry READ: a torn or hostile slot word must not make
// the client READ outside the arena or into a huge buffer.
bool ServerLayout::Plausible(const layout::Slot& slot, size_t key_len) const {
  return slot.size >= layout::EntryBytes(key_len, 0) &&
         slot.size <= layout::EntryBytes(key_len, limits.max_value_bytes) &&
         slot.offset <= data_arena_bytes && slot.size <= data_arena_bytes - slot.offset;
}

}  // namespace initiator
}  // namespace kvstore
