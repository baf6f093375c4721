// Copyright 2026 The kvstore Authors.
//
// Replicator::StartWrite: a replicated write as a chain of callbacks, so
// that no thread waits for the backups' answers.
//
// Why: a write that waits for its round holds a thread, and on the RESP
// path that cost three thread wake-ups per write (the loop hands the SET to
// a worker, the worker sleeps until the stream's reply, the loop is woken
// with the answer): most of a replicated write's CPU on these machines
// (docs/performance.md §1.2). Here the calling thread (the RESP loop) takes
// the locks and the seq and queues the write on the shard's streams; the
// reply that completes the last backup's ticket publishes the write and
// answers it on the stream's gRPC thread, for every write the reply
// carries. The loop is woken once per batch of answers, not per write.
//
// The same protocol as Write(), in the same order: route, barrier (reader),
// key stripe, seq and send under the send-order lock, every backup's
// answer, the fence check, publish, release. Only the common case goes
// this way (see StartWrite in replicator.h); it never waits for a lock: a
// busy barrier or stripe sends the write to Write() instead. A round that
// does not simply succeed is finished on a worker (ConcludeSlow) by the
// code Write() runs after its sends, which may block (dropping a failed
// backup through etcd, a backup whose map is behind, a former primary's
// hold) and may route the write again with a new seq.
//
// Deadline: nobody waits on a ticket, so each stream a round writes to is
// watched: at the deadline of its oldest write still unanswered, a stream
// is broken (as Wait() breaks one), which fails its tickets and sends their
// rounds to ConcludeSlow. One watch per stream, re-armed as it fires, costs
// the loop nothing per write beyond a flag, where a timer per round cost
// two lock round trips and a map node.

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/failpoint/failpoint.h"
#include "server/cluster/replication/replicator.h"

