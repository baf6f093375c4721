// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replication_stream.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"

namespace kvstore {
namespace server {

ReplicationStreamMetrics::ReplicationStreamMetrics(metrics::Registry* registry)
    : opened(registry->AddCounter("kvstore_replication_streams_opened_total",
                                  "Replication streams (one per shard and backup) this primary "
                                  "opened.")),
      broken(registry->AddCounter("kvstore_replication_streams_broken_total",
                                  "Replication streams that broke (backup gone, connection "
                                  "lost, a write not answered in time).")),
      batches(registry->AddCounter("kvstore_replication_stream_batches_total",
                                   "Batches sent on replication streams; writes_total over this "
                                   "is the mean batch size.")),
      writes(registry->AddCounter("kvstore_replication_stream_writes_total",
                                  "Writes sent on replication streams.")) {}

ReplicationStream::ReplicationStream(PeerClient* peers, const v1::ClusterNode& node,
                                     ReplicationStreamMetrics* metrics)
    : node_(node), metrics_(metrics), call_(peers->OpenReplicateStream(node)) {
  sender_ = std::thread([this] { SendLoop(); });
  receiver_ = std::thread([this] { ReceiveLoop(); });
}

ReplicationStream::~ReplicationStream() {
  {
    absl::MutexLock lock(&mu_);
    BreakLocked(absl::UnavailableError("the stream was closed"));
  }
  sender_.join();
  receiver_.join();
}

bool ReplicationStream::broken() const {
  absl::MutexLock lock(&mu_);
  return broken_;
}

void ReplicationStream::BreakLocked(const absl::Status& why) {
  if (broken_) return;
  broken_ = true;
  why_ = why;
  metrics_->broken->Increment();
  // Ends a Read or Write blocked in the other threads.
  call_->context->TryCancel();
}

void ReplicationStream::Complete(Ticket& ticket, absl::Status status) {
  absl::MutexLock lock(&ticket.mu_);
  ticket.status_ = std::move(status);
  ticket.done_ = true;
}

std::shared_ptr<ReplicationStream::Ticket> ReplicationStream::Send(const v1::ReplicateRequest& req,
                                                                   absl::Time deadline) {
  auto ticket = std::make_shared<Ticket>();
  absl::MutexLock lock(&mu_);
  if (broken_) {
    Complete(*ticket, PeerError("Replicate", node_,
                                absl::UnavailableError(absl::StrCat(
                                    "replication stream broken: ", why_.message()))));
    return ticket;
  }
  *queued_.add_writes() = req;
  queued_deadlines_.push_back(deadline);
  queued_tickets_.push_back(ticket);
  return ticket;  // the unlock wakes the sender if it waits (its condition)
}

absl::Status ReplicationStream::Wait(Ticket& ticket, absl::Time deadline) {
  {
    absl::MutexLock lock(&ticket.mu_);
    if (ticket.mu_.AwaitWithDeadline(absl::Condition(&ticket.done_), deadline)) {
      return ticket.status_;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    BreakLocked(absl::DeadlineExceededError("a write was not answered by its deadline"));
  }
  return PeerError("Replicate", node_,
                   absl::DeadlineExceededError("no answer from the backup by the deadline"));
}

void ReplicationStream::SendLoop() {
  v1::ReplicateBatch batch;
  std::vector<absl::Time> deadlines;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ReplicationStream* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return s->broken_ || !s->queued_.writes().empty();
          },
          this));
      if (broken_) {
        sender_done_ = true;
        return;
      }
      // Everything queued goes out as one batch: the group commit. The
      // swap leaves queued_ the (cleared) messages of the last batch, whose
      // strings keep their capacity for the next writes.
      batch.Swap(&queued_);
      deadlines.swap(queued_deadlines_);
      unanswered_.push_back(std::move(queued_tickets_));
      queued_tickets_.clear();
    }
    const absl::Time now = absl::Now();
    batch.clear_timeout_micros();
    for (absl::Time d : deadlines) {
      batch.add_timeout_micros(std::max<int64_t>(0, absl::ToInt64Microseconds(d - now)));
    }
    deadlines.clear();
    metrics_->batches->Increment();
    metrics_->writes->Increment(static_cast<uint64_t>(batch.writes_size()));
    if (!call_->stream->Write(batch)) {
      absl::MutexLock lock(&mu_);
      BreakLocked(absl::UnavailableError("the backup closed the stream"));
      sender_done_ = true;
      return;
    }
    batch.Clear();
  }
}

