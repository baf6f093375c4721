// Copyright 2026 The kvstore Authors.
//
// Splitting one entry READ into pieces. A large entry is READ as up to
// kMaxReadChunks work requests, each signaled, so the reader can checksum
// the bytes of one piece while the next ones are still arriving instead of
// hashing the whole value after the last byte (RdmaReader::ReadEntry). On
// Soft-RoCE under qemu the checksum of 1 MiB costs about a tenth of its
// READ; on a 100 Gb/s NIC about two fifths.

#ifndef KVSTORE_CLIENT_INTERNAL_RDMA_READ_CHUNKS_H_
#define KVSTORE_CLIENT_INTERNAL_RDMA_READ_CHUNKS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "common/rdma/queue_pair.h"

namespace kvstore {
namespace client {

// READs shorter than twice this go as one work request: the overlap would
// save less than a work request's overhead.
inline constexpr uint64_t kChunkedReadMinBytes = 256 << 10;
// At most this many pieces per READ, so a slot never has more than
// kMaxReadChunks + 1 (its fence READ) work requests queued: the send queue
// is sized for that (common/rdma/initiator/connection.h; reader_entry.cc
// checks it).
inline constexpr int kMaxReadChunks = 4;
// Most scatter entries one piece can need: the whole READ's, at most.
inline constexpr int kMaxChunkSges = 3;

// One piece: bytes [begin, end) of the READ, landing where `sges` say.
struct ReadChunk {
  uint64_t begin = 0;
  uint64_t end = 0;
  rdma::Sge sges[kMaxChunkSges];
  int nsge = 0;
};

// Splits a READ whose local destination is `sges` (in order; their lengths
// sum to the READ's length) into pieces of equal size, 4 KiB aligned, at
// least kChunkedReadMinBytes each except the last, at most kMaxReadChunks.
// Fills `out` and returns how many pieces: 1 (the whole READ) when it is
// shorter than 2 * kChunkedReadMinBytes. REQUIRES: sges.size() <= kMaxChunkSges.
int SplitRead(absl::Span<const rdma::Sge> sges, ReadChunk out[kMaxReadChunks]);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_RDMA_READ_CHUNKS_H_
