// Copyright 2026 The kvstore Authors.
//
// CommitPool: where a RESP loop parks a streamed SET whose commit waits for
// a replication round (cluster mode), as Redis parks a client in WAIT, and
// any other write command that would wait for other nodes (DEL, INCR,
// MSET, SET with options ...: a command job, run whole on a worker).
//
// In the common case no worker is involved: Submit() starts the commit
// (KvStore::StartCommit) and the backups' answer finishes it on the
// replication stream's thread, which queues the Done as a worker would.
// The workers take the rest (a migration, a syncing replica, a busy key:
// whatever StartCommit declines) and every command job.
//
// Why: KvStore::Commit() runs the write hook, which in cluster mode blocks
// until every in-sync backup installed the write. Run on the loop, that
// round stalled every other connection of the loop; and with at most one
// SET per loop in flight, the replication stream could never batch
// (replication_stream.h). Here the loop hands the sealed entry to a worker
// and goes on serving its other connections; the worker commits (and
// waits) and queues the outcome; the loop, woken through `notify_fd`,
// answers the SET and resumes its connection. A connection with a parked
// SET is not read meanwhile, so its replies stay in request order.
//
// Ownership: a Job carries the SET's reservation and in-flight budget away
// from its connection, and the Done gives them back: the loop hands them to
// its writer (KvStore::Writer::Done, on the loop's thread) and the budget,
// whether the connection is still open or not. A connection closed while
// its SET is parked thus never frees an entry a commit still reads.
//
// Thread safety: Submit(), TakeDone() and the destructor from the loop's
// thread; the workers are the pool's own (started on demand, up to
// max_threads, kept while the loop lives); a started commit's callback
// runs on the write hook's thread.

#ifndef KVSTORE_SERVER_RESP_COMMIT_POOL_H_
#define KVSTORE_SERVER_RESP_COMMIT_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/storage/kv_store.h"
#include "server/storage/reservation.h"

namespace kvstore {
namespace server {
namespace resp_internal {

class CommitPool {
 public:
  struct Job {
    int fd = -1;           // the connection that sent the SET ...
    uint64_t serial = 0;   // ... and which one it was (fds are reused)
    uint64_t held_id = 0;  // the place of its reply (Connection::Hold)
    // Its key's hash (Connection::parked_keys): the SET's own key lives in
    // its entry, and a copy per SET was a heap block of the hot path.
    uint64_t key_hash = 0;
    Reservation reservation;  // the sealed entry, owned by the job
    uint64_t budget = 0;      // in-flight SET budget it holds
    absl::Time started;       // loop time the SET's header arrived
    // A command job (RespLoop::ParkCommand) when set: no reservation, no
    // key; a worker runs it (it may block for a replication round) and its
    // result, the command's encoded reply, becomes Done::reply. It must
    // own everything it uses that the loop's thread may change.
    std::function<std::string()> command;
  };
  struct Done {
    Job job;
    absl::Status status;  // KvStore::Commit()'s (OK for a command job)
    std::string reply;    // a command job's encoded reply
  };

  // `store` is not owned and outlives the pool; `notify_fd` is an eventfd
  // the loop polls: written when a finished job finds the done queue empty.
  CommitPool(KvStore* store, int notify_fd, size_t max_threads);
  // Lets every submitted job finish (each is bounded by the replication
  // timeout), then joins the workers. Their Done stay for TakeDone().
  ~CommitPool();
  CommitPool(const CommitPool&) = delete;
  CommitPool& operator=(const CommitPool&) = delete;

  // Queues `job`'s commit (or command); starts a worker if none is idle
  // and fewer than max_threads run.
  void Submit(Job job);
  // The jobs finished since the last call, in the order they finished,
  // into *out (cleared first). Read the eventfd before calling (see
  // notify_fd). The vectors trade places: the pool goes on filling the
  // room *out had, so a loop that passes the same vector every time
  // reallocates nothing once batches stop growing (a fresh vector each
  // time grew again through every size up to the batch's, and freeing the
  // big ones cost about a twentieth of a replicated SET's instructions).
  void TakeDone(std::vector<Done>* out);
  // Jobs submitted and not yet taken back by TakeDone().
  size_t outstanding() const { return outstanding_; }
  // Stops the workers after the jobs queued so far and waits for the
  // started commits to end; idempotent.
  void Stop();

  // Marks the calling thread as the loop's own, for the scope: a commit
  // the loop itself finishes (it reads the replication replies:
  // RespServer::Watch) writes no eventfd, since the loop is awake; it asks
  // FinishedOnLoop() after each event instead. Saves a write and a read
  // of the eventfd per reply.
  class LoopScope {
   public:
    explicit LoopScope(const CommitPool* pool) { Current() = pool; }
    ~LoopScope() { Current() = nullptr; }
    LoopScope(const LoopScope&) = delete;
    LoopScope& operator=(const LoopScope&) = delete;

   private:
    friend class CommitPool;
    static const CommitPool*& Current() {
      static thread_local const CommitPool* pool = nullptr;
      return pool;
    }
  };
  // Whether the loop's thread finished commits since the last call (then
  // TakeDone() without reading the eventfd). Loop thread only.
  bool FinishedOnLoop() { return std::exchange(finished_on_loop_, false); }

 private:
  void Work();
  // Queues `job` for a worker, starting one if none is idle; `count_out`:
  // a declined StartCommit's job, counted out of started_ with it.
  void Queue(Job job, bool count_out = false);
  // Queues a job's outcome for TakeDone() and wakes the loop if needed.
  void Finished(Job job, absl::Status status, std::string reply, bool was_started);

  KvStore* const store_;
  const int notify_fd_;
  const size_t max_threads_;
  size_t outstanding_ = 0;         // loop thread only
  bool finished_on_loop_ = false;  // loop thread only

  // The workers' queue.
  absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The outcomes on their way back to the loop: a lock of their own, so
  // that a finished commit neither wakes the workers' Await on mu_ (absl
  // re-checks waiters' conditions at each unlock) nor makes the loop's
  // TakeDone() wait behind a worker taking a job, or the reverse.
  absl::Mutex done_mu_;
  std::vector<Done> done_ ABSL_GUARDED_BY(done_mu_);
  // StartCommit()s not yet Finished(): counted in without a lock, out
  // under done_mu_ (Stop() waits for zero under it).
  std::atomic<size_t> started_{0};
  std::vector<std::thread> threads_;  // loop thread only
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_COMMIT_POOL_H_
