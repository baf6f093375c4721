// Copyright 2026 The kvstore Authors.
//
// The location cache's hit path (reader.h). Kept apart from the two-READ
// path because it trusts a different thing: not a slot word READ a moment
// ago, but a location recorded earlier. What makes that safe is the server's
// retired mark (layout::kRetiredEntryMagic, set before the write that
// superseded the entry is acknowledged) together with the read span bound:
// an entry whose header still carries the live magic had not been retired
// when the header was READ, so its memory could not be reused before the
// read span ends.
//
// Cost on a hit: a cell lookup (no lock), one doorbell with the entry READ
// and the fence READ, the caller's own polling (OpEngine::Wait), a checksum
// over the bytes read, and for Get() the one allocation of the returned
// string.

#include <chrono>
#include <cstring>
#include <utility>

#include "client/internal/rdma/reader.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

using initiator::DataRegion;
using initiator::OpSlot;

void RdmaReader::SetMapEpoch(uint64_t epoch) {
  // Another map may route the key elsewhere, and the fence check answers
  // for the server's current map only: start over.
  if (epoch != fence_.map_epoch()) cache_.Clear();
  fence_.set_map_epoch(epoch);
}

RdmaReader::Attempt RdmaReader::ReadCached(const Request& req, const LocationCache::Location& loc,
                                           OpSlot* s) {
  const layout::Slot slot{0, loc.offset, loc.size};
  // The cached size may be another key's (a hash collision): the same
  // bounds as for a slot word READ from the index.
  if (!layout_->Plausible(slot, req.key.size())) return {Attempt::kTorn};
  const size_t head = layout::kEntryHeaderBytes + req.key.size();
  const DataRegion* region = layout_->Resolve(slot.offset, req.header_only ? head : slot.size);
  if (region == nullptr) return {Attempt::kTorn};
  EntryRead plan;
  // kOutOfRange from the plan speaks of a size that may be stale: let the
  // two-READ path answer.
  if (!PlanEntryRead(req, slot, s, &plan).ok()) return {Attempt::kTorn};
  auto release = [&] {
    if (plan.big) pool_->Release(std::move(plan.big));
  };
  // The entry READ, then the fence words in the same doorbell: READ after
  // the entry, words that admit it were current when it was read, or later.
  rdma::ReadOp fence_op;
  rdma::Sge fence_sge;
  const bool has_fence = FenceReadOp(s, &fence_sge, &fence_op);
  // The span on the steady clock as integers: absl::Duration's arithmetic
  // and comparison cost a hit GET ~40 instructions more.
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<uint64_t> computed;
  absl::Status posted =
      ReadEntry(req, slot, plan, region->addr + (slot.offset - region->arena_offset), region->rkey,
                s, has_fence ? &fence_op : nullptr, &computed);
  if (!posted.ok()) {
    release();
    return {Attempt::kDone, posted};
  }
  if (std::chrono::steady_clock::now() - t0 > max_read_span_) {
    span_retries_->Increment();
    release();
    return {Attempt::kTorn};
  }
  FenceRead fence;
  if (absl::Status f = AdmitFence(s, &fence); !f.ok()) {
    release();
    return {Attempt::kDone, f};
  }
  layout::EntryHeader h;
  std::memcpy(&h, plan.local, sizeof(h));
  // A live magic, and the very entry recorded (the checksum covers the
  // version, key and value), before the value is looked at.
  if (h.magic != layout::kEntryMagic || h.checksum != loc.checksum) {
    release();
    return {Attempt::kTorn};
  }
  absl::StatusOr<size_t> verified =
      Verify(req.key, slot, plan.local, req.dest, req.out, req.header_only, computed);
  release();
  if (verified.ok()) NoteRead(slot.offset);
  if (verified.ok() || verified.status().code() == absl::StatusCode::kOutOfRange) {
    return {Attempt::kDone, verified};
  }
  return {Attempt::kTorn};
}

}  // namespace client
}  // namespace kvstore
