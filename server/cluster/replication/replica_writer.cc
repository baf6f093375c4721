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
#include "common/rdma/initiator/connection.h"
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
  // One batch commit names one primary: every write of a batch comes from
  // this node, but a caller mixing tags gets the per-write commits.
  size_t per_commit = 0;
  if (todo.size() > 1) {
    const wire::ReplicaCommit& first = puts[todo[0]].tag;
    per_commit = batch_commits(first.primary_node_id.size());
    for (size_t i : todo) {
      if (puts[i].tag.primary_node_id != first.primary_node_id ||
          puts[i].tag.primary_incarnation != first.primary_incarnation) {
        per_commit = 0;
      }
    }
  }
  std::vector<size_t> redo;
  if (per_commit > 1) {
    for (size_t begin = 0; begin < todo.size(); begin += per_commit) {
      const size_t n = std::min(per_commit, todo.size() - begin);
      PostBatchCommit(puts, std::vector<size_t>(todo.begin() + begin, todo.begin() + begin + n),
                      deadline, &redo);
    }
  } else {
    // More commits than credits could never all be posted at once.
    const size_t credits = std::max<size_t>(1, core_->engine()->credits());
    for (size_t begin = 0; begin < todo.size(); begin += credits) {
      const size_t n = std::min(credits, todo.size() - begin);
      PostBatch(puts, std::vector<size_t>(todo.begin() + begin, todo.begin() + begin + n),
                deadline);
    }
  }
  for (size_t i : todo) {
    if (puts[i].status.code() != absl::StatusCode::kAborted) continue;
    core_->entries()->CountLeaseAbort();  // that lease expired: redo this one alone
    redo.push_back(i);
  }
  std::sort(redo.begin(), redo.end());  // in the batch's (the seq) order
  for (size_t i : redo) puts[i].status = Put(puts[i].entry, puts[i].tag, deadline);
}

size_t ReplicaWriter::batch_commits(size_t node_len) const {
  if (!core_->connection().replica_batch_commits()) return 0;
  // What both ends' commit buffers hold: the backup's receive buffers
  // (max_commit_bytes) and this side's slot commit area, which is sized
  // for the backup's key limit.
  const size_t bytes = std::min<size_t>(core_->connection().max_commit_bytes(),
                                        wire::CommitBytes(core_->layout().limits.max_key_bytes));
  // One credit per batch, but every write a WRITE in the send queue: a
  // batch of up to the credits fits it as the per-write pairs do.
  return std::min<size_t>(wire::ReplicaBatchCapacity(bytes, node_len),
                          std::max<uint32_t>(1, core_->engine()->credits()));
}

// Lease space for each write of `todo`, then a slot each. On failure what
// was taken is given back and every write of `todo` gets the error.
absl::StatusOr<std::vector<initiator::OpSlot*>> ReplicaWriter::Reserve(
    absl::Span<BatchPut> puts, const std::vector<size_t>& todo, absl::Time deadline,
    std::vector<initiator::LeaseSpace>* spaces) {
  initiator::LeaseManager* leases = core_->leases();
  absl::Status failed;
  for (size_t i : todo) {
    absl::StatusOr<initiator::LeaseSpace> sp = leases->Reserve(puts[i].entry.size());
    if (!sp.ok()) {
      failed = sp.status();
      break;
    }
    spaces->push_back(*sp);
  }
  if (failed.ok()) {
    absl::StatusOr<std::vector<initiator::OpSlot*>> slots =
        core_->engine()->AcquireSlots(todo.size(), deadline);
    if (slots.ok()) return slots;
    failed = slots.status();
  }
  for (const initiator::LeaseSpace& sp : *spaces) leases->Finish(sp, failed);
  for (size_t j : todo) puts[j].status = failed;
  return failed;
}

