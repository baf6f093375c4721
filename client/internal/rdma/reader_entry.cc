// Copyright 2026 The kvstore Authors.
//
// The entry READ shared by the hit path (reader_cached.cc) and the two-READ
// path (reader.cc): one work request, or, with ReadOptions::read_in_pieces,
// for a large entry several, each signaled, with the value checksummed as
// each one lands (read_chunks.h).
//
// Why in pieces: the checksum is the one step of a GET that needs every
// byte, so done after the READ it adds its whole time to the GET. A piece
// that has completed is in local memory for good (the NIC is done with it),
// and XXH3's streaming digest does not depend on how its input is split, so
// hashing piece i while pieces i+1.. are on the wire leaves only the last
// piece's hash after the READ. That needs a NIC moving the bytes while the
// CPU hashes; with Soft-RoCE the CPU does both, hence opt-in.

#include <algorithm>
#include <cstring>

#include "client/internal/rdma/read_chunks.h"
#include "client/internal/rdma/reader.h"
#include "common/rdma/initiator/connection.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

using initiator::kKindRead;
using initiator::OpSlot;

// A slot's READ pieces and its fence READ, with one to spare, must fit the
// send queue the connection sizes for each slot.
static_assert(kMaxReadChunks + 2 <= initiator::kSendWorkRequestsPerSlot,
              "a large GET's work requests overflow its slot's share of the send queue");

absl::Status RdmaReader::ReadEntry(const Request& req, const layout::Slot& slot,
                                   const EntryRead& plan, uint64_t remote, uint32_t rkey, OpSlot* s,
                                   const rdma::ReadOp* fence, std::optional<uint64_t>* checksum) {
  ReadChunk chunks[kMaxReadChunks];
  int n = 1;
  if (read_in_pieces_) {
    n = SplitRead(absl::MakeConstSpan(plan.sges, plan.nsge), chunks);
  } else {
    chunks[0].nsge = plan.nsge;
    std::copy(plan.sges, plan.sges + plan.nsge, chunks[0].sges);
  }
  rdma::ReadOp ops[kMaxReadChunks + 1];
  for (int i = 0; i < n; ++i) {
    ops[i].local = absl::MakeConstSpan(chunks[i].sges, chunks[i].nsge);
    ops[i].remote_addr = remote + chunks[i].begin;
    ops[i].rkey = rkey;
    ops[i].wr_id = kKindRead | s->index;
    // One piece: only the last work request of the doorbell is signaled
    // (its completion implies the earlier ones': RC completes in order).
    ops[i].signaled = n > 1;
  }
  int nops = n;
  if (fence != nullptr) ops[nops++] = *fence;
  ops[nops - 1].signaled = true;
  engine_->Arm(s);
  absl::Status posted = engine_->PostReads(absl::MakeConstSpan(ops, nops));
  if (!posted.ok()) return posted;
  if (n == 1) return engine_->Wait(s, req.deadline);

  // The value lands after the header and key in `plan.local`, or in the
  // caller's buffer for a zero-copy GET (PlanEntryRead).
  const uint64_t head = layout::kEntryHeaderBytes + req.key.size();
  std::optional<layout::EntryHasher> hasher;
  const char* value = nullptr;
  uint64_t value_end = 0;  // READ offset where the value ends
  uint64_t hashed = head;  // READ offset up to which the value is hashed
  for (int i = 0; i < n; ++i) {
    KV_RETURN_IF_ERROR(engine_->WaitReads(s, static_cast<uint32_t>(i + 1), req.deadline));
    if (i == 0 && !req.header_only && chunks[0].end >= head) {
      // The header is untrusted: hash only what belongs to an entry of this
      // key filling this slot (Verify() reports anything else).
      layout::EntryHeader h;
      std::memcpy(&h, plan.local, sizeof(h));
      const bool fits = req.dest == nullptr || h.value_len <= req.dest->capacity;
      if (h.magic == layout::kEntryMagic && h.key_len == req.key.size() && fits &&
          layout::EntryBytes(h.key_len, h.value_len) == slot.size) {
        hasher.emplace(h, absl::string_view(plan.local + layout::kEntryHeaderBytes, h.key_len));
        value = req.dest != nullptr ? req.dest->data : plan.local + head;
        value_end = head + h.value_len;
      }
    }
    if (!hasher) continue;
    const uint64_t end = std::min(chunks[i].end, value_end);
    if (end > hashed) {
      hasher->Update(absl::string_view(value + (hashed - head), end - hashed));
      hashed = end;
    }
  }
  if (fence != nullptr) {
    KV_RETURN_IF_ERROR(engine_->WaitReads(s, static_cast<uint32_t>(n + 1), req.deadline));
  }
  if (hasher) *checksum = hasher->Digest();
  return absl::OkStatus();
}

}  // namespace client
}  // namespace kvstore