namespace kvstore {
namespace server {

struct Replicator::AsyncRound {
  absl::string_view key;
  absl::string_view entry;
  Publish publish;
  Done done;
  Route route;  // keeps the map (and so the shard and nodes) alive
  absl::Time deadline;
  absl::Time start;
  uint64_t seq = 0;
  Targets targets;
  // Per target: its stream's ticket, or (null ticket) its RDMA link's
  // answer, written by the link's sender before it counts the target
  // answered. The link is held weakly: a round must never be what keeps a
  // link alive, since the last reference would then go on the link's own
  // sender thread (which its destructor joins).
  // One entry per target; inline for the usual one or two backups (a
  // heap block each cost a replicated write about as much as its seq).
  absl::InlinedVector<std::shared_ptr<ReplicationStream::Ticket>, 2> tickets;
  absl::InlinedVector<absl::Status, 2> rdma_status;
  absl::InlinedVector<std::weak_ptr<RdmaReplicaLink>, 2> links;
  // Targets not yet answered, plus one StartWrite() holds until the round
  // is fully set up: whoever brings it to zero finishes the round.
  std::atomic<size_t> pending{0};
  // The round itself until it is fully answered: its streams' callbacks
  // hold a plain pointer (two pointers fit inside a std::function, a
  // shared_ptr cost a heap block per target), and the last answer takes
  // this reference over (RoundAnswered).
  std::shared_ptr<AsyncRound> self;
  HandoffSharedMutex* barrier = nullptr;
  HandoffMutex* stripe = nullptr;
};

namespace {

bool FailpointsArmed() {
  return failpoint::internal::armed_points.load(std::memory_order_relaxed) != 0;
}

// The RDMA commit's tag of `w` (SendOverRdma builds the same from a
// request). Its node id views this node's id, which outlives every round.
wire::ReplicaCommit ReplicaTagOf(const ReplicateWrite& w) {
  wire::ReplicaCommit tag;
  tag.shard_id = w.commit.shard_id;
  tag.shard_epoch = w.commit.shard_epoch;
  tag.seq = w.commit.seq;
  tag.primary_node_id = w.commit.primary_node_id;
  tag.primary_incarnation = w.commit.primary_incarnation;
  return tag;
}

}  // namespace

Replicator::~Replicator() {
  streams_.AbandonAll(absl::UnavailableError("the replicator is shutting down"));
  absl::MutexLock lock(&rounds_mu_);
  rounds_mu_.Await(absl::Condition(
      +[](std::atomic<size_t>* n) { return n->load(std::memory_order_acquire) == 0; },
      &rounds_in_flight_));
}

const Replicator::Targets& Replicator::TargetsAndSelf(
    const std::shared_ptr<const cluster::ClusterMapView>& map, const v1::Shard& shard,
    absl::string_view self, uint64_t* self_incarnation,
    ReplicationStreams::Remembered** remembered) {
  struct Memo {
    std::shared_ptr<const cluster::ClusterMapView> map;  // held: see replicator.h
    uint32_t shard_id = 0;
    std::string self;
    Targets targets;
    uint64_t self_incarnation = 0;
    absl::InlinedVector<ReplicationStreams::Remembered, 2> streams;
  };
  thread_local Memo memo;
  if (memo.map != map || memo.shard_id != shard.shard_id() || memo.self != self) {
    memo.map = map;
    memo.shard_id = shard.shard_id();
    memo.self = std::string(self);
    memo.targets = TargetsOf(*map, shard);
    const v1::ClusterNode* node = map->Node(self);
    memo.self_incarnation = node != nullptr ? node->incarnation() : 0;
    memo.streams.assign(memo.targets.size(), ReplicationStreams::Remembered());
  }
  *self_incarnation = memo.self_incarnation;
  *remembered = memo.streams.data();
  return memo.targets;
}

bool Replicator::StartWrite(absl::string_view key, const layout::KeyHash& key_hash,
                            absl::string_view entry, Publish publish, Done done) {
  // Failpoints stop writes at exact steps on the thread that runs them,
  // which must not be an event loop; a key to repair first is Admit()'s.
  if (FailpointsArmed() || unsettled_count_.load(std::memory_order_acquire) != 0) return false;
  const Route first = state_->RouteKey(key);
  if (first.kind != Route::Kind::kServe || first.migration != nullptr) return false;
  const uint32_t shard_id = first.shard->shard_id();
  HandoffSharedMutex& barrier = ShardBarrier(shard_id);
  if (!barrier.TryReaderLock()) return false;  // a sync or promotion is draining the shard
  // Routed again inside the barrier, as TryWrite() does.
  Route route = state_->RouteKey(key);
  const v1::Shard* shard = route.shard;
  bool common = route.kind == Route::Kind::kServe && route.migration == nullptr &&
                shard->shard_id() == shard_id && shard->replicas_size() > 1 &&
                shard->syncing_size() == 0 && shard->replicas_size() >= FloorOf(*route.map) &&
                gate_.Ready(*route.map, shard_id) && !former_.Holds(shard_id);
  Targets targets;
  uint64_t self_incarnation = 0;
  ReplicationStreams::Remembered* remembered = nullptr;
  if (common) {
    targets = TargetsAndSelf(route.map, *shard, state_->self(), &self_incarnation, &remembered);
  }
  // A target with an RDMA link up takes the write on that link's sender
  // (RdmaReplicaLink::Start); the others on the shard's stream to them.
  absl::InlinedVector<std::shared_ptr<RdmaReplicaLink>, 2> links(targets.size());
  for (size_t k = 0; k < targets.size(); ++k) {
    common = common && targets[k].node != nullptr;
    if (common && rdma_links_ != nullptr) links[k] = rdma_links_->Get(*targets[k].node);
  }
  HandoffMutex& stripe = StripeOf(key);
  if (!common || !stripe.TryLock()) {
    barrier.ReaderUnlock();
    return false;
  }
  former_.Observe(*route.map);
  auto round = std::make_shared<AsyncRound>();
  round->self = round;
  round->key = key;
  round->entry = entry;
  round->publish = std::move(publish);
  round->done = std::move(done);
  round->start = absl::Now();
  round->deadline = round->start + options_.replication_timeout;
  round->targets = std::move(targets);
  round->barrier = &barrier;
  round->stripe = &stripe;
  round->pending = round->targets.size() + 1;
  absl::InlinedVector<std::shared_ptr<ReplicationStream>, 2> streams(round->targets.size());
  round->rdma_status.resize(round->targets.size());
  for (size_t k = 0; k < round->targets.size(); ++k) {
    round->links.push_back(links[k]);
    // `remembered` is still this thread's memo's: nothing since its call
    // could have run another write on this thread.
    if (links[k] == nullptr) {
      streams[k] = streams_.GetRemembered(shard_id, *round->targets[k].node, &remembered[k]);
    }
  }
  round->route = std::move(route);
  rounds_in_flight_.fetch_add(1, std::memory_order_relaxed);
  started_writes_->Increment();
  {
    // As in Forward(): seq and queueing under one lock per shard.
    absl::MutexLock order(&SendOrder(shard_id));
    round->seq = seqs_->Next(shard_id);
    // Views only: each stream copies the entry once, into its next frame
    // (or a message slot that already has room), with no allocation.
    ReplicateWrite write =
        WriteOf(*round->route.shard, self_incarnation, key, entry, /*repair=*/false);
    write.commit.seq = round->seq;
    for (size_t k = 0; k < streams.size(); ++k) {
      if (links[k] != nullptr) {
        // Queued under the send-order lock too, so each link's sender
        // carries the shard's writes in seq order.
        round->tickets.push_back(nullptr);
        links[k]->Start(round->key, round->entry, ReplicaTagOf(write), round->deadline,
                        [this, round, k](absl::Status s) {
                          round->rdma_status[k] = std::move(s);
                          RoundAnswered(round.get());
                        });
        continue;
      }
      round->tickets.push_back(streams[k]->SendWrite(
          write, round->deadline, [this, r = round.get()] { RoundAnswered(r); }, &key_hash));
    }
  }
  // A link's sender answers by the deadline itself (its waits are bounded
  // by it); a stream needs the watch.
  for (const std::shared_ptr<ReplicationStream>& stream : streams) {
    if (stream != nullptr) WatchStream(stream, round->deadline);
  }
  RoundAnswered(round.get());  // StartWrite's own share: the round is set up
  return true;
}

void Replicator::RoundAnswered(AsyncRound* r) {
  if (r->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last answer: nothing else calls back, and the round lives on in
  // FinishAsync's hands (and a slow end's) only.
  const std::shared_ptr<AsyncRound> round = std::move(r->self);
  FinishAsync(round);
}

void Replicator::WatchStream(const std::shared_ptr<ReplicationStream>& stream,
                             absl::Time deadline) {
  // The write is queued first, then the flag tested: a watch standing down
  // meanwhile looks for pending writes after clearing the flag, so one of
  // the two sees this write (replication_stream.h, ClaimDeadlineWatch).
  if (!stream->ClaimDeadlineWatch()) return;
  std::weak_ptr<ReplicationStream> weak = stream;
  deadlines_.Add(deadline, [this, weak] { StreamWatchFired(weak); });
}

void Replicator::StreamWatchFired(const std::weak_ptr<ReplicationStream>& weak) {
  std::shared_ptr<ReplicationStream> stream = weak.lock();
  if (stream == nullptr) return;  // closed: its writes were failed then
  absl::Time oldest = stream->OldestPendingDeadline();
  if (oldest <= absl::Now()) {
    // Broken for good: the next write opens a new stream, with its own watch.
    stream->Abandon(absl::DeadlineExceededError("a write was not answered by its deadline"));
    return;
  }
  stream->ReleaseDeadlineWatch();
  // Looked at again once released: a write queued before the release saw
  // the watch armed and armed none.
  oldest = stream->OldestPendingDeadline();
  if (oldest != absl::InfiniteFuture()) WatchStream(stream, oldest);
}

void Replicator::FinishAsync(const std::shared_ptr<AsyncRound>& round) {
  latency_->Observe(absl::Now() - round->start);
  bool all_installed = true;
  for (size_t k = 0; k < round->targets.size(); ++k) {
    round->targets[k].status =
        round->tickets[k] != nullptr ? round->tickets[k]->status() : round->rdma_status[k];
    all_installed = all_installed && round->targets[k].status.ok();
    if (round->tickets[k] == nullptr && round->targets[k].status.ok()) {
      rdma_links_->sent()->Increment();
    }
  }
  const uint32_t shard_id = round->route.shard->shard_id();
  if (!all_installed || FailpointsArmed() || former_.Holds(shard_id)) {
    slow_ended_->Increment();
    slow_ends_.Submit([this, round] { ConcludeSlow(round); });
    return;
  }
  // Every backup installed it (so each may hold it). Conclude()'s last
  // steps: a node that may have been replaced meanwhile publishes nothing.
  absl::Status s;
  bool published = false;
  if (!state_->Serving()) {
    refused_->Increment();
    s = RouteStatus(Route(), RefusalAddress::kResp);
  } else {
    writes_->Increment();
    published = true;
    s = round->publish();
  }
  NoteOutcome(shard_id, round->key, /*held=*/true, published, s);
  EndRound(round, WriteOutcome(std::move(s), /*sent_on=*/true, published));
}

void Replicator::ConcludeSlow(const std::shared_ptr<AsyncRound>& round) {
  const cluster::ClusterMapView& map = *round->route.map;
  const v1::Shard& shard = *round->route.shard;
  Targets& targets = round->targets;
  // Forward()'s retry of backups whose map is behind, with the same seq;
  // and SendOverRdma()'s of a backup whose RDMA link failed: the link is
  // dropped and the write sent again on the stream, marked resent.
  std::vector<size_t> retry;
  for (size_t k = 0; k < targets.size(); ++k) {
    const bool time_left =
        absl::Now() + absl::Milliseconds(2) < round->deadline && state_->Serving();
    std::shared_ptr<RdmaReplicaLink> link = round->links[k].lock();
    if (round->tickets[k] == nullptr && !targets[k].status.ok() &&
        (link == nullptr || link->failed(targets[k].status))) {
      if (link != nullptr) rdma_links_->Drop(targets[k].node->node_id(), link);
      targets[k].rdma_failed = true;
      targets[k].status = absl::UnavailableError(absl::StrCat(
          "RDMA link to ", targets[k].node->node_id(), " failed: ", targets[k].status.message()));
      if (time_left) retry.push_back(k);
    } else if (MapBehind(targets[k].status) && time_left) {
      retry.push_back(k);
    }
  }
  if (!retry.empty()) {
    v1::ReplicateRequest req = MakeRequest(map, shard, round->key, round->entry, false);
    req.set_seq(round->seq);
    v1::ReplicateRequest resent = req;
    resent.set_resent_after_rdma(true);
    absl::SleepFor(absl::Milliseconds(2));
    ForwardRounds(req, resent, targets, round->deadline, std::move(retry), /*first=*/false);
  }
  Round r;
  r.replicated = AfterForward(map, shard, targets, &r.stale, &r.held);
  const bool sent_on = r.held;
  bool again = false;
  bool published = false;
  absl::Status s = Conclude(
      round->route, nullptr, r, round->deadline, &again, [&] { return round->publish(); },
      &published);
  NoteOutcome(shard.shard_id(), round->key, r.held, published, s);
  if (!again) {
    EndRound(round, WriteOutcome(std::move(s), sent_on, published));
    return;
  }
  // A backup holds a newer map: route the write again, as Write() does,
  // without this round's locks (Write() takes its own).
  round->stripe->Unlock();
  round->barrier->ReaderUnlock();
  round->stripe = nullptr;
  round->barrier = nullptr;
  absl::SleepFor(absl::Milliseconds(1));
  s = WriteFrom(
      round->key, round->entry, [&] { return round->publish(); }, round->deadline, 1, sent_on);
  EndRound(round, std::move(s));
}

void Replicator::EndRound(const std::shared_ptr<AsyncRound>& round, absl::Status status) {
  if (round->stripe != nullptr) round->stripe->Unlock();
  if (round->barrier != nullptr) round->barrier->ReaderUnlock();
  round->stripe = nullptr;
  round->barrier = nullptr;
  Done done = std::move(round->done);
  done(std::move(status));
  // Not the last round: counted out without the lock. The last one is
  // counted out under it, so that a destructor waiting for zero sees it
  // only after this thread is done with the mutex (see replicator.h).
  size_t n = rounds_in_flight_.load(std::memory_order_relaxed);
  while (n > 1) {
    if (rounds_in_flight_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) return;
  }
  absl::MutexLock lock(&rounds_mu_);
  rounds_in_flight_.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace server
}  // namespace kvstore
