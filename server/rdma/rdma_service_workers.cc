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
// receive buffers do not bound what waits: the connection's credits do. A
// client commit is counted in Connection::unanswered from here until just
// before its ack is posted, whichever path it takes (started on the poller,
// or waiting or running in its lane), and one arriving with `credits`
// already unanswered fails the connection, before its messages can pile
// up. Counting the lane alone missed the commits started on the poller
// (one declined commit sends all after it to the lane). A peer's replica
// commits are bounded by their lane, at the same credits.

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
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
  bool start = false, counted = false;
  {
    absl::MutexLock lock(&workers_mu_);
    if (client_queue_ == nullptr) return false;  // stopping
    // A client commit the workers take (started here or in its lane); the
    // poller itself handles the others, without counting.
    counted = !replica && offload_commits_;
    // Only with nothing of the connection queued or running: a commit
    // started here must not overtake one waiting in the lane. The poller
    // is the only thread that queues, so an idle lane stays idle until the
    // start below is done.
    start = counted && start_commits_ && client_queue_->idle(conn->id);
  }
  if (!counted && !replica) return false;
  // Counted before it starts: a started round may end, and give the count
  // back, before StartClientCommit() returns.
  if (counted && conn->unanswered.fetch_add(1, std::memory_order_acq_rel) >= conn->credits) {
    conn->Answered();
    FailForCredits(*conn, absl::StrCat("more commits than its ", conn->credits, " credits"));
    return true;
  }
  if (start && StartClientCommit(conn, message)) return true;
  {
    // Held across Push (which only takes the queue's own lock) so that
    // StopWorkers() cannot destroy the queue underneath.
    absl::MutexLock lock(&workers_mu_);
    if (client_queue_ == nullptr) {  // stopping: the poller answers it
      if (counted) conn->Answered();
      return false;
    }
    CommitQueue* q = replica ? replica_queue_.get() : client_queue_.get();
    // The message is copied: its receive buffer is posted again as soon as
    // the poller returns.
    queued = q->Push(conn->id, conn->credits, [this, conn, counted, m = std::string(message)] {
      HandleCommit(conn, m, counted);
    });
  }
  if (!queued.ok()) {
    // Only a replica lane can be full: a client's waiting commits are
    // among its unanswered ones, already bounded above.
    if (counted) conn->Answered();
    FailForCredits(*conn, queued.message());
  }
  return true;
}

void RdmaService::FailForCredits(Connection& c, absl::string_view why) {
  if (c.dead.exchange(true)) return;
  credit_violations_->Increment();
  LOG(WARNING) << "RDMA connection " << c.id << " (" << c.owner << "): " << why << "; closing it";
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
  {
    absl::MutexLock lock(&started_mu_);
    ++started_in_flight_;
  }
  const absl::Time start = absl::Now();
  conn->Touch();
  const uint64_t request_id = h.request_id;
  auto done = [this, conn, op, request_id, start](absl::Status s) {
    conn->Answered();
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
  EndStartedCommit();
  // Declined: the lane's worker commits it, still counted.
  if (started.ok()) return false;
  conn->Answered();
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

}  // namespace server
}  // namespace kvstore
