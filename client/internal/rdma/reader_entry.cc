// Copyright 2026 The kvstore Authors.
//
// The entry READ shared by the hit path (reader_cached.cc) and the two-READ
// path (reader.cc): where it lands (PlanEntryRead), the READ itself (one work
// request, or, with ReadOptions::read_in_pieces, for a large entry several,
// each signaled, with the value checksummed as each one lands: read_chunks.h),
// and the checks of what arrived (Verify).
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

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/internal/buffer_access.h"
#include "client/internal/rdma/read_chunks.h"
#include "client/internal/rdma/reader.h"
#include "common/protocol/fence.h"
#include "common/rdma/initiator/connection.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

using initiator::kKindRead;
using initiator::kSmallEntryArea;
using initiator::OpSlot;
using layout::Slot;

// A slot's READ pieces and its fence READ, with one to spare, must fit the
// send queue the connection sizes for each slot.
static_assert(kMaxReadChunks + 2 <= initiator::kSendWorkRequestsPerSlot,
              "a large GET's work requests overflow its slot's share of the send queue");

absl::Status RdmaReader::ReadEntry(const Request& req, const layout::Slot& slot,
                                   const EntryRead& plan, uint64_t remote, uint32_t rkey, OpSlot* s,
                                   const rdma::ReadOp* fence, std::optional<uint64_t>* checksum) {
  if (!read_in_pieces_) return ReadWhole(req, plan, remote, rkey, s, fence);
  ReadChunk chunks[kMaxReadChunks];
  const int n = SplitRead(absl::MakeConstSpan(plan.sges, plan.nsge), chunks);
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

// Three shapes of READ: header+key only (Exists); header+key to scratch and
// the value into the caller's memory (GetInto); the whole entry to scratch or
// a pooled buffer (Get). kOutOfRange when the slot already shows the value
// cannot fit the caller's buffer.
absl::Status RdmaReader::PlanEntryRead(const Request& req, const Slot& slot, OpSlot* s,
                                       EntryRead* plan) {
  // A Get() of an entry that fits the slot's scratch, first: it is every
  // hit GET of a small value, and the general path's helpers (a Status per
  // step) cost such a GET ~70 instructions for two stores.
  if (!req.header_only && req.dest == nullptr && slot.size <= kSmallEntryArea) {
    plan->local = s->entry;
    plan->sges[0] = {reinterpret_cast<uint64_t>(s->entry), static_cast<uint32_t>(slot.size),
                     s->lkey};
    plan->nsge = 1;
    return absl::OkStatus();
  }
  const size_t head = layout::kEntryHeaderBytes + req.key.size();
  // Small reads land in the slot's scratch; larger ones in a pooled buffer.
  auto local_for = [&](uint64_t bytes) -> absl::Status {
    plan->local = s->entry;
    if (bytes > kSmallEntryArea) {
      KV_ASSIGN_OR_RETURN(plan->big, pool_->Acquire(bytes));
      plan->local = plan->big->mem.get();
    }
    return absl::OkStatus();
  };
  auto local_lkey = [&] { return plan->big ? plan->big->mr->lkey() : s->lkey; };
  if (req.header_only) {
    // Exists: the header and key are enough.
    KV_RETURN_IF_ERROR(local_for(head));
    plan->sges[plan->nsge++] = {reinterpret_cast<uint64_t>(plan->local),
                                static_cast<uint32_t>(head), local_lkey()};
  } else if (req.dest != nullptr) {
    // Zero copy: header+key to scratch, value straight into the caller's
    // buffer, the padding (or an overflow) to scratch.
    const uint64_t body = slot.size - head;  // value + padding
    if (body > req.dest->capacity + layout::kEntryAlign) {
      return absl::OutOfRangeError(absl::StrCat("value is at least ",
                                                body - layout::kEntryAlign + 1,
                                                " bytes; the buffer holds ", req.dest->capacity));
    }
    KV_RETURN_IF_ERROR(local_for(head + layout::kEntryAlign));
    const uint64_t into_user = std::min<uint64_t>(body, req.dest->capacity);
    plan->sges[plan->nsge++] = {reinterpret_cast<uint64_t>(plan->local),
                                static_cast<uint32_t>(head), local_lkey()};
    if (into_user > 0) {
      plan->sges[plan->nsge++] = {reinterpret_cast<uint64_t>(req.dest->data),
                                  static_cast<uint32_t>(into_user), req.dest->lkey};
    }
    if (body > into_user) {
      plan->sges[plan->nsge++] = {reinterpret_cast<uint64_t>(plan->local + head),
                                  static_cast<uint32_t>(body - into_user), local_lkey()};
    }
  } else {
    KV_RETURN_IF_ERROR(local_for(slot.size));
    plan->sges[plan->nsge++] = {reinterpret_cast<uint64_t>(plan->local),
                                static_cast<uint32_t>(slot.size), local_lkey()};
  }
  return absl::OkStatus();
}

// The key comparison comes before the length check so that a fingerprint collision reads as
// "another key" (kNotFound), not as a torn entry worth retrying.
absl::StatusOr<size_t> RdmaReader::Verify(absl::string_view key, const Slot& slot,
                                          const char* local, const UserDest* dest, std::string* out,
                                          bool header_only, std::optional<uint64_t> computed) {
  layout::EntryHeader h;
  std::memcpy(&h, local, sizeof(h));
  if (h.magic != layout::kEntryMagic) return absl::DataLossError("bad magic");
  if (h.key_len != key.size() ||
      std::memcmp(local + layout::kEntryHeaderBytes, key.data(), key.size()) != 0) {
    return absl::NotFoundError("entry holds another key");
  }
  if (layout::EntryBytes(h.key_len, h.value_len) != slot.size) {
    return absl::DataLossError("entry length does not match its slot");
  }
  // The expiry is read from the header before the checksum is checked: a
  // torn header that looks expired reads as absent, which the checksum
  // would not have made any truer; one that looks live is checked below.
  // Most entries never expire: the clock is read only for those that do.
  if (const uint64_t expires_at_ms = layout::EntryExpiresAtMs(h); expires_at_ms != 0) {
    switch (fence::JudgeExpiry(expires_at_ms, absl::ToUnixMillis(absl::Now()))) {
      case fence::ExpiryVerdict::kLive:
        break;
      case fence::ExpiryVerdict::kExpired:
        return absl::NotFoundError("key expired");
      case fence::ExpiryVerdict::kUncertain:
        return absl::AbortedError("expiry within the clock-skew bound: the server decides");
    }
  }
  if (header_only) return size_t{h.value_len};
  if (dest == nullptr) {
    // The magic, the key and the lengths were checked above (the lengths
    // against the slot, whose bytes were all read into `local`), so only the
    // checksum is left; parsing the entry again would repeat those checks.
    const absl::string_view value(local + layout::kEntryHeaderBytes + h.key_len, h.value_len);
    const uint64_t sum = computed ? *computed : layout::EntryChecksum(h, key, value);
    if (sum != h.checksum) return absl::DataLossError("entry checksum mismatch");
    if (out->capacity() >= value.size()) {
      out->assign(value.data(), value.size());
    } else {
      // A fresh string (every Get()): constructed whole and moved in, which
      // costs ~60 instructions less than assign()'s replace-and-grow.
      *out = std::string(value.data(), value.size());
    }
    return value.size();
  }
  if (h.value_len > dest->capacity) {
    // The checksum cannot be checked without the whole value; the length
    // came from an entry whose header and key matched.
    return absl::OutOfRangeError(
        absl::StrCat("value is ", h.value_len, " bytes; the buffer holds ", dest->capacity));
  }
  // The value went straight to the caller's buffer: checksum it there.
  const uint64_t sum =
      computed ? *computed
               : layout::EntryChecksum(h, key, absl::string_view(dest->data, h.value_len));
  if (sum != h.checksum) {
    return absl::DataLossError("entry checksum mismatch");
  }
  return size_t{h.value_len};
}

// The hit path of a small GET comes here: the piece arrays above, built
// and zeroed on every call, were a tenth of its client-side instructions.
absl::Status RdmaReader::ReadWhole(const Request& req, const EntryRead& plan, uint64_t remote,
                                   uint32_t rkey, OpSlot* s, const rdma::ReadOp* fence) {
  rdma::ReadOp ops[2];
  ops[0].local = absl::MakeConstSpan(plan.sges, plan.nsge);
  ops[0].remote_addr = remote;
  ops[0].rkey = rkey;
  ops[0].wr_id = kKindRead | s->index;
  // Only the last work request of the doorbell is signaled (RC completes
  // them in order).
  ops[0].signaled = fence == nullptr;
  int nops = 1;
  if (fence != nullptr) {
    ops[1] = *fence;
    ops[1].signaled = true;
    nops = 2;
  }
  engine_->Arm(s);
  KV_RETURN_IF_ERROR(engine_->PostReads(absl::MakeConstSpan(ops, nops)));
  return engine_->Wait(s, req.deadline);
}

}  // namespace client
}  // namespace kvstore