void ReplicaWriter::PostBatch(absl::Span<BatchPut> puts, const std::vector<size_t>& todo,
                              absl::Time deadline) {
  initiator::LeaseManager* leases = core_->leases();
  initiator::OpEngine* engine = core_->engine();
  initiator::EntryWriter* entries = core_->entries();
  const size_t n = todo.size();
  std::vector<initiator::LeaseSpace> spaces;
  absl::StatusOr<std::vector<initiator::OpSlot*>> slots = Reserve(puts, todo, deadline, &spaces);
  if (!slots.ok()) return;
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

// The per-write path's steps, but the WRITEs go without their SENDs and the
// last is followed by one kReplicaPutBatch naming them all, encoded in the
// last slot's commit buffer under that slot's request id, so its ack
// completes that slot. The backup installs in order and stops at the first
// refusal; its ack says how many went in.
void ReplicaWriter::PostBatchCommit(absl::Span<BatchPut> puts, const std::vector<size_t>& todo,
                                    absl::Time deadline, std::vector<size_t>* redo) {
  initiator::LeaseManager* leases = core_->leases();
  initiator::OpEngine* engine = core_->engine();
  initiator::EntryWriter* entries = core_->entries();
  const size_t n = todo.size();
  std::vector<initiator::LeaseSpace> spaces;
  absl::StatusOr<std::vector<initiator::OpSlot*>> slots = Reserve(puts, todo, deadline, &spaces);
  if (!slots.ok()) return;
  initiator::SlotGuard guard(engine, *slots);
  std::vector<initiator::StagedPut> staged(n);
  std::vector<wire::ReplicaBatchWrite> records(n);
  uint64_t request_id = 0;  // the last slot's
  absl::Status st;
  for (size_t k = 0; k < n && st.ok(); ++k) {
    const BatchPut& p = puts[todo[k]];
    st = entries->StageBuilt((*slots)[k], p.entry, spaces[k],
                             [&](const wire::PutCommit& commit, char*) {
                               records[k] = {
                                   commit.lease_id,   commit.offset, commit.size, p.tag.shard_id, 0,
                                   p.tag.shard_epoch, p.tag.seq};
                               request_id = commit.request_id;
                               return size_t{0};  // no commit of its own
                             },
                             &staged[k]);
  }
  initiator::OpSlot* last = (*slots)[n - 1];
  const wire::ReplicaCommit& tag = puts[todo[0]].tag;
  bool posted = false;
  if (st.ok()) st = engine->AcquireCredit(deadline);
  if (st.ok()) {
    const size_t len = wire::EncodeReplicaPutBatch(request_id, records, tag.primary_node_id,
                                                   tag.primary_incarnation, last->commit);
    const rdma::Sge send{reinterpret_cast<uint64_t>(last->commit), static_cast<uint32_t>(len),
                         last->lkey};
    std::vector<rdma::QueuePair::WriteSendOp> ops(n);
    for (size_t k = 0; k < n; ++k) {
      initiator::StagedPut& p = staged[k];
      ops[k].write.local = absl::MakeConstSpan(p.write_sges, p.nwrite);
      ops[k].write.remote_addr = p.remote_addr;
      ops[k].write.rkey = p.rkey;
      ops[k].write.wr_id = initiator::kKindWrite | p.slot->index;
      ops[k].write.signaled = false;
      ops[k].post_send = k + 1 == n;
    }
    ops[n - 1].send = absl::MakeConstSpan(&send, 1);
    ops[n - 1].send_wr_id = initiator::kKindSend | last->index;
    ops[n - 1].send_signaled = true;
    st = engine->PostWriteSends(ops);
    if (st.ok()) {
      posted = true;
    } else {
      engine->ReturnCredits(1);  // nothing posted: no ack will come
    }
  }
  size_t applied = 0;
  absl::Status refused;  // the ack's status: the refusal of write `applied`
  if (posted) {
    st = engine->Wait(last, deadline);
    engine->ReturnCredits(1);
    if (st.ok()) {
      refused = last->ack;
      // An OK ack for fewer than all: the rest were not installed (sent
      // again below). A refusal names the write after the installed ones,
      // so it cannot count them all.
      applied = std::min<size_t>(last->ack_batch_applied, refused.ok() ? n : n - 1);
    }
  }
  for (size_t k = 0; k < n; ++k) {
    absl::Status& result = puts[todo[k]].status;
    if (!st.ok()) {
      result = st;
    } else if (k < applied) {
      result = absl::OkStatus();
    } else if (k == applied && !refused.ok()) {
      result = refused;
    } else {
      redo->push_back(todo[k]);
      result = absl::CancelledError("not installed by the batch commit; sent again");
    }
    entries->Unstage(&staged[k]);
    leases->Finish(spaces[k], result);
  }
}

void ReplicaWriter::DeleteBatch(absl::Span<BatchDelete> deletes, absl::Time deadline) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < deletes.size(); ++i) {
    deletes[i].status = core_->layout().limits.CheckKey(deletes[i].key);
    if (deletes[i].status.ok()) deletes[i].status = CheckTag(deletes[i].tag);
    if (deletes[i].status.ok()) todo.push_back(i);
  }
  const size_t credits = std::max<size_t>(1, core_->engine()->credits());
  for (size_t begin = 0; begin < todo.size(); begin += credits) {
    const size_t n = std::min(credits, todo.size() - begin);
    PostDeletes(deletes, std::vector<size_t>(todo.begin() + begin, todo.begin() + begin + n),
                deadline);
  }
}

// A commit SEND per delete, each posted without waiting for the one before;
// then the acks. A failed post stops the posting: the deletes already
// posted are still awaited, the rest get the post's error.
void ReplicaWriter::PostDeletes(absl::Span<BatchDelete> deletes, const std::vector<size_t>& todo,
                                absl::Time deadline) {
  initiator::OpEngine* engine = core_->engine();
  const size_t n = todo.size();
  absl::StatusOr<std::vector<initiator::OpSlot*>> slots = engine->AcquireSlots(n, deadline);
  absl::Status st = slots.status();
  if (st.ok()) st = engine->AcquireCredit(deadline, static_cast<int>(n));
  if (!st.ok()) {
    if (slots.ok()) engine->ReleaseSlots(*slots);
    for (size_t i : todo) deletes[i].status = st;
    return;
  }
  initiator::SlotGuard guard(engine, *slots);
  size_t posted = 0;
  for (; posted < n && st.ok(); ++posted) {
    initiator::OpSlot* s = (*slots)[posted];
    const BatchDelete& d = deletes[todo[posted]];
    const size_t len =
        wire::EncodeReplicaDeleteCommit(engine->NewRequest(s), d.key, d.tag, s->commit);
    st = engine->PostSend(
        rdma::Sge{reinterpret_cast<uint64_t>(s->commit), static_cast<uint32_t>(len), s->lkey}, s);
    if (!st.ok()) break;
  }
  // Nothing will ack what was not posted.
  engine->ReturnCredits(static_cast<int>(n - posted));
  for (size_t k = 0; k < n; ++k) {
    absl::Status& result = deletes[todo[k]].status;
    if (k >= posted) {
      result = st;
      continue;
    }
    const absl::Status w = engine->Wait((*slots)[k], deadline);
    result = w.ok() ? (*slots)[k]->ack : w;
    engine->ReturnCredits(1);
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
