// Copyright 2026 The kvstore Authors.
//
// The checks here are the primary's: a write the backup would refuse for
// its shape is refused before anything is sent. Each commit's life (lease
// space, slot, staging, credit, WRITE + SEND, ack) is the initiator's
// EntryWriter, exactly as for a client's PUT.

#include "server/cluster/replication/replica_writer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/protocol/layout.h"
#include "common/status_macros.h"

namespace kvstore {
namespace server {
namespace {

absl::Status CheckTag(const wire::ReplicaCommit& tag) {
  if (tag.primary_node_id.empty() || tag.primary_node_id.size() > wire::kMaxReplicaNodeIdBytes) {
    return absl::InvalidArgumentError("replica commit node id length out of range");
  }
  return absl::OkStatus();
}

}  // namespace

// The writing thread is a server thread (the RESP loop, the RDMA poller, a
// gRPC handler): a short spin catches a fast NIC's ack, then it sleeps
// rather than yield, so waiting does not take cores from the server's other
// threads (on a 2-core host, or under emulation, yielding threads starved
// the very backups they waited for).
absl::StatusOr<std::unique_ptr<ReplicaWriter>> ReplicaWriter::Connect(
    std::shared_ptr<initiator::RdmaContext> context, control::ControlClient* control,
    const v1::HandshakeResponse& handshake, const std::string& name, uint64_t lease_bytes,
    absl::Duration rpc_timeout, const initiator::PathCounters& counters) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<initiator::PathCore> core,
                      initiator::PathCore::Connect(std::move(context), control, handshake, name,
                                                   lease_bytes, rpc_timeout, counters));
  initiator::WaitPolicy wait;
  wait.busy_poll = absl::Microseconds(50);
  wait.yield_until = absl::ZeroDuration();
  wait.first_sleep = absl::Microseconds(10);
  wait.max_sleep = absl::Microseconds(200);
  core->engine()->set_wait_policy(wait);
  return std::unique_ptr<ReplicaWriter>(new ReplicaWriter(std::move(core)));
}

absl::Status ReplicaWriter::Check(absl::string_view entry, const wire::ReplicaCommit& tag) const {
  KV_RETURN_IF_ERROR(CheckTag(tag));
  const Limits& limits = core_->layout().limits;
  KV_ASSIGN_OR_RETURN(layout::EntryView view, layout::ParseEntryHeader(entry));
  KV_RETURN_IF_ERROR(limits.CheckKey(view.key));
  KV_RETURN_IF_ERROR(limits.CheckValueLength(view.value.size()));
  if (layout::EntryBytes(view.key.size(), view.value.size()) != entry.size()) {
    return absl::InvalidArgumentError("replicated entry lengths do not match its size");
  }
  return absl::OkStatus();
}

absl::Status ReplicaWriter::Put(absl::string_view entry, const wire::ReplicaCommit& tag,
                                absl::Time deadline) {
  KV_RETURN_IF_ERROR(Check(entry, tag));
  initiator::EntryWriter* entries = core_->entries();
  return entries->Put(
      entry.size(),
      [&](initiator::OpSlot* s, const initiator::LeaseSpace& space, initiator::StagedPut* out) {
        return entries->StageBuilt(
            s, entry, space,
            [&](const wire::PutCommit& commit, char* buf) {
              return wire::EncodeReplicaPutCommit(commit, tag, buf);
            },
            out);
      },
      deadline);
}

// As a client's MultiPut does it (client/internal/rdma/writer.cc): every
// write's lease space first, then the slots, then staging and one post,
// then the acks in turn. A failure before the post leaves the writes of
// that round unsent, each with the failure's status.
void ReplicaWriter::PutBatch(absl::Span<BatchPut> puts, absl::Time deadline) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < puts.size(); ++i) {
    puts[i].status = Check(puts[i].entry, puts[i].tag);
    if (puts[i].status.ok()) todo.push_back(i);
  }
  // More commits than credits could never all be posted at once.
  const size_t credits = std::max<size_t>(1, core_->engine()->credits());
  for (size_t begin = 0; begin < todo.size(); begin += credits) {
    const size_t n = std::min(credits, todo.size() - begin);
    PostBatch(puts, std::vector<size_t>(todo.begin() + begin, todo.begin() + begin + n), deadline);
  }
  for (size_t i : todo) {
    if (puts[i].status.code() != absl::StatusCode::kAborted) continue;
    core_->entries()->CountLeaseAbort();  // that lease expired: redo this one alone
    puts[i].status = Put(puts[i].entry, puts[i].tag, deadline);
  }
}

void ReplicaWriter::PostBatch(absl::Span<BatchPut> puts, const std::vector<size_t>& todo,
                              absl::Time deadline) {
  initiator::LeaseManager* leases = core_->leases();
  initiator::OpEngine* engine = core_->engine();
  initiator::EntryWriter* entries = core_->entries();
  const size_t n = todo.size();
  std::vector<initiator::LeaseSpace> spaces;
  for (size_t i : todo) {
    absl::StatusOr<initiator::LeaseSpace> sp = leases->Reserve(puts[i].entry.size());
    if (!sp.ok()) {
      for (const initiator::LeaseSpace& s : spaces) leases->Finish(s, sp.status());
      for (size_t j : todo) puts[j].status = sp.status();
      return;
    }
    spaces.push_back(*sp);
  }
  absl::StatusOr<std::vector<initiator::OpSlot*>> slots = engine->AcquireSlots(n, deadline);
  if (!slots.ok()) {
    for (const initiator::LeaseSpace& sp : spaces) leases->Finish(sp, slots.status());
    for (size_t j : todo) puts[j].status = slots.status();
    return;
  }
  initiator::SlotGuard guard(engine, *slots);
  std::vector<initiator::StagedPut> staged(n);
  absl::Status st;
  for (size_t k = 0; k < n && st.ok(); ++k) {
    const BatchPut& p = puts[todo[k]];
    st = entries->StageBuilt((*slots)[k], p.entry, spaces[k],
                             [&](const wire::PutCommit& commit, char* buf) {
                               return wire::EncodeReplicaPutCommit(commit, p.tag, buf);
                             },
                             &staged[k]);
  }
  if (st.ok()) st = entries->PostStaged(absl::MakeSpan(staged), deadline);
  for (size_t k = 0; k < n; ++k) {
    absl::Status& result = puts[todo[k]].status;
    if (st.ok()) {
      absl::Status w = engine->Wait((*slots)[k], deadline);
      result = w.ok() ? (*slots)[k]->ack : w;
      engine->ReturnCredits(1);
    } else {
      result = st;
    }
    entries->Unstage(&staged[k]);
    leases->Finish(spaces[k], result);
  }
}

// Whether a failed commit left this node is not asked: the replicator
// judges the link by the status alone (RdmaReplicaLink::failed) and sends
// the write again by gRPC when the link failed, which is safe either way
// (a backup applying one seq twice applies the same write twice).
absl::Status ReplicaWriter::Delete(absl::string_view key, const wire::ReplicaCommit& tag,
                                   absl::Time deadline) {
  KV_RETURN_IF_ERROR(core_->layout().limits.CheckKey(key));
  KV_RETURN_IF_ERROR(CheckTag(tag));
  return core_->entries()->SendOnly(
      [&](uint64_t request_id, char* out) {
        return wire::EncodeReplicaDeleteCommit(request_id, key, tag, out);
      },
      deadline);
}

}  // namespace server
}  // namespace kvstore
