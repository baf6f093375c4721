// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replication_stream.h"

#include <algorithm>
#include <utility>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "glog/logging.h"
#include "server/cluster/replication/socket_replication_stream.h"
#include "server/net/batch_scope.h"
#include "server/storage/batch_prefetch.h"

namespace kvstore {
namespace server {

ReplicationStreamMetrics::ReplicationStreamMetrics(metrics::Registry* registry)
    : opened(registry->AddCounter("kvstore_replication_streams_opened_total",
                                  "Replication streams (one per shard and backup) this primary "
                                  "opened.")),
      broken(registry->AddCounter("kvstore_replication_streams_broken_total",
                                  "Replication streams that ended: backup gone, connection "
                                  "lost, a write not answered in time, or closed.")),
      batches(registry->AddCounter("kvstore_replication_stream_batches_total",
                                   "Batches sent on replication streams; writes_total over this "
                                   "is the mean batch size.")),
      writes(registry->AddCounter("kvstore_replication_stream_writes_total",
                                  "Writes sent on replication streams.")) {}

namespace {
// The peer socket frame's length prefix (peer_socket.h: 4 bytes, little
// endian), filled in when the queue is taken.
constexpr size_t kFramePrefix = 4;
}  // namespace

ReplicationStream::ReplicationStream(const v1::ClusterNode& node, ReplicationStreamMetrics* metrics,
                                     bool ready, const KvStore* store, BatchForm form)
    : node_(node), metrics_(metrics), store_(store), form_(form), ready_(ready) {
  queued_frame_.assign(kFramePrefix, '\0');
}

void ReplicationStream::StartBatch(const v1::ReplicateBatch*) {
  LOG(FATAL) << "a frame stream was handed a message";
}

void ReplicationStream::StartFrame(const std::string*) {
  LOG(FATAL) << "a message stream was handed a frame";
}

void ReplicationStream::StartTaken() {
  // writing_ and writing_frame_ are the transport's until WriteDone(): no
  // lock is needed to read them (nobody else touches them meanwhile).
  if (form_ == BatchForm::kFrame) {
    StartFrame(&writing_frame_);
  } else {
    StartBatch(&writing_);
  }
}

GrpcReplicationStream::GrpcReplicationStream(PeerClient* peers, const v1::ClusterNode& node,
                                             ReplicationStreamMetrics* metrics,
                                             const KvStore* store)
    : ReplicationStream(node, metrics, /*ready=*/true, store) {
  stub_ = peers->BindReplicateStream(node, &context_, this);
  // Writes are started from writers' threads, outside any reaction: the
  // hold keeps the call from finishing (OnDone) until the destructor, when
  // no writer can start one any more.
  AddHold();
  StartRead(&reply_);
  StartCall();
}

GrpcReplicationStream::~GrpcReplicationStream() {
  Break(absl::UnavailableError("the stream was closed"));
  RemoveHold();
  done_.WaitForNotification();
}

bool ReplicationStream::broken() const { return broken_seen_.load(std::memory_order_acquire); }

bool ReplicationStream::MarkBrokenLocked(const absl::Status& why) {
  if (broken_) return false;
  broken_ = true;
  broken_seen_.store(true, std::memory_order_release);
  why_ = why;
  metrics_->broken->Increment();
  return true;
}

void ReplicationStream::Break(const absl::Status& why) {
  std::deque<std::vector<std::shared_ptr<Ticket>>> unanswered;
  std::vector<std::shared_ptr<Ticket>> queued;
  bool cancel;
  {
    absl::MutexLock lock(&mu_);
    cancel = MarkBrokenLocked(why);
    unanswered.swap(unanswered_);
    unanswered_deadline_.clear();
    queued.swap(queued_tickets_);
    queued_.Clear();
    queued_frame_.resize(kFramePrefix);
    queued_deadlines_.clear();
  }
  // Failed at once, not when the call ends: kUnavailable whatever the
  // cause, as the write may have been installed. A reply that still comes
  // for them is ignored.
  const absl::Status failed =
      PeerError("Replicate", node_,
                absl::UnavailableError(absl::StrCat("replication stream broken: ", why.message())));
  for (auto& batch : unanswered) {
    for (auto& t : batch) Complete(*t, failed);
  }
  for (auto& t : queued) Complete(*t, failed);
  // Ends the read and any write in flight (not under mu_: the transport
  // may report on this thread).
  if (cancel) Cancel();
}

absl::Time ReplicationStream::OldestPendingDeadline() const {
  absl::MutexLock lock(&mu_);
  absl::Time oldest = absl::InfiniteFuture();
  for (absl::Time d : unanswered_deadline_) oldest = std::min(oldest, d);
  for (absl::Time d : queued_deadlines_) oldest = std::min(oldest, d);
  return oldest;
}

bool ReplicationStream::Ticket::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

absl::Status ReplicationStream::Ticket::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void ReplicationStream::Complete(Ticket& ticket, absl::Status status) {
  {
    absl::MutexLock lock(&ticket.mu_);
    if (ticket.done_) return;  // answered once only
    ticket.status_ = std::move(status);
    ticket.done_ = true;
  }
  // Moved out and dropped after it runs: a callback may hold what holds
  // the ticket (Replicator's round), which must not keep itself alive.
  std::function<void()> then = std::move(ticket.then_);
  if (then) then();
}

void ReplicationStream::TakeQueueLocked() {
  // Everything queued goes out as one batch: the group commit. The swap
  // leaves queued_ the cleared messages of the last batch, whose strings
  // keep their capacity for the next writes.
  const absl::Time now = absl::Now();
  absl::Time earliest = absl::InfiniteFuture();
  timeouts_.clear();
  for (absl::Time d : queued_deadlines_) {
    timeouts_.push_back(std::max<int64_t>(0, absl::ToInt64Microseconds(d - now)));
    earliest = std::min(earliest, d);
  }
  if (form_ == BatchForm::kFrame) {
    AppendTimeouts(timeouts_, &queued_frame_);
    absl::little_endian::Store32(queued_frame_.data(),
                                 static_cast<uint32_t>(queued_frame_.size() - kFramePrefix));
    // The swap leaves queued_frame_ the last frame's buffer, whose room the
    // next writes reuse.
    writing_frame_.swap(queued_frame_);
    queued_frame_.resize(kFramePrefix);
  } else {
    writing_.Clear();
    writing_.Swap(&queued_);
    for (int64_t t : timeouts_) writing_.add_timeout_micros(t);
  }
  const size_t writes = queued_tickets_.size();
  unanswered_deadline_.push_back(earliest);
  queued_deadlines_.clear();
  unanswered_.push_back(std::move(queued_tickets_));
  queued_tickets_.clear();
  writing_now_ = true;
  metrics_->batches->Increment();
  metrics_->writes->Increment(static_cast<uint64_t>(writes));
}

std::shared_ptr<ReplicationStream::Ticket> ReplicationStream::Send(const v1::ReplicateRequest& req,
                                                                   absl::Time deadline,
                                                                   std::function<void()> then) {
  return Queue(ViewOf(req), deadline, std::move(then));
}

std::shared_ptr<ReplicationStream::Ticket> ReplicationStream::Queue(
    const ReplicateWrite& write, absl::Time deadline, std::function<void()> then,
    const layout::KeyHash* hash_hint) {
  auto ticket = std::make_shared<Ticket>();
  ticket->then_ = std::move(then);
  if (hash_hint != nullptr) {
    ticket->hash_hint_ = *hash_hint;
    ticket->has_hash_hint_ = true;
  }
  {
    absl::ReleasableMutexLock lock(&mu_);
    if (broken_) {
      absl::Status failed = PeerError(
          "Replicate", node_,
          absl::UnavailableError(absl::StrCat("replication stream broken: ", why_.message())));
      lock.Release();  // `then` runs with no lock of ours held
      Complete(*ticket, std::move(failed));
      return ticket;
    }
    if (form_ == BatchForm::kFrame) {
      AppendReplicateWrite(write, &queued_frame_);
    } else {
      CopyInto(write, queued_.add_writes());
    }
    queued_deadlines_.push_back(deadline);
    queued_tickets_.push_back(ticket);
    // A batch is on its way: this one goes with the next (see CanSendLocked).
    // Or a scope already holds the start back: this one goes with it.
    if (start_deferred_ || broken_ || !CanSendLocked()) return ticket;
    if (net::BatchScope::Active()) {
      // Free, but the caller is reading a pipeline whose next writes will
      // queue here too: start once, at the end of its read.
      std::weak_ptr<ReplicationStream> self = weak_from_this();
      if (!self.expired()) {
        start_deferred_ = true;
        lock.Release();
        net::BatchScope::Defer([self = std::move(self)] {
          if (std::shared_ptr<ReplicationStream> stream = self.lock()) stream->StartDeferred();
        });
        return ticket;
      }
    }
    TakeQueueLocked();
  }
  // Idle: this thread starts the write (not under mu_: see Break()).
  StartTaken();
  return ticket;
}

bool ReplicationStream::AwaitTicket(Ticket& ticket, absl::Time deadline) {
  absl::MutexLock lock(&ticket.mu_);
  return ticket.mu_.AwaitWithDeadline(absl::Condition(&ticket.done_), deadline);
}

void ReplicationStream::StartDeferred() {
  {
    absl::MutexLock lock(&mu_);
    start_deferred_ = false;
    if (!TakeQueueIfFreeLocked()) return;
  }
  StartTaken();
}

absl::Status ReplicationStream::Wait(Ticket& ticket, absl::Time deadline) {
  // This thread may hold back the very write it is about to wait for.
  net::BatchScope::RunDeferred();
  if (AwaitTicket(ticket, deadline)) return ticket.status();
  Break(absl::DeadlineExceededError("a write was not answered by its deadline"));
  return PeerError("Replicate", node_,
                   absl::DeadlineExceededError("no answer from the backup by the deadline"));
}

void ReplicationStream::Ready() {
  {
    absl::MutexLock lock(&mu_);
    ready_ = true;
    if (!TakeQueueIfFreeLocked()) return;
  }
  StartTaken();
}

void ReplicationStream::WriteDone(bool ok) {
  if (!ok) {
    {
      absl::MutexLock lock(&mu_);
      writing_now_ = false;
    }
    Break(absl::UnavailableError("the backup closed the stream"));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    writing_now_ = false;
    // What was queued while the last batch was written.
    if (!TakeQueueIfFreeLocked()) return;
  }
  StartTaken();
}

bool ReplicationStream::CanSendLocked() const {
  return ready_ && !writing_now_ && unanswered_.size() < kMaxUnansweredBatches;
}

bool ReplicationStream::TakeQueueIfFreeLocked() {
  if (broken_ || queued_tickets_.empty() || !CanSendLocked()) return false;
  TakeQueueLocked();
  return true;
}

void GrpcReplicationStream::OnReadDone(bool ok) {
  if (!ok) {
    Break(absl::UnavailableError("the backup ended the stream"));
    return;
  }
  if (ReplyArrived(reply_)) StartRead(&reply_);
}

bool ReplicationStream::ReplyArrived(const v1::ReplicateBatchReply& reply) {
  std::vector<std::shared_ptr<Ticket>> tickets;
  bool send = false;
  {
    absl::MutexLock lock(&mu_);
    if (!unanswered_.empty()) {
      tickets = std::move(unanswered_.front());
      unanswered_.pop_front();
      unanswered_deadline_.pop_front();
    }
    // The writes queued while that batch was out go now, as one.
    send = TakeQueueIfFreeLocked();
  }
  if (send) StartTaken();
  if (tickets.empty()) {
    Break(absl::InternalError("the backup answered a batch never sent"));
    return false;
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
    statuses[f.index()] = PeerError("Replicate", node(), s);
  }
  // Each completion may publish its write: the index places of the ones
  // ahead load meanwhile (two ahead the buckets, one the entries).
  BatchPrefetch prefetch(store_, tickets.size(), [&tickets](size_t i) {
    return tickets[i]->has_hash_hint_ ? &tickets[i]->hash_hint_ : nullptr;
  });
  for (size_t i = 0; i < tickets.size(); ++i) {
    prefetch.Before(i);
    Complete(*tickets[i], std::move(statuses[i]));
  }
  if (bad) {
    Break(absl::InternalError("the backup named a write its batch does not have"));
    return false;
  }
  return true;
}

void GrpcReplicationStream::OnDone(const grpc::Status& status) {
  // Only after the destructor's Break() and RemoveHold(): nothing is
  // pending any more. Said once, for whoever reads the log of a peer gone.
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    LOG_EVERY_N(INFO, 100) << "replication stream to " << node().node_id()
                           << " ended: " << FromGrpcStatus(status);
  }
  done_.Notify();
}

ReplicationStreams::ReplicationStreams(PeerClient* peers, metrics::Registry* registry,
                                       std::string self)
    : peers_(peers), self_(std::move(self)), metrics_(registry) {}

std::shared_ptr<ReplicationStream> ReplicationStreams::Get(uint32_t shard_id,
                                                           const v1::ClusterNode& node) {
  std::shared_ptr<ReplicationStream> old;  // destroyed (joined) after the unlock
  absl::MutexLock lock(&mu_);
  std::shared_ptr<ReplicationStream>& s = streams_[std::make_pair(shard_id, node.node_id())];
  if (s == nullptr || s->broken() || s->node().incarnation() != node.incarnation() ||
      s->node().control_address() != node.control_address() ||
      s->node().replication_address() != node.replication_address()) {
    old = std::move(s);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    if (peers_->plaintext() && !node.replication_address().empty()) {
      SocketReplicationStreamOptions so;
      so.secret = peers_->peer_secret();
      so.self = self_;
      auto socket = std::make_shared<SocketReplicationStream>(
          node, &metrics_, so, store_.load(std::memory_order_acquire));
      socket->WatchRepliesWith(reply_watcher_);
      s = std::move(socket);
    } else {
      s = std::make_shared<GrpcReplicationStream>(peers_, node, &metrics_,
                                                  store_.load(std::memory_order_acquire));
    }
    metrics_.opened->Increment();
  }
  return s;
}

void ReplicationStreams::Retain(
    const std::function<bool(uint32_t shard_id, const std::string& node_id)>& keep) {
  std::vector<std::shared_ptr<ReplicationStream>> closed;  // ended after the unlock
  absl::MutexLock lock(&mu_);
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (keep(it->first.first, it->first.second)) {
      ++it;
      continue;
    }
    closed.push_back(std::move(it->second));
    streams_.erase(it++);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
}

std::shared_ptr<ReplicationStream> ReplicationStreams::GetRemembered(uint32_t shard_id,
                                                                     const v1::ClusterNode& node,
                                                                     Remembered* last) {
  // Read before Get(): a change after this read makes the next call look
  // again.
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (last->node == &node && last->shard_id == shard_id && last->generation == generation) {
    std::shared_ptr<ReplicationStream> s = last->stream.lock();
    if (s != nullptr && !s->broken()) return s;
  }
  std::shared_ptr<ReplicationStream> s = Get(shard_id, node);
  *last = Remembered{&node, shard_id, generation, s};
  return s;
}

void ReplicationStreams::AbandonAll(const absl::Status& why) {
  std::vector<std::shared_ptr<ReplicationStream>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, stream] : streams_) all.push_back(stream);
  }
  // Not under mu_: the failed writes' callbacks may open streams.
  for (auto& stream : all) stream->Abandon(why);
}

}  // namespace server
}  // namespace kvstore
