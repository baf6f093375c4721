// Copyright 2026 The kvstore Authors.
//
// ReplicationStream: the primary's end of the replication stream of one
// shard to one backup, and ReplicationStreams, the set of them a replicator
// keeps. Two transports carry a stream: the backup's peer socket
// (socket_replication_stream.h: a plain TCP connection, in a plaintext
// cluster) or its gRPC ReplicateStream (GrpcReplicationStream below: a TLS
// cluster, or a node without --replication_port). Both carry the same
// ReplicateBatch and ReplicateBatchReply messages (proto/kv_cluster.proto).
//
// Why a stream: a unary Replicate call per write and backup costs a gRPC
// call's round of thread wake-ups and system calls on both nodes for every
// write, which made a replicated write cost about ten times an unreplicated
// one (docs/performance.md). On the stream, writes queue while the stream
// is busy sending and go out together: under load one message and one
// reply carry many writes (group commit); idle, a write goes out at once
// (no timer, no added latency).
//
// How: Send() appends the write to the queue; when no batch is on its way
// (written and not yet answered), the sending thread starts the write of
// the whole queue as one ReplicateBatch itself; when one is, the reply to
// it (on the transport's thread) starts the next with everything queued
// meanwhile. Replies come one per batch, in order, and complete each
// write's Ticket with OK or the refusal the reply names for it. Writes of
// one stream reach the backup in the order Send() was called; the
// replicator calls it in seq order (it takes the seq and sends under one
// lock per shard).
//
// Failure: a stream that breaks (the backup or the connection went away, a
// reply that does not match, a write not answered by its deadline:
// Wait() cancels the stream) fails every write still queued or unanswered
// with kUnavailable at once, and stays broken: ReplicationStreams opens a
// new one for the next write. A write failed so may still have been
// installed (the reply was lost): its status is not a certain no-effect
// refusal, as for a unary call that timed out.
//
// Thread safety: thread-safe. The transports report on their own threads
// (gRPC's, or the socket stream's); their destructors break the stream and
// wait until the transport is done.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATION_STREAM_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATION_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/replication/replicate_batch_view.h"
#include "server/net/fd_watch.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

// The kvstore_replication_stream_* series, shared by every stream of a node.
struct ReplicationStreamMetrics {
  explicit ReplicationStreamMetrics(metrics::Registry* registry);
  metrics::Counter* opened;
  metrics::Counter* broken;
  metrics::Counter* batches;
  metrics::Counter* writes;
};

// The queue, batches and tickets of a stream; a transport (gRPC below, or
// the peer socket: socket_replication_stream.h) carries the batches.
class ReplicationStream : public std::enable_shared_from_this<ReplicationStream> {
 public:
  // A write on its way: Wait() for the backup's answer, or have Send() run
  // a callback once it is there.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

    // Whether the answer is there, and what it is (OK until then).
    bool done() const;
    absl::Status status() const;

