// Copyright 2026 The kvstore Authors.
//
// RdmaService's worker threads (cluster mode; architecture §19.3.1).
//
// In single-node mode the poller handles each commit itself: publishing is
// quick. In cluster mode a client's commit runs the replicator, which waits
// for the backups' acks, and with replication over RDMA those acks come
// from the backups' RdmaServices. Were every node's poller to wait like
// that, nodes replicating to each other (A to B, B to C, C to A: the usual
// R=2 ring) would each hold the poller the next one needs, until the
// replication timeout dropped healthy backups. So the poller only receives:
// client commits go to kCommitWorkers threads, chosen by connection (a
// connection's commits keep their order), and replica commits to one more
// thread, which only installs and never waits for another node.

#include <memory>
#include <string>
#include <utility>

#include "glog/logging.h"
#include "server/rdma/rdma_connection.h"
#include "server/rdma/rdma_service.h"

namespace kvstore {
namespace server {

void RdmaService::set_replica_sink(ReplicaCommitSink* sink, bool offload_commits) {
  replica_sink_.store(sink, std::memory_order_release);
  absl::MutexLock lock(&workers_mu_);
  offload_commits_ = offload_commits;
  if (sink == nullptr || !workers_.empty()) return;
  for (int i = 0; i <= kCommitWorkers; ++i) {
    workers_.push_back(std::make_unique<Worker>());
    Worker* w = workers_.back().get();
    w->thread = std::thread([this, w] { WorkerLoop(w); });
  }
  has_workers_.store(true, std::memory_order_release);
}

// The message is copied: its receive buffer is posted again as soon as the
// poller returns. Each queue is bounded by the senders' commit credits (one
// receive each; a credit returns only with its ack).
bool RdmaService::Dispatch(const std::shared_ptr<Connection>& conn, absl::string_view message) {
  if (!has_workers_.load(std::memory_order_acquire)) return false;
  // Byte 4 is the op (wire::CommitRequest); anything unparsable goes to a
  // client worker, which answers it as the poller would.
  const bool replica =
      message.size() > 4 &&
      (static_cast<uint8_t>(message[4]) == static_cast<uint8_t>(wire::CommitOp::kReplicaPut) ||
       static_cast<uint8_t>(message[4]) == static_cast<uint8_t>(wire::CommitOp::kReplicaDelete));
  Worker* w;
  {
    absl::MutexLock lock(&workers_mu_);
    if (workers_.empty()) return false;  // stopping
    if (!replica && !offload_commits_) return false;
    w = replica ? workers_[kCommitWorkers].get() : workers_[conn->id % kCommitWorkers].get();
  }
  absl::MutexLock lock(&w->mu);
  w->queue.push_back(Worker::Job{conn, std::string(message)});
  return true;
}

void RdmaService::WorkerLoop(Worker* w) {
  for (;;) {
    Worker::Job job;
    {
      absl::MutexLock lock(&w->mu);
      w->mu.Await(absl::Condition(
          +[](Worker* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu) {
            return self->stop || !self->queue.empty();
          },
          w));
      if (w->stop) return;
      job = std::move(w->queue.front());
      w->queue.pop_front();
    }
    HandleCommit(job.conn, job.message);
  }
}

// After the poller stopped: nothing is dispatched any more. Queued commits
// are dropped unanswered (the server is going away; their senders see the
// connection fail).
void RdmaService::StopWorkers() {
  std::vector<std::unique_ptr<Worker>> workers;
  {
    absl::MutexLock lock(&workers_mu_);
    workers.swap(workers_);
    has_workers_.store(false, std::memory_order_release);
  }
  for (auto& w : workers) {
    absl::MutexLock lock(&w->mu);
    w->stop = true;
    w->queue.clear();
  }
  for (auto& w : workers) w->thread.join();
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
