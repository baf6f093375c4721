// Copyright 2026 The kvstore Authors.
//
// RdmaService's commit workers (cluster mode; architecture §19.3.1).
//
// In single-node mode the poller handles each commit itself: publishing is
// quick. In cluster mode a client's commit runs the replicator, which waits
// for the backups' acks, and with replication over RDMA those acks come
// from the backups' RdmaServices. Were every node's poller to wait like
// that, nodes replicating to each other (A to B, B to C, C to A: the usual
// R=2 ring) would each hold the poller the next one needs, until the
// replication timeout dropped healthy backups. So the poller only receives:
// client commits go to one CommitQueue, replica commits to another, which
// only installs and never waits for another node. Both have a lane per
// connection (server/rdma/commit_queue.h).
//
// The poller reposts a receive as soon as its message is queued, so the
// receive buffers do not bound the queues: the lanes do, at the
// connection's credits. A client that keeps to its credits never has more
// commits waiting (each one waits for its ack); one that does not is
// failed here, before its messages can pile up.

#include <memory>
#include <string>
#include <utility>

#include "glog/logging.h"
#include "server/rdma/rdma_connection.h"
#include "server/rdma/rdma_service.h"

namespace kvstore {
namespace server {

void RdmaService::set_replica_sink(ReplicaCommitSink* sink, bool offload_commits,
                                   bool start_commits) {
  replica_sink_.store(sink, std::memory_order_release);
  absl::MutexLock lock(&workers_mu_);
  offload_commits_ = offload_commits;
  start_commits_ = offload_commits && start_commits;
  if (sink == nullptr || client_queue_ != nullptr) return;
  client_queue_ = std::make_unique<CommitQueue>("client", kCommitWorkers);
  replica_queue_ = std::make_unique<CommitQueue>("replica", kReplicaWorkers);
  has_workers_.store(true, std::memory_order_release);
}

bool RdmaService::Dispatch(const std::shared_ptr<Connection>& conn, absl::string_view message) {
  if (!has_workers_.load(std::memory_order_acquire)) return false;
  // Its answer could not be sent; the poller tears it down.
  if (conn->dead) return true;
  // Byte 4 is the op (wire::CommitRequest); anything unparsable goes to the
  // client queue, whose worker answers it as the poller would.
  const uint8_t op = message.size() > 4 ? static_cast<uint8_t>(message[4]) : 0;
  const bool replica = op == static_cast<uint8_t>(wire::CommitOp::kReplicaPut) ||
                       op == static_cast<uint8_t>(wire::CommitOp::kReplicaDelete) ||
                       op == static_cast<uint8_t>(wire::CommitOp::kReplicaPutBatch);
  absl::Status queued;
  bool start = false;
  {
    absl::MutexLock lock(&workers_mu_);
    if (client_queue_ == nullptr) return false;  // stopping
    // Only with nothing of the connection queued or running: a commit
    // started here must not overtake one waiting in the lane. The poller
    // is the only thread that queues, so an idle lane stays idle until the
    // start below is done.
    start = !replica && start_commits_ && client_queue_->idle(conn->id);
  }
  if (start && StartClientCommit(conn, message)) return true;
  {
    // Held across Push (which only takes the queue's own lock) so that
    // StopWorkers() cannot destroy the queue underneath.
    absl::MutexLock lock(&workers_mu_);
    if (client_queue_ == nullptr) return false;  // stopping
    if (!replica && !offload_commits_) return false;
    CommitQueue* q = replica ? replica_queue_.get() : client_queue_.get();
    // The message is copied: its receive buffer is posted again as soon as
    // the poller returns.
    queued = q->Push(conn->id, conn->credits,
                     [this, conn, m = std::string(message)] { HandleCommit(conn, m); });
  }
  if (!queued.ok() && !conn->dead.exchange(true)) {
    credit_violations_->Increment();
    LOG(WARNING) << "RDMA connection " << conn->id << " (" << conn->owner << "): " << queued
                 << "; closing it";
  }
  return true;
}

// The started path (set_replica_sink). The checks HandleCommit() makes,
// then LeaseTable::StartCommitFrom() for a PUT (the entry is checked and
// copied, its key locked) or KvStore::StartDelete() for a DELETE, and the
// write's round is started here on the poller; the round's end (on a
// thread of the replicator's) acks it. A commit they decline goes to the
// lane as before, where a worker parses it again: the price of a decline,
// which the common case does not pay.
bool RdmaService::StartClientCommit(const std::shared_ptr<Connection>& conn,
                                    absl::string_view message) {
  absl::StatusOr<wire::ParsedCommit> parsed = wire::ParseCommit(message);
  if (!parsed.ok()) return false;  // the worker answers it, as HandleCommit() does
  const auto op = static_cast<wire::CommitOp>(parsed->header.op);
  if ((op != wire::CommitOp::kPut && op != wire::CommitOp::kDelete) ||
      !CheckCommitRights(op, conn->rights).ok()) {
    return false;
  }
  const wire::CommitRequest& h = parsed->header;
  // A client keeping to its credits has at most `credits` commits without
  // an ack, this one included; an ack goes out only after its count is
  // given back (below), so more started than that is a violation.
  if (conn->started.fetch_add(1, std::memory_order_acq_rel) >= conn->credits) {
    conn->started.fetch_sub(1, std::memory_order_acq_rel);
    if (!conn->dead.exchange(true)) {
      credit_violations_->Increment();
      LOG(WARNING) << "RDMA connection " << conn->id << " (" << conn->owner
                   << "): more commits than its " << conn->credits << " credits; closing it";
    }
    return true;
  }
  {
    absl::MutexLock lock(&started_mu_);
    ++started_in_flight_;
  }
  const absl::Time start = absl::Now();
  conn->Touch();
  const uint64_t request_id = h.request_id;
  auto done = [this, conn, op, request_id, start](absl::Status s) {
    conn->started.fetch_sub(1, std::memory_order_acq_rel);
    FinishCommit(*conn, op, request_id, s, start);
    EndStartedCommit();
  };
  // The DELETE's key is a view into the receive buffer: StartDelete copies it.
  absl::StatusOr<bool> started =
      op == wire::CommitOp::kPut
          ? leases_->StartCommitFrom(conn->id, h.lease_id, h.offset, h.size, std::move(done))
          : absl::StatusOr<bool>(store_->StartDelete(parsed->key, std::move(done)));
  if (started.ok() && *started) {
    commits_started_->Increment();
    return true;
  }
  conn->started.fetch_sub(1, std::memory_order_acq_rel);
  EndStartedCommit();
  if (started.ok()) return false;  // declined: the lane's worker commits it
  FinishCommit(*conn, op, request_id, started.status(), start);
  return true;
}

void RdmaService::EndStartedCommit() {
  absl::MutexLock lock(&started_mu_);
  --started_in_flight_;
}

// Forgets a torn-down connection's waiting commits (Teardown()).
void RdmaService::DropQueuedCommits(uint64_t connection_id) {
  absl::MutexLock lock(&workers_mu_);
  if (client_queue_ == nullptr) return;
  client_queue_->Forget(connection_id);
  replica_queue_->Forget(connection_id);
}

// After the poller stopped: nothing is dispatched any more. Queued commits
// are dropped unanswered (the server is going away; their senders see the
// connection fail); running ones finish.
void RdmaService::StopWorkers() {
  std::unique_ptr<CommitQueue> client, replica;
  {
    absl::MutexLock lock(&workers_mu_);
    client.swap(client_queue_);
    replica.swap(replica_queue_);
    has_workers_.store(false, std::memory_order_release);
  }
  if (client != nullptr) client->Stop();
  if (replica != nullptr) replica->Stop();
  // Started commits end with their rounds (answered, or failed at the
  // replication deadline); their acks use this service.
  absl::MutexLock lock(&started_mu_);
  started_mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &started_in_flight_));
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