   private:
    friend class ReplicationStream;
    // The write's key's index hash, for a cache hint before the ticket
    // ahead of it completes (ReplyArrived), when has_hash_hint_.
    layout::KeyHash hash_hint_;
    bool has_hash_hint_ = false;
    mutable absl::Mutex mu_;
    bool done_ ABSL_GUARDED_BY(mu_) = false;
    absl::Status status_ ABSL_GUARDED_BY(mu_);
    std::function<void()> then_;  // set before the ticket is shared
  };

  // A transport's destructor breaks the stream (what is pending fails with
  // kUnavailable) and waits until its transport is done with it.
  virtual ~ReplicationStream() = default;
  ReplicationStream(const ReplicationStream&) = delete;
  ReplicationStream& operator=(const ReplicationStream&) = delete;

  // Queues `req` (copied) for the backup; `deadline` bounds how long the
  // backup may still install it. Never blocks on the network. On a broken
  // stream the ticket is already failed with kUnavailable. `then`, if set,
  // runs once the ticket is done, on the thread that completes it (a
  // transport thread, one breaking the stream, or this one before Send()
  // returns), with no lock of the stream held.
  std::shared_ptr<Ticket> Send(const v1::ReplicateRequest& req, absl::Time deadline,
                               std::function<void()> then = nullptr);
  // Send() of a write given as views (replicate_batch_view.h), which need
  // only last for the call: its entry is copied once, into memory already
  // there with no allocation — straight into the next frame on the peer
  // socket (BatchForm::kFrame), into a cleared message slot whose strings
  // keep an earlier batch's room on gRPC. `hash_hint`, when not null, is
  // the write's key's index hash (KvIndex::Hash; copied): while the reply
  // completes the writes ahead of it, the index is told to load the key's
  // place, so that `then`'s publish finds it in cache.
  std::shared_ptr<Ticket> SendWrite(const ReplicateWrite& write, absl::Time deadline,
                                    std::function<void()> then = nullptr,
                                    const layout::KeyHash* hash_hint = nullptr) {
    return Queue(write, deadline, std::move(then), hash_hint);
  }

  // Breaks the stream (see the file comment) because of `why`: for a
  // writer whose write was sent with a `then` and not answered by its
  // deadline, as Wait() does for one that waits.
  void Abandon(const absl::Status& why) { Break(why); }

  // The backup's answer to `ticket`'s write: OK once installed, the
  // backup's refusal (with its payloads, the message naming the peer as
  // PeerClient's errors do), kUnavailable if the stream broke first, or
  // kDeadlineExceeded at `deadline`, which also breaks the stream: its
  // later writes would wait behind one the backup has not answered.
  absl::Status Wait(Ticket& ticket, absl::Time deadline);

  // Once broken, a stream takes no more writes (see the file comment).
  // Lock-free (ReplicationStreams::Get asks for every write); a stream may
  // break right after it answered false, which its Send() then reports.
  bool broken() const;

  // --- A deadline watch, for writers that do not Wait() (Replicator::
  // StartWrite): one timer per stream, armed by whoever claims it.
  // The earliest deadline of a write queued or unanswered; InfiniteFuture()
  // when none is.
  absl::Time OldestPendingDeadline() const;
  // True if the caller must arm the watch (none is armed); then it is
  // marked armed. Call after queueing the write to be watched.
  bool ClaimDeadlineWatch() { return !watch_armed_.exchange(true, std::memory_order_acq_rel); }
  // The watch fired and stands down; call OldestPendingDeadline() after
  // this, not before, and claim it again for what is still pending.
  void ReleaseDeadlineWatch() { watch_armed_.store(false, std::memory_order_seq_cst); }
  // The node as it was when the stream opened (addresses, incarnation).
  const v1::ClusterNode& node() const { return node_; }

 protected:
  // How the transport takes a batch: a ReplicateBatch message (gRPC), or
  // the whole peer socket frame (length prefix and the batch's wire bytes),
  // encoded write by write as they queue, so that no message is built and
  // serialized: each entry is copied once on its way to the kernel.
  enum class BatchForm { kMessage, kFrame };
  // `ready`: batches may be written at once (else after Ready()).
  // `store` (may be null) gets the cache hints of SendWrite's hash_hint.
  ReplicationStream(const v1::ClusterNode& node, ReplicationStreamMetrics* metrics, bool ready,
                    const KvStore* store = nullptr, BatchForm form = BatchForm::kMessage);

  // --- The transport's part.
  // Waits until `ticket` is done or `deadline`; true if done. The default
  // blocks on the ticket; a transport whose replies another thread reads
  // may read them here instead (socket_replication_stream.h).
  virtual bool AwaitTicket(Ticket& ticket, absl::Time deadline);
  // Starts writing `batch` (BatchForm::kMessage) or `frame` (kFrame), which
  // stays untouched until WriteDone(); one batch at a time. Called with no
  // lock of the stream held. Only the one of the stream's form is called.
  virtual void StartBatch(const v1::ReplicateBatch* batch);
  virtual void StartFrame(const std::string* frame);
  // Ends the transport (its reads and writes in flight); called once, by
  // the first Break(), with no lock of the stream held.
  virtual void Cancel() = 0;

  // --- What the transport reports.
  // The transport is connected: what is queued goes.
  void Ready();
  // The batch StartBatch() was given is written (ok), or cannot be.
  void WriteDone(bool ok);
  // The backup's reply to the oldest unanswered batch. Returns whether to
  // read the next one (false: the stream broke).
  bool ReplyArrived(const v1::ReplicateBatchReply& reply);
  // Fails what is pending and stops the stream (the first reason is kept).
  void Break(const absl::Status& why);

 private:
  // Marks the stream broken with `why`; true the first time, when the
  // caller must Cancel() (not under mu_: a transport may report on the
  // cancelling thread).
  bool MarkBrokenLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the queue into writing_ (stamping each write's time left).
  // REQUIRES: a write may start (none in flight), the queue is not empty.
  void TakeQueueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Complete(Ticket& ticket, absl::Status status);
  // Whether a batch may be written now: the transport is ready, none is
  // being written and fewer than kMaxUnansweredBatches await their reply.
  // Holding writes back while a batch is unanswered is the group commit:
  // under load the writes of a round trip go together; idle, a write goes
  // at once.
  bool CanSendLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the queue for a batch when one may go; then the caller must
  // StartTaken() (not under mu_).
  bool TakeQueueIfFreeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the batch just taken to the transport, in the stream's form.
  void StartTaken();
  // The end of the net::BatchScope a Queue() deferred its start to: what
  // is queued goes, if the stream is free (else the next reply sends it).
  void StartDeferred();
  // Both Send()s: the write goes into the queue's next slot or frame.
  std::shared_ptr<Ticket> Queue(const ReplicateWrite& write, absl::Time deadline,
                                std::function<void()> then,
                                const layout::KeyHash* hash_hint = nullptr);
  static constexpr size_t kMaxUnansweredBatches = 1;

  const v1::ClusterNode node_;
  ReplicationStreamMetrics* const metrics_;
  const KvStore* const store_;
  const BatchForm form_;

  mutable absl::Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_);
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> broken_seen_{false};  // broken_, for broken() without mu_
  absl::Status why_ ABSL_GUARDED_BY(mu_);
  // The batch being written, if writing_now_; the transport reads it until
  // WriteDone().
  v1::ReplicateBatch writing_ ABSL_GUARDED_BY(mu_);
  bool writing_now_ ABSL_GUARDED_BY(mu_) = false;
  // A thread's net::BatchScope will call StartDeferred(): a Queue() on the
  // free stream leaves the start to it.
  bool start_deferred_ ABSL_GUARDED_BY(mu_) = false;
  // BatchForm::kFrame: the frame being written (until WriteDone()), and
  // the next one, the queued writes' wire bytes after a length prefix to
  // fill in (kFramePrefix zero bytes when nothing is queued).
  std::string writing_frame_ ABSL_GUARDED_BY(mu_);
  std::string queued_frame_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> timeouts_ ABSL_GUARDED_BY(mu_);  // scratch of TakeQueueLocked()
  // Queued, not yet written: the writes (BatchForm::kMessage), their
  // deadlines and tickets (one per write, either form).
  v1::ReplicateBatch queued_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> queued_deadlines_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Ticket>> queued_tickets_ ABSL_GUARDED_BY(mu_);
  // Written (or being written), not answered: one entry per batch, and
  // the batch's earliest deadline.
  std::deque<std::vector<std::shared_ptr<Ticket>>> unanswered_ ABSL_GUARDED_BY(mu_);
  std::deque<absl::Time> unanswered_deadline_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> watch_armed_{false};  // see ClaimDeadlineWatch()
};