void ReplicationStream::ReceiveLoop() {
  v1::ReplicateBatchReply reply;
  while (call_->stream->Read(&reply)) {
    std::vector<std::shared_ptr<Ticket>> tickets;
    {
      absl::MutexLock lock(&mu_);
      if (unanswered_.empty()) {
        BreakLocked(absl::InternalError("the backup answered a batch never sent"));
        break;
      }
      tickets = std::move(unanswered_.front());
      unanswered_.pop_front();
    }
    std::vector<absl::Status> statuses(tickets.size());
    bool bad = false;
    for (const v1::ReplicateFailure& f : reply.failed()) {
      if (f.index() >= statuses.size()) {
        bad = true;
        continue;
      }
      absl::Status s = StatusFromBytes(f.status());
      // A refusal that says nothing would read as installed.
      if (s.ok()) s = absl::InternalError("a failure without a status");
      statuses[f.index()] = PeerError("Replicate", node_, s);
    }
    for (size_t i = 0; i < tickets.size(); ++i) Complete(*tickets[i], std::move(statuses[i]));
    if (bad) {
      absl::MutexLock lock(&mu_);
      BreakLocked(absl::InternalError("the backup named a write its batch does not have"));
      break;
    }
  }
  // The stream is over: once the sender no longer writes, Finish() gives
  // the call's status, and every write still pending fails with it.
  {
    absl::MutexLock lock(&mu_);
    BreakLocked(absl::UnavailableError("the backup ended the stream"));
    mu_.Await(absl::Condition(&sender_done_));
  }
  const absl::Status finished = FromGrpcStatus(call_->stream->Finish());
  std::deque<std::vector<std::shared_ptr<Ticket>>> unanswered;
  std::vector<std::shared_ptr<Ticket>> queued;
  absl::Status why;
  {
    absl::MutexLock lock(&mu_);
    unanswered.swap(unanswered_);
    queued.swap(queued_tickets_);
    queued_.Clear();
    queued_deadlines_.clear();
    why = why_;
  }
  // kUnavailable whatever the cause: the write may have been installed.
  const absl::Status failed = PeerError(
      "Replicate", node_,
      absl::UnavailableError(absl::StrCat(
          "replication stream broken: ", why.message(),
          finished.ok() ? "" : absl::StrCat(" (", finished.message(), ")"))));
  for (auto& batch : unanswered) {
    for (auto& t : batch) Complete(*t, failed);
  }
  for (auto& t : queued) Complete(*t, failed);
}

ReplicationStreams::ReplicationStreams(PeerClient* peers, metrics::Registry* registry)
    : peers_(peers), metrics_(registry) {}

std::shared_ptr<ReplicationStream> ReplicationStreams::Get(uint32_t shard_id,
                                                           const v1::ClusterNode& node) {
  std::shared_ptr<ReplicationStream> old;  // destroyed (joined) after the unlock
  absl::MutexLock lock(&mu_);
  std::shared_ptr<ReplicationStream>& s = streams_[std::make_pair(shard_id, node.node_id())];
  if (s == nullptr || s->broken() || s->node().incarnation() != node.incarnation() ||
      s->node().control_address() != node.control_address()) {
    old = std::move(s);
    s = std::make_shared<ReplicationStream>(peers_, node, &metrics_);
    metrics_.opened->Increment();
  }
  return s;
}

void ReplicationStreams::Retain(
    const std::function<bool(uint32_t shard_id, const std::string& node_id)>& keep) {
  std::vector<std::shared_ptr<ReplicationStream>> closed;  // joined after the unlock
  absl::MutexLock lock(&mu_);
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (keep(it->first.first, it->first.second)) {
      ++it;
      continue;
    }
    closed.push_back(std::move(it->second));
    streams_.erase(it++);
  }
}

}  // namespace server
}  // namespace kvstore
