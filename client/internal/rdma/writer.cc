// Copyright 2026 The kvstore Authors.
//
// The checks and the batching are here; each commit's life (lease space,
// slot, staging, credit, WRITE + SEND, ack) is the EntryWriter's.

#include "client/internal/rdma/writer.h"

#include <algorithm>

#include "client/internal/buffer_access.h"
#include "client/internal/data_path.h"
#include "common/protocol/commit_wire.h"
#include "common/protocol/layout.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

using initiator::LeaseSpace;
using initiator::OpSlot;
using initiator::SlotGuard;
using initiator::StagedPut;

namespace {

constexpr size_t kBatch = 16;  // pairs per MultiPut round

}  // namespace

RdmaWriter::RdmaWriter(const initiator::ServerLayout* layout, initiator::OpEngine* engine,
                       initiator::LeaseManager* leases, initiator::EntryWriter* entries)
    : layout_(layout), engine_(engine), leases_(leases), entries_(entries) {}

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
// Until the SEND is posted nothing has left this client: those failures
// are marked retryable.
absl::Status RdmaWriter::Delete(absl::string_view key, absl::Time deadline) {
  KV_RETURN_IF_ERROR(layout_->limits.CheckKey(key));
  bool posted = false;
  absl::Status s =
      entries_->SendOnly([&](uint64_t request_id,
                             char* out) { return wire::EncodeDeleteCommit(request_id, key, out); },
                         deadline, &posted);
  return posted ? s : NotSent(s);
}

// All pairs are checked before any is written, so a bad pair fails the call
// without partial work; then batches of kBatch pairs.
absl::StatusOr<std::vector<absl::Status>> RdmaWriter::MultiPut(
    absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time deadline) {
  for (const auto& [k, v] : pairs) {
    KV_RETURN_IF_ERROR(layout_->limits.CheckKey(k));
    KV_RETURN_IF_ERROR(layout_->limits.CheckValueLength(v.size()));
  }
  std::vector<absl::Status> out;
  out.reserve(pairs.size());
  for (size_t begin = 0; begin < pairs.size(); begin += kBatch) {
    const size_t n = std::min(kBatch, pairs.size() - begin);
    if (!MultiPutBatch(pairs.subspan(begin, n), deadline, &out)) break;
  }
  while (out.size() < pairs.size()) {
    out.push_back(NotSent(absl::UnavailableError("not sent: an earlier pair of the batch failed")));
  }
  return out;
}

// --- PUT -------------------------------------------------------------------------

absl::Status RdmaWriter::PutImpl(absl::string_view key, absl::string_view value,
                                 uint32_t value_lkey, absl::Time deadline) {
  KV_RETURN_IF_ERROR(layout_->limits.CheckKey(key));
  KV_RETURN_IF_ERROR(layout_->limits.CheckValueLength(value.size()));
  return entries_->Put(
      layout::EntryBytes(key.size(), value.size()),
      [&](OpSlot* s, const LeaseSpace& space, StagedPut* out) {
        return entries_->StageNew(s, key, value, value_lkey, space, out);
      },
      deadline);
}

absl::Status RdmaWriter::PutOnce(absl::string_view key, absl::string_view value,
                                 absl::Time deadline) {
  return entries_->PutOnce(
      layout::EntryBytes(key.size(), value.size()),
      [&](OpSlot* s, const LeaseSpace& space, StagedPut* out) {
        return entries_->StageNew(s, key, value, 0, space, out);
      },
      deadline);
}

// --- MultiPut ----------------------------------------------------------------------

// Stages and posts every pair of a batch on its slot, then waits for each
// ack in turn; each pair's result goes to (*results)[i] and its lease space
// is finished. A failure before the batch was posted leaves every pair
// unsent (kNotSentPayload).
void RdmaWriter::CommitBatch(absl::Span<const std::pair<std::string, std::string>> pairs,
                             const std::vector<OpSlot*>& slots,
                             const std::vector<LeaseSpace>& spaces, absl::Time deadline,
                             std::vector<absl::Status>* results) {
  const size_t n = pairs.size();
  std::vector<StagedPut> staged(n);
  absl::Status st;
  for (size_t i = 0; i < n && st.ok(); ++i) {
    st = entries_->StageNew(slots[i], pairs[i].first, pairs[i].second, 0, spaces[i], &staged[i]);
  }
  if (!st.ok()) st = NotSent(st);
  if (st.ok()) st = entries_->PostStaged(absl::MakeSpan(staged), deadline);
  for (size_t i = 0; i < n; ++i) {
    if (st.ok()) {
      absl::Status w = engine_->Wait(slots[i], deadline);
      (*results)[i] = w.ok() ? slots[i]->ack : w;
      engine_->ReturnCredits(1);
    } else {
      (*results)[i] = st;
    }
    entries_->Unstage(&staged[i]);
    leases_->Finish(spaces[i], (*results)[i]);
  }
}

// Reserves every pair's space first, then stages and posts all, then waits
// for each ack in turn. Pairs whose lease expired (refused: no effect) are
// redone one by one.
bool RdmaWriter::MultiPutBatch(absl::Span<const std::pair<std::string, std::string>> pairs,
                               absl::Time deadline, std::vector<absl::Status>* out) {
  // More commits than credits could never all be posted at once.
  const size_t n = std::min<size_t>(pairs.size(), engine_->credits());
  if (n < pairs.size()) {
    return MultiPutBatch(pairs.subspan(0, n), deadline, out) &&
           MultiPutBatch(pairs.subspan(n), deadline, out);
  }
  std::vector<LeaseSpace> spaces;
  for (const auto& [k, v] : pairs) {
    absl::StatusOr<LeaseSpace> sp = leases_->Reserve(layout::EntryBytes(k.size(), v.size()));
    if (!sp.ok()) {
      for (const LeaseSpace& s : spaces) leases_->Finish(s, sp.status());
      out->insert(out->end(), pairs.size(), NotSent(sp.status()));
      return false;
    }
    spaces.push_back(*sp);
  }
  std::vector<absl::Status> results(n);
  {
    // Scoped: the slots go back before any pair is redone below, since
    // PutOnce() takes a slot of its own and a holder never waits for more.
    absl::StatusOr<std::vector<OpSlot*>> slots = engine_->AcquireSlots(n, deadline);
    if (!slots.ok()) {
      for (const LeaseSpace& sp : spaces) leases_->Finish(sp, slots.status());
      out->insert(out->end(), pairs.size(), NotSent(slots.status()));
      return false;
    }
    SlotGuard guard(engine_, *slots);
    CommitBatch(pairs, *slots, spaces, deadline, &results);
  }
  bool all = true;
  for (size_t i = 0; i < n; ++i) {
    if (results[i].code() == absl::StatusCode::kAborted) {
      entries_->CountLeaseAbort();  // that lease expired: redo this one alone
      results[i] = PutOnce(pairs[i].first, pairs[i].second, deadline);
    }
    all = all && results[i].ok();
    out->push_back(std::move(results[i]));
  }
  return all;
}

}  // namespace client
}  // namespace kvstore
