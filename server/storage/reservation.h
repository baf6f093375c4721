// Copyright 2026 The kvstore Authors.
//
// The units of space a KvStore (kv_store.h) hands out: runs of segments and
// the reservation of one entry inside one.

#ifndef KVSTORE_SERVER_STORAGE_RESERVATION_H_
#define KVSTORE_SERVER_STORAGE_RESERVATION_H_

#include <cstdint>
#include <optional>

namespace kvstore {
namespace server {

// A contiguous run of segments held by one writer: a Writer's open segment,
// a dedicated run for one large entry, or an RDMA write lease's chunk.
struct Chunk {
  uint64_t offset = 0;  // in the data arena
  uint64_t length = 0;
  uint32_t first_segment = 0;
  uint32_t segments = 0;
};

// Space for one entry, reserved but not yet committed. The caller writes the
// entry at `ptr` (layout::EncodeEntry, or BeginEntry + value + SealEntry),
// commits [offset, offset + size) (or gives up) and then hands the
// reservation back with Writer::Done(). Until then it pins its run, so the
// run cannot be freed.
struct Reservation {
  // Pool memory at `offset`; nullptr for an empty reservation.
  char* ptr = nullptr;
  // In the data arena, a multiple of layout::kEntryAlign.
  uint64_t offset = 0;
  // layout::EntryBytes(key_len, value_len).
  uint64_t size = 0;
  // Set when the entry got a run of its own (larger than a segment); the
  // writer releases it in Writer::Done().
  std::optional<Chunk> dedicated;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_RESERVATION_H_
