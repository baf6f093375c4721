// Copyright 2026 The kvstore Authors.
//
// A commit's life: reserve lease space -> acquire a slot -> stage the entry
// and the commit in the slot's scratch -> take a credit -> post WRITE + SEND
// -> wait for the ack -> return the credit, the slot, any pooled buffer, and
// finish the lease space. A failure at any step gives back what the earlier
// steps took, so leases drain and credits never leak.

#include "client/internal/rdma/writer.h"

#include <algorithm>
#include <cstring>

#include "client/internal/buffer_access.h"
#include "client/internal/data_path.h"
#include "common/protocol/commit_wire.h"
#include "common/protocol/layout.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

namespace {

constexpr size_t kBatch = 16;  // pairs per MultiPut round

}  // namespace

// Registering returns the client's existing counter when an earlier path
// already did, so a reconnect keeps counting on the same series.
RdmaWriter::RdmaWriter(const ServerLayout* layout, OpEngine* engine, BufferPool* pool,
                       LeaseManager* leases, metrics::Registry* registry)
    : layout_(layout),
      engine_(engine),
      pool_(pool),
      leases_(leases),
      lease_aborts_(registry->AddCounter(
          "kvstore_client_lease_aborts_total",
          "RDMA commits refused because their write lease had expired (each is redone).")) {}

// --- Entry points --------------------------------------------------------------

// A copy PUT: the value is staged in scratch (or a pooled buffer).
absl::Status RdmaWriter::Put(absl::string_view key, absl::string_view value, absl::Time deadline) {
  return PutImpl(key, value, 0, deadline);
}

// Zero copy: the NIC gathers the value from the caller's registered memory.
absl::Status RdmaWriter::PutFrom(absl::string_view key, const RegisteredBuffer& buffer,
                                 size_t offset, size_t length, absl::Time deadline) {
  // Written as two comparisons so that offset + length cannot overflow.
  if (offset > buffer.size() || length > buffer.size() - offset) {
    return absl::InvalidArgumentError("range outside the registered buffer");
  }
  return PutImpl(key, absl::string_view(buffer.data() + offset, length),
                 KvClientInternal::lkey(buffer), deadline);
}

// A DELETE writes nothing: the commit carries the key and the server
// unlinks the slot. It is not redone on kAborted (no lease is involved).
absl::Status RdmaWriter::Delete(absl::string_view key, absl::Time deadline) {
  KV_RETURN_IF_ERROR(layout_->limits.CheckKey(key));
  return SendOnly([&](uint64_t request_id,
                      char* out) { return wire::EncodeDeleteCommit(request_id, key, out); },
                  deadline);
}

// A commit with no WRITE before it (DELETE, replica DELETE) on one slot
// and credit.
absl::Status RdmaWriter::SendOnly(absl::FunctionRef<size_t(uint64_t, char*)> encode,
                                  absl::Time deadline) {
  if (engine_->broken()) {
    return NotSent(absl::UnavailableError("RDMA data path broken; reconnecting"));
  }
  absl::StatusOr<OpSlot*> taken = engine_->AcquireSlot(deadline);
  if (!taken.ok()) return NotSent(taken.status());
  OneSlotGuard guard(engine_, *taken);
  OpSlot* s = *taken;
  const size_t len = encode(engine_->NewRequest(s), s->commit);
  // Until the SEND is posted nothing has left this client: those failures
  // are marked retryable.
  if (absl::Status c = engine_->AcquireCredit(deadline); !c.ok()) return NotSent(c);
  CreditGuard credit(engine_);
  rdma::Sge sge{reinterpret_cast<uint64_t>(s->commit), static_cast<uint32_t>(len), s->lkey};
  if (absl::Status p = engine_->PostSend(sge, s); !p.ok()) return NotSent(p);
  KV_RETURN_IF_ERROR(engine_->Wait(s, deadline));
  return s->ack;
}

// All pairs are checked before any is written, so a bad pair fails the call
// without partial work; then batches of kBatch pairs.
absl::Status RdmaWriter::MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs,
                                  absl::Time deadline) {
  for (const auto& [k, v] : pairs) {
    KV_RETURN_IF_ERROR(layout_->limits.CheckKey(k));
    KV_RETURN_IF_ERROR(layout_->limits.CheckValueLength(v.size()));
  }
  for (size_t begin = 0; begin < pairs.size(); begin += kBatch) {
    const size_t n = std::min(kBatch, pairs.size() - begin);
    KV_RETURN_IF_ERROR(MultiPutBatch(pairs.subspan(begin, n), deadline));
  }
  return absl::OkStatus();
}

// --- Replication -----------------------------------------------------------------

