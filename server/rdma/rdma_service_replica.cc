// Copyright 2026 The kvstore Authors.
//
// RdmaService's replica commits (architecture §19.3.1): a primary's RDMA
// link WRITEs an entry into its lease here and SENDs a kReplicaPut /
// kReplicaDelete. They are handled on the replica thread, not the poller,
// so a poller blocked in its own replication round (a client's commit on a
// primary) never keeps another primary waiting: with A replicating to B and
// B to A, each poller would otherwise wait for the other's.

#include <utility>

#include "glog/logging.h"
#include "server/rdma/rdma_connection.h"
#include "server/rdma/rdma_service.h"

namespace kvstore {
namespace server {

void RdmaService::set_replica_sink(ReplicaCommitSink* sink) {
  replica_sink_.store(sink, std::memory_order_release);
  absl::MutexLock lock(&replica_mu_);
  if (sink != nullptr && !replica_thread_.joinable() && !replica_stop_) {
    replica_thread_ = std::thread([this] { ReplicaLoop(); });
  }
}

// The message is copied: its receive buffer is posted again as soon as the
// poller returns. The queue is bounded by the senders' commit credits (one
// receive each, and the credit returns only with the ack).
void RdmaService::EnqueueReplicaCommit(const std::shared_ptr<Connection>& conn,
                                       absl::string_view message) {
  absl::MutexLock lock(&replica_mu_);
  replica_queue_.push_back(ReplicaJob{conn, std::string(message)});
}

void RdmaService::ReplicaLoop() {
  for (;;) {
    ReplicaJob job;
    {
      absl::MutexLock lock(&replica_mu_);
      replica_mu_.Await(absl::Condition(
          +[](RdmaService* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->replica_mu_) {
            return self->replica_stop_ || !self->replica_queue_.empty();
          },
          this));
      if (replica_stop_) return;
      job = std::move(replica_queue_.front());
      replica_queue_.pop_front();
    }
    // Parsed once more here: the poller parsed it only to pick the queue.
    auto parsed = wire::ParseCommit(job.message);
    absl::Status status = parsed.ok() ? HandleReplicaCommit(*job.conn, *parsed) : parsed.status();
    if (!status.ok()) commit_errors_->Increment();
    SendAck(*job.conn, parsed.ok() ? parsed->header.request_id : 0, status);
  }
}

void RdmaService::StopReplicaThread() {
  {
    absl::MutexLock lock(&replica_mu_);
    replica_stop_ = true;
    replica_queue_.clear();
  }
  if (replica_thread_.joinable()) replica_thread_.join();
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
  // The lease table checks holder, liveness and that the range lies in the
  // chunk before the sink sees the entry's bytes; the chunk cannot be
  // revoked until this returns.
  const wire::CommitRequest& h = parsed.header;
  return leases_->CommitFromWith(c.id, h.lease_id, h.offset, h.size,
                                 [&](uint64_t offset, uint64_t size) {
                                   commit.entry = store_->ArenaBytes(offset, size);
                                   return sink->ApplyReplicaCommit(
                                       commit, [&] { return store_->CommitReplica(offset, size); });
                                 });
}

}  // namespace server
}  // namespace kvstore
