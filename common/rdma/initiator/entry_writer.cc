// Copyright 2026 The kvstore Authors.
//
// A commit's life: reserve lease space -> acquire a slot -> stage the entry
// and the commit in the slot's scratch -> take a credit -> post WRITE + SEND
// -> wait for the ack -> return the credit, the slot, any pooled buffer, and
// finish the lease space.

#include "common/rdma/initiator/entry_writer.h"

#include <cstring>
#include <vector>

#include "common/protocol/layout.h"
#include "common/status_macros.h"

namespace kvstore {
namespace initiator {

EntryWriter::EntryWriter(OpEngine* engine, BufferPool* pool, LeaseManager* leases,
                         metrics::Counter* lease_aborts)
    : engine_(engine), pool_(pool), leases_(leases), lease_aborts_(lease_aborts) {}

// Only kAborted is redone: the lease expired before the commit arrived, so
// the entry was never published.
absl::Status EntryWriter::Put(uint64_t size, Stager stage, absl::Time deadline) {
  for (int attempt = 0;; ++attempt) {
    absl::Status s = PutOnce(size, stage, deadline);
    if (s.code() != absl::StatusCode::kAborted || attempt > 0) return s;
    lease_aborts_->Increment();  // the lease expired under us: redo with a fresh one
  }
}

// One attempt, start to finish, on a single slot and credit.
absl::Status EntryWriter::PutOnce(uint64_t size, Stager stage, absl::Time deadline) {
  KV_ASSIGN_OR_RETURN(LeaseSpace space, leases_->Reserve(size));
  absl::StatusOr<OpSlot*> taken = engine_->AcquireSlot(deadline);
  if (!taken.ok()) {
    // Nothing was written: the reserved space is given back unused.
    leases_->Finish(space, taken.status());
    return taken.status();
  }
  OneSlotGuard guard(engine_, *taken);
  OpSlot* s = *taken;
  StagedPut staged;
  absl::Status st = stage(s, space, &staged);
  if (st.ok()) st = PostStaged(absl::MakeSpan(&staged, 1), deadline);
  if (st.ok()) {
    st = engine_->Wait(s, deadline);
    engine_->ReturnCredits(1);
    if (st.ok()) st = s->ack;
  }
  Unstage(&staged);
  // Always finished, even on failure, so the lease can drain and be released.
  leases_->Finish(space, st);
  return st;
}

// A commit with no WRITE before it (a DELETE) on one slot and credit.
absl::Status EntryWriter::SendOnly(SendEncoder encode, absl::Time deadline, bool* posted) {
  bool ignored;
  if (posted == nullptr) posted = &ignored;
  *posted = false;
  if (engine_->broken()) return absl::UnavailableError("RDMA data path broken; reconnecting");
  KV_ASSIGN_OR_RETURN(OpSlot * s, engine_->AcquireSlot(deadline));
  OneSlotGuard guard(engine_, s);
  const size_t len = encode(engine_->NewRequest(s), s->commit);
  KV_RETURN_IF_ERROR(engine_->AcquireCredit(deadline));
  CreditGuard credit(engine_);
  rdma::Sge sge{reinterpret_cast<uint64_t>(s->commit), static_cast<uint32_t>(len), s->lkey};
  KV_RETURN_IF_ERROR(engine_->PostSend(sge, s));
  *posted = true;
  KV_RETURN_IF_ERROR(engine_->Wait(s, deadline));
  return s->ack;
}

absl::StatusOr<std::pair<char*, uint32_t>> EntryWriter::Scratch(OpSlot* s, size_t bytes,
                                                                StagedPut* out) {
  if (bytes <= kSmallEntryArea) return std::make_pair(s->entry, s->lkey);
  KV_ASSIGN_OR_RETURN(out->big, pool_->Acquire(bytes));
  return std::make_pair(out->big->mem.get(), out->big->mr->lkey());
}

// The entry is written by the NIC into the lease exactly as the layout
// defines it (header, key, value); the server verifies its checksum when the
// commit arrives, so the header is filled here, before the WRITE.
absl::Status EntryWriter::StageNew(OpSlot* s, absl::string_view key, absl::string_view value,
                                   uint32_t value_lkey, const LeaseSpace& space, StagedPut* out) {
  const size_t head = layout::kEntryHeaderBytes + key.size();
  const size_t staged_bytes = value_lkey != 0 ? head : head + value.size();
  KV_ASSIGN_OR_RETURN(auto scratch, Scratch(s, staged_bytes, out));
  auto [staging, staging_lkey] = scratch;
  // The slot's generation doubles as the entry's version: it only grows.
  const layout::EntryHeader header = layout::MakeHeader(key, value, s->generation);
  std::memcpy(staging, &header, sizeof(header));
  std::memcpy(staging + layout::kEntryHeaderBytes, key.data(), key.size());
  out->slot = s;
  if (value_lkey != 0) {
    // Zero copy: gather header+key from staging, the value from the
    // caller's registered buffer.
    out->write_sges[out->nwrite++] = {reinterpret_cast<uint64_t>(staging),
                                      static_cast<uint32_t>(head), staging_lkey};
    if (!value.empty()) {
      out->write_sges[out->nwrite++] = {reinterpret_cast<uint64_t>(value.data()),
                                        static_cast<uint32_t>(value.size()), value_lkey};
    }
  } else {
    if (!value.empty()) std::memcpy(staging + head, value.data(), value.size());
    out->write_sges[out->nwrite++] = {reinterpret_cast<uint64_t>(staging),
                                      static_cast<uint32_t>(staged_bytes), staging_lkey};
  }
  wire::PutCommit commit;
  commit.key_len = static_cast<uint16_t>(key.size());
  commit.request_id = engine_->NewRequest(s);
  commit.lease_id = space.lease->id;
  commit.offset = space.arena_offset;
  commit.size = layout::EntryBytes(key.size(), value.size());
  const size_t len = wire::EncodePutCommit(commit, s->commit);
  out->send_sge = {reinterpret_cast<uint64_t>(s->commit), static_cast<uint32_t>(len), s->lkey};
  out->remote_addr = space.remote_addr;
  out->rkey = space.lease->rkey;
  return absl::OkStatus();
}

// The entry keeps its header (version and checksum) byte for byte: the
// server that receives it installs exactly what its sender committed.
absl::Status EntryWriter::StageBuilt(OpSlot* s, absl::string_view entry, const LeaseSpace& space,
                                     PutEncoder encode, StagedPut* out) {
  out->slot = s;
  KV_ASSIGN_OR_RETURN(auto scratch, Scratch(s, entry.size(), out));
  auto [staging, lkey] = scratch;
  std::memcpy(staging, entry.data(), entry.size());
  out->write_sges[out->nwrite++] = {reinterpret_cast<uint64_t>(staging),
                                    static_cast<uint32_t>(entry.size()), lkey};
  wire::PutCommit commit;
  commit.request_id = engine_->NewRequest(s);
  commit.lease_id = space.lease->id;
  commit.offset = space.arena_offset;
  commit.size = entry.size();
  const size_t len = encode(commit, s->commit);
  out->send_sge = {reinterpret_cast<uint64_t>(s->commit), static_cast<uint32_t>(len), s->lkey};
  out->remote_addr = space.remote_addr;
  out->rkey = space.lease->rkey;
  return absl::OkStatus();
}

// One doorbell for the whole batch: the NIC processes the pairs in order, and
// RC ordering keeps each WRITE ahead of its SEND.
absl::Status EntryWriter::PostStaged(absl::Span<StagedPut> puts, absl::Time deadline) {
  KV_RETURN_IF_ERROR(engine_->AcquireCredit(deadline, static_cast<int>(puts.size())));
  std::vector<rdma::QueuePair::WriteSendOp> ops(puts.size());
  for (size_t i = 0; i < puts.size(); ++i) {
    StagedPut& p = puts[i];
    ops[i].write.local = absl::MakeConstSpan(p.write_sges, p.nwrite);
    ops[i].write.remote_addr = p.remote_addr;
    ops[i].write.rkey = p.rkey;
    ops[i].write.wr_id = kKindWrite | p.slot->index;
    ops[i].write.signaled = false;
    ops[i].send = absl::MakeConstSpan(&p.send_sge, 1);
    ops[i].send_wr_id = kKindSend | p.slot->index;
    ops[i].send_signaled = i + 1 == puts.size();
    // A PUT commit is 40 bytes; a replica commit (tag and node id) may be
    // longer than the QP inlines, and then the NIC reads it from scratch.
    ops[i].send_inline = p.send_sge.length <= 64;
  }
  absl::Status st = engine_->PostWriteSends(ops);
  // Nothing was posted: nothing will be acked, so the credits come back now.
  if (!st.ok()) engine_->ReturnCredits(static_cast<int>(puts.size()));
  return st;
}

void EntryWriter::Unstage(StagedPut* put) {
  if (put->big) pool_->Release(std::move(put->big));
}

}  // namespace initiator
}  // namespace kvstore