absl::Status RdmaWriter::ReplicatePut(absl::string_view entry, const wire::ReplicaCommit& tag,
                                      absl::Time deadline) {
  if (tag.primary_node_id.empty() || tag.primary_node_id.size() > wire::kMaxReplicaNodeIdBytes) {
    return absl::InvalidArgumentError("replica commit node id length out of range");
  }
  KV_ASSIGN_OR_RETURN(layout::EntryView view, layout::ParseEntryHeader(entry));
  KV_RETURN_IF_ERROR(layout_->limits.CheckKey(view.key));
  KV_RETURN_IF_ERROR(layout_->limits.CheckValueLength(view.value.size()));
  if (layout::EntryBytes(view.key.size(), view.value.size()) != entry.size()) {
    return absl::InvalidArgumentError("replicated entry lengths do not match its size");
  }
  for (int attempt = 0;; ++attempt) {
    absl::Status s = ReplicatePutOnce(entry, tag, deadline);
    if (s.code() != absl::StatusCode::kAborted || attempt > 0) return s;
    lease_aborts_->Increment();
  }
}

// PutOnce() for an entry that is already built: it is copied into the
// slot's scratch (or a pooled buffer) and WRITTEN as one piece.
absl::Status RdmaWriter::ReplicatePutOnce(absl::string_view entry, const wire::ReplicaCommit& tag,
                                          absl::Time deadline) {
  KV_ASSIGN_OR_RETURN(LeaseSpace space, leases_->Reserve(entry.size()));
  absl::StatusOr<OpSlot*> taken = engine_->AcquireSlot(deadline);
  if (!taken.ok()) {
    leases_->Finish(space, taken.status());
    return taken.status();
  }
  OneSlotGuard guard(engine_, *taken);
  OpSlot* s = *taken;
  StagedPut staged;
  staged.slot = s;
  char* staging = s->entry;
  uint32_t lkey = s->lkey;
  absl::Status st;
  if (entry.size() > kSmallEntryArea) {
    absl::StatusOr<std::unique_ptr<Block>> big = pool_->Acquire(entry.size());
    if (big.ok()) {
      staged.big = std::move(*big);
      staging = staged.big->mem.get();
      lkey = staged.big->mr->lkey();
    } else {
      st = big.status();
    }
  }
  if (st.ok()) {
    std::memcpy(staging, entry.data(), entry.size());
    staged.write_sges[staged.nwrite++] = {reinterpret_cast<uint64_t>(staging),
                                          static_cast<uint32_t>(entry.size()), lkey};
    wire::PutCommit commit;
    commit.request_id = engine_->NewRequest(s);
    commit.lease_id = space.lease->id;
    commit.offset = space.arena_offset;
    commit.size = entry.size();
    const size_t len = wire::EncodeReplicaPutCommit(commit, tag, s->commit);
    staged.send_sge = {reinterpret_cast<uint64_t>(s->commit), static_cast<uint32_t>(len), s->lkey};
    staged.remote_addr = space.remote_addr;
    staged.rkey = space.lease->rkey;
    st = PostStaged(absl::MakeSpan(&staged, 1), deadline);
  }
  if (st.ok()) {
    st = engine_->Wait(s, deadline);
    engine_->ReturnCredits(1);
    if (st.ok()) st = s->ack;
  }
  if (staged.big) pool_->Release(std::move(staged.big));
  leases_->Finish(space, st);
  return st;
}

absl::Status RdmaWriter::ReplicateDelete(absl::string_view key, const wire::ReplicaCommit& tag,
                                         absl::Time deadline) {
  KV_RETURN_IF_ERROR(layout_->limits.CheckKey(key));
  if (tag.primary_node_id.empty() || tag.primary_node_id.size() > wire::kMaxReplicaNodeIdBytes) {
    return absl::InvalidArgumentError("replica commit node id length out of range");
  }
  return SendOnly(
      [&](uint64_t request_id, char* out) {
        return wire::EncodeReplicaDeleteCommit(request_id, key, tag, out);
      },
      deadline);
}

// --- PUT -------------------------------------------------------------------------

// Only kAborted is redone: the lease expired
// before the commit arrived, so the entry was never published.
absl::Status RdmaWriter::PutImpl(absl::string_view key, absl::string_view value,
                                 uint32_t value_lkey, absl::Time deadline) {
  KV_RETURN_IF_ERROR(layout_->limits.CheckKey(key));
  KV_RETURN_IF_ERROR(layout_->limits.CheckValueLength(value.size()));
  for (int attempt = 0;; ++attempt) {
    absl::Status s = PutOnce(key, value, value_lkey, deadline);
    if (s.code() != absl::StatusCode::kAborted || attempt > 0) return s;
    lease_aborts_->Increment();  // the lease expired under us: redo with a fresh one
  }
}