// The stream on the backup's gRPC ReplicateStream: a callback reactor, so
// that no thread of its own sits between a writer and the network. The
// call holds (gRPC's AddHold) until the destructor, since writes start on
// writers' threads, outside reactions.
class GrpcReplicationStream final : public ReplicationStream, public PeerClient::StreamReactor {
 public:
  // Opens the stream to `node` through `peers`. Neither is owned: `peers`
  // and `metrics` must outlive the stream.
  GrpcReplicationStream(PeerClient* peers, const v1::ClusterNode& node,
                        ReplicationStreamMetrics* metrics, const KvStore* store = nullptr);
  // Breaks the stream, releases the hold and waits for OnDone().
  ~GrpcReplicationStream() override;

  // grpc::ClientBidiReactor.
  void OnWriteDone(bool ok) override { WriteDone(ok); }
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void StartBatch(const v1::ReplicateBatch* batch) override { StartWrite(batch); }
  void Cancel() override { context_.TryCancel(); }

  grpc::ClientContext context_;
  std::shared_ptr<v1::KvCluster::Stub> stub_;  // keeps the channel until OnDone
  v1::ReplicateBatchReply reply_;              // the read in flight's
  absl::Notification done_;                    // OnDone() ran: gRPC is finished with us
};

// The streams of one primary, one per (shard, backup): opened on first use,
// opened anew when the one there broke or the backup's address or
// incarnation changed. Thread-safe.
class ReplicationStreams {
 public:
  // Not owned; both outlive this object. `self`: this node's id, which
  // the peer socket's hello names.
  ReplicationStreams(PeerClient* peers, metrics::Registry* registry, std::string self);
  ReplicationStreams(const ReplicationStreams&) = delete;
  ReplicationStreams& operator=(const ReplicationStreams&) = delete;

