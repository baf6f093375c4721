// Copyright 2026 The kvstore Authors.
//
// RdmaService's commits: running one commit message (a client's PUT or
// DELETE, a peer's replica write or batch) and posting its ack. The poller
// calls HandleCommit() itself in single-node mode; in cluster mode a
// worker of the connection's lane does (rdma_service_workers.cc).

#include <cstring>

#include "common/protocol/commit_wire.h"
#include "glog/logging.h"
#include "server/rdma/rdma_connection.h"
#include "server/rdma/rdma_service.h"

namespace kvstore {
namespace server {

using rdma_internal::kAckTag;

void RdmaService::HandleCommit(const std::shared_ptr<Connection>& conn, absl::string_view message,
                               bool counted) {
  Connection& c = *conn;
  // The commit's latency runs from here (its receive completion was just
  // polled) to the ack being posted: one clock pair per commit.
  const absl::Time start = absl::Now();
  c.Touch();
  auto parsed = wire::ParseCommit(message);
  if (!parsed.ok()) {
    commit_errors_->Increment();
    // Answer under the request id if the message is long enough to carry
    // one (bytes 8..15), else under 0, which clients ignore.
    uint64_t request_id = 0;
    if (message.size() >= 16) std::memcpy(&request_id, message.data() + 8, 8);
    if (counted) c.Answered();
    SendAck(c, request_id, parsed.status());
    return;
  }
  const wire::CommitRequest& h = parsed->header;
  const auto op = static_cast<wire::CommitOp>(h.op);
  uint16_t applied = 0;  // a batch's
  // The queue pair's session decides what it may commit: a replica commit
  // only from a cluster peer's, a client write only from a writer's.
  absl::Status status = CheckCommitRights(op, c.rights);
  if (!status.ok()) {
    commit_refused_rights_->Increment();
    commit_errors_->Increment();
    if (counted) c.Answered();
    SendAck(c, h.request_id, status);
    return;
  }
  switch (op) {
    case wire::CommitOp::kPut:
      // One look-up of the lease decides holder, liveness and range.
      status = leases_->CommitFrom(c.id, h.lease_id, h.offset, h.size);
      break;
    case wire::CommitOp::kDelete:
      status = store_->Delete(parsed->key);
      break;
    case wire::CommitOp::kReplicaPut:
    case wire::CommitOp::kReplicaDelete:
      status = HandleReplicaCommit(c, *parsed);
      break;
    case wire::CommitOp::kReplicaPutBatch:
      status = HandleReplicaBatch(c, *parsed, &applied);
      break;
  }
  if (counted) c.Answered();
  FinishCommit(c, op, h.request_id, status, start, applied);
}

void RdmaService::FinishCommit(Connection& c, wire::CommitOp op, uint64_t request_id,
                               const absl::Status& status, absl::Time start,
                               uint16_t batch_applied) {
  // A DELETE of an absent key is an answer, not an error.
  if (!status.ok() && status.code() != absl::StatusCode::kNotFound) commit_errors_->Increment();
  SendAck(c, request_id, status, batch_applied);
  // As rdma_commits did, only PUTs that committed count as puts (refusals
  // are commit errors); every DELETE counts. Replica commits count in the
  // installer's series (kvstore_replica_*).
  if (op == wire::CommitOp::kDelete) {
    deletes_.Record(absl::Now() - start);
  } else if (op == wire::CommitOp::kPut && status.ok()) {
    puts_.Record(absl::Now() - start);
  }
}

void RdmaService::SendAck(Connection& c, uint64_t request_id, const absl::Status& status,
                          uint16_t batch_applied) {
  if (c.dead) return;
  absl::MutexLock lock(&c.send_mu);
  // Free the ring slots of finished acks. A ring still full means the
  // client has stopped acknowledging (a client keeping to its credits
  // cannot fill it): the connection fails; the poller never waits for it.
  c.ReapSends();
  if (c.send_outstanding >= static_cast<int>(c.ack_slots)) {
    LOG(WARNING) << "RDMA connection " << c.id << " (" << c.owner << "): " << c.send_outstanding
                 << " acks unacknowledged; closing it";
    c.dead = true;
  }
  if (c.dead) return;
  char* buf = c.ack_mem.data() + size_t{c.ack_next} * wire::kAckBytes;
  const size_t len = wire::EncodeAck(request_id, status, buf, batch_applied);
  rdma::Sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(len), c.ack_mr->lkey()};
  absl::Status s = c.qp->PostSend(absl::MakeConstSpan(&sge, 1), kAckTag | c.ack_next,
                                  /*signaled=*/true, /*inline_data=*/len <= 64);
  if (!s.ok()) {
    LOG(WARNING) << "RDMA connection " << c.id << ": " << s;
    c.dead = true;
    return;
  }
  c.send_outstanding++;
  c.ack_next = (c.ack_next + 1) % c.ack_slots;
}

absl::Status RdmaService::HandleReplicaCommit(Connection& c, const wire::ParsedCommit& parsed) {
  ReplicaCommitSink* sink = replica_sink_.load(std::memory_order_acquire);
  if (sink == nullptr) {
    return absl::FailedPreconditionError("replica commit to a server that is not in a cluster");
  }
  ReplicaCommit commit;
  commit.shard_id = parsed.tag.shard_id;
  commit.shard_epoch = parsed.tag.shard_epoch;
  commit.seq = parsed.tag.seq;
  commit.primary_node_id = parsed.primary_node_id;
  commit.primary_incarnation = parsed.tag.primary_incarnation;
  if (static_cast<wire::CommitOp>(parsed.header.op) == wire::CommitOp::kReplicaDelete) {
    commit.is_delete = true;
    commit.key = parsed.key;
    return sink->ApplyReplicaCommit(commit, [] { return absl::OkStatus(); });
  }
  const wire::CommitRequest& h = parsed.header;
  return InstallReplicaPut(c, *sink, commit, h.lease_id, h.offset, h.size);
}

absl::Status RdmaService::InstallReplicaPut(Connection& c, ReplicaCommitSink& sink,
                                            ReplicaCommit& commit, uint64_t lease_id,
                                            uint64_t offset, uint64_t size) {
  // The lease table checks holder, liveness and that the range lies in the
  // chunk before the sink sees the entry's bytes; the chunk cannot be
  // revoked until this returns.
  return leases_->CommitFromWith(c.id, lease_id, offset, size, [&](uint64_t at, uint64_t bytes) {
    commit.entry = store_->ArenaBytes(at, bytes);
    return sink.ApplyReplicaCommit(commit, [&] { return store_->CommitReplica(at, bytes); });
  });
}

// Each write as HandleReplicaCommit() would take it alone, in the batch's
// order, stopping at the first that is not installed: its status is the
// ack's, and the primary sends the ones after it again one by one (so each
// gets an answer of its own; a batch's keys are distinct, so which of them
// went first does not matter to the data, only to the seq order, which
// stopping keeps).
absl::Status RdmaService::HandleReplicaBatch(Connection& c, const wire::ParsedCommit& parsed,
                                             uint16_t* applied) {
  *applied = 0;
  ReplicaCommitSink* sink = replica_sink_.load(std::memory_order_acquire);
  if (sink == nullptr) {
    return absl::FailedPreconditionError("replica commit to a server that is not in a cluster");
  }
  replica_batches_->Increment();
  replica_batch_writes_->Increment(parsed.batch_count);
  for (size_t i = 0; i < parsed.batch_count; ++i) {
    const wire::ReplicaBatchWrite w = wire::BatchWrite(parsed, i);
    ReplicaCommit commit;
    commit.shard_id = w.shard_id;
    commit.shard_epoch = w.shard_epoch;
    commit.seq = w.seq;
    commit.primary_node_id = parsed.primary_node_id;
    commit.primary_incarnation = parsed.tag.primary_incarnation;
    absl::Status s = InstallReplicaPut(c, *sink, commit, w.lease_id, w.offset, w.size);
    if (!s.ok()) return s;
    ++*applied;
  }
  return absl::OkStatus();
}

}  // namespace server
}  // namespace kvstore