// One attempt, start to finish, on a single slot and credit.
absl::Status RdmaWriter::PutOnce(absl::string_view key, absl::string_view value,
                                 uint32_t value_lkey, absl::Time deadline) {
  const uint64_t size = layout::EntryBytes(key.size(), value.size());
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
  absl::Status st = Stage(s, key, value, value_lkey, space, &staged);
  if (st.ok()) st = PostStaged(absl::MakeSpan(&staged, 1), deadline);
  if (st.ok()) {
    st = engine_->Wait(s, deadline);
    engine_->ReturnCredits(1);
    if (st.ok()) st = s->ack;
  }
  if (staged.big) pool_->Release(std::move(staged.big));
  // Always finished, even on failure, so the lease can drain and be released.
  leases_->Finish(space, st);
  return st;
}

// The entry is written by the NIC into the lease exactly as the layout
// defines it (header, key, value); the server verifies its checksum when the
// commit arrives, so the header is filled here, before the WRITE.
absl::Status RdmaWriter::Stage(OpSlot* s, absl::string_view key, absl::string_view value,
                               uint32_t value_lkey, const LeaseSpace& space, StagedPut* out) {
  const size_t head = layout::kEntryHeaderBytes + key.size();
  const size_t staged_bytes = value_lkey != 0 ? head : head + value.size();
  char* staging = s->entry;
  if (staged_bytes > kSmallEntryArea) {
    KV_ASSIGN_OR_RETURN(out->big, pool_->Acquire(staged_bytes));
    staging = out->big->mem.get();
  }
  const uint32_t staging_lkey = out->big ? out->big->mr->lkey() : s->lkey;
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

// One doorbell for the whole batch: the NIC processes the pairs in order, and
// RC ordering keeps each WRITE ahead of its SEND.
absl::Status RdmaWriter::PostStaged(absl::Span<StagedPut> puts, absl::Time deadline) {
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

// --- MultiPut ----------------------------------------------------------------------

// Stages and posts every pair of a batch on its slot, then waits for each
// ack in turn; each pair's result goes to (*results)[i] and its lease space
// is finished.
void RdmaWriter::CommitBatch(absl::Span<const std::pair<std::string, std::string>> pairs,
                             const std::vector<OpSlot*>& slots,
                             const std::vector<LeaseSpace>& spaces, absl::Time deadline,
                             std::vector<absl::Status>* results) {
  const size_t n = pairs.size();
  std::vector<StagedPut> staged(n);
  absl::Status st;
  for (size_t i = 0; i < n && st.ok(); ++i) {
    st = Stage(slots[i], pairs[i].first, pairs[i].second, 0, spaces[i], &staged[i]);
  }
  if (st.ok()) st = PostStaged(absl::MakeSpan(staged), deadline);
  for (size_t i = 0; i < n; ++i) {
    if (st.ok()) {
      absl::Status w = engine_->Wait(slots[i], deadline);
      (*results)[i] = w.ok() ? slots[i]->ack : w;
      engine_->ReturnCredits(1);
    } else {
      (*results)[i] = st;
    }
    if (staged[i].big) pool_->Release(std::move(staged[i].big));
    leases_->Finish(spaces[i], (*results)[i]);
  }
}

// Reserves every pair's space first, then stages and posts all, then waits
// for each ack in turn. Pairs whose lease expired are redone one by one; the
// first error (in pair order) is the result.
absl::Status RdmaWriter::MultiPutBatch(absl::Span<const std::pair<std::string, std::string>> pairs,
                                       absl::Time deadline) {
  // More commits than credits could never all be posted at once.
  const size_t n = std::min<size_t>(pairs.size(), engine_->credits());
  if (n < pairs.size()) {
    KV_RETURN_IF_ERROR(MultiPutBatch(pairs.subspan(0, n), deadline));
    return MultiPutBatch(pairs.subspan(n), deadline);
  }
  std::vector<LeaseSpace> spaces;
  for (const auto& [k, v] : pairs) {
    KV_ASSIGN_OR_RETURN(LeaseSpace sp, leases_->Reserve(layout::EntryBytes(k.size(), v.size())));
    spaces.push_back(sp);
  }
  std::vector<absl::Status> results(n);
  {
    // Scoped: the slots go back before any pair is redone below, since
    // PutOnce() takes a slot of its own and a holder never waits for more.
    absl::StatusOr<std::vector<OpSlot*>> slots = engine_->AcquireSlots(n, deadline);
    if (!slots.ok()) {
      for (const LeaseSpace& sp : spaces) leases_->Finish(sp, slots.status());
      return slots.status();
    }
    SlotGuard guard(engine_, *slots);
    CommitBatch(pairs, *slots, spaces, deadline, &results);
  }
  absl::Status first;
  for (size_t i = 0; i < n; ++i) {
    if (results[i].code() == absl::StatusCode::kAborted) {
      lease_aborts_->Increment();  // that lease expired: redo this one alone
      results[i] = PutOnce(pairs[i].first, pairs[i].second, 0, deadline);
    }
    if (!results[i].ok() && first.ok()) first = results[i];
  }
  return first;
}

}  // namespace client
}  // namespace kvstore