  // The stream of shard `shard_id` to `node`. Never null. On the peer
  // socket when the node has a replication_address and peers are plaintext
  // (PeerClient::plaintext()), else on its gRPC ReplicateStream.
  std::shared_ptr<ReplicationStream> Get(uint32_t shard_id, const v1::ClusterNode& node);

  // What a caller remembers of its last Get() for one target, so that the
  // next one can skip the table (its lock, and the hash and compares of a
  // node id: about 400 instructions of every replicated write). Kept per
  // thread next to something that holds the map `node` belongs to, so that
  // an equal node pointer is the same node.
  struct Remembered {
    const v1::ClusterNode* node = nullptr;
    uint32_t shard_id = 0;
    uint64_t generation = 0;
    std::weak_ptr<ReplicationStream> stream;
  };
  // Get(), or the stream `*last` remembers when it names the same (shard,
  // node), the table has not changed since, and the stream has not
  // broken: then it is the one Get() would return. `*last` is updated.
  std::shared_ptr<ReplicationStream> GetRemembered(uint32_t shard_id, const v1::ClusterNode& node,
                                                   Remembered* last);

  // The store whose index the streams give cache hints for the writes they
  // complete (ReplicationStream::SendBuilt); before the first write.
  void set_store(const KvStore* store) { store_.store(store, std::memory_order_release); }

  // The event loops that read the peer socket streams' replies
  // (SocketReplicationStream::WatchRepliesWith; null: each stream's own
  // thread does). Not owned: call set_reply_watcher(nullptr) before it
  // goes; once that returned, no stream calls it. Streams opened before
  // a watcher was set keep reading on their threads.
  void set_reply_watcher(net::FdWatcher* watcher) { reply_watcher_->Set(watcher); }

  // Closes the streams of (shard, node) pairs `keep` says no (a backup
  // that left the shard): their threads end.
  void Retain(const std::function<bool(uint32_t shard_id, const std::string& node_id)>& keep);

  // Breaks every stream (ReplicationStream::Abandon): what is pending on
  // them fails at once. For the replicator's shutdown.
  void AbandonAll(const absl::Status& why);

 private:
  PeerClient* const peers_;
  const std::string self_;
  std::atomic<const KvStore*> store_{nullptr};
  // Shared with the streams, which may outlive this object.
  const std::shared_ptr<net::FdWatcherSlot> reply_watcher_ = std::make_shared<net::FdWatcherSlot>();
  ReplicationStreamMetrics metrics_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<uint32_t, std::string>, std::shared_ptr<ReplicationStream>> streams_
      ABSL_GUARDED_BY(mu_);
  // Bumped (under mu_) whenever a stream is opened or dropped from streams_.
  std::atomic<uint64_t> generation_{1};
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATION_STREAM_H_
