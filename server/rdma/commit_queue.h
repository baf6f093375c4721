// Copyright 2026 The kvstore Authors.
//
// CommitQueue: the commit workers of cluster mode (architecture §19.3.1), a
// pool of threads serving one bounded FIFO lane per sender.
//
// The RDMA poller reposts a commit's receive buffer as soon as it has copied
// the message into a queue, so the receive buffers alone no longer bound
// what waits: a sender that ignores its commit credits could queue without
// limit. The queue therefore enforces the credits itself:
//   * each lane (one RDMA connection) holds at most `capacity` jobs that
//     have not started; Push() beyond that is refused and the caller fails
//     the connection. A sender that keeps to its credits never hits it: a
//     waiting job is an unanswered commit, and the running one (whose ack
//     goes out only after it ran) is not counted;
//   * a lane runs one job at a time, in order (a connection's commits keep
//     their order), and lanes with work are served round-robin: after a
//     job, its lane goes to the back of the line. A lane with a long
//     backlog, or one whose jobs are slow, delays another lane by at most
//     one of its jobs per turn, and occupies at most one thread.
// Which sender gets which lane is the caller's choice; RdmaService keeps
// client commits and replica commits (a primary's writes to this backup)
// in two CommitQueues, so neither kind can take the other's threads.
//
// Errors: Push() returns kResourceExhausted "... commit credits ..." when
// the lane is full, kCancelled after Stop().
// Ownership: jobs are owned by the queue until they run or are dropped
// (Forget(), Stop(), destruction).
// Thread safety: every method is thread-safe. Jobs run on the queue's
// threads, never on the caller's; a job must not call Stop() or destroy
// the queue (it may call Push() and Forget()).

#ifndef KVSTORE_SERVER_RDMA_COMMIT_QUEUE_H_
#define KVSTORE_SERVER_RDMA_COMMIT_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace server {

class CommitQueue {
 public:
  using Job = std::function<void()>;

  // Starts `threads` (>= 1) workers; `name` names the queue in errors.
  CommitQueue(std::string name, int threads);
  // Stop().
  ~CommitQueue();
  CommitQueue(const CommitQueue&) = delete;
  CommitQueue& operator=(const CommitQueue&) = delete;

  // Queues `job` at the back of lane `lane`, which may hold `capacity`
  // (>= 1) jobs not yet started. kResourceExhausted when it already holds
  // that many (the job is dropped); kCancelled after Stop().
  absl::Status Push(uint64_t lane, uint32_t capacity, Job job);

  // Drops the jobs of `lane` that have not started (its sender is gone).
  // A job of the lane that is running finishes.
  void Forget(uint64_t lane);

  // Drops every job that has not started, waits for the running ones and
  // joins the threads. Idempotent. Push() is refused afterwards.
  void Stop();

  // Jobs of `lane` that have not started (0 for an unknown lane).
  size_t waiting(uint64_t lane) const;
  // True when `lane` has no job waiting and none running.
  bool idle(uint64_t lane) const;
  // Jobs of every lane that have not started.
  size_t waiting_total() const;

 private:
  struct Lane {
    std::deque<Job> jobs;
    bool running = false;  // a thread is running one of its jobs
  };

  void WorkerLoop();
  // True when a worker has something to do (or must stop).
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !ready_.empty(); }

  const std::string name_;
  mutable absl::Mutex mu_;
  // Every lane that holds a job or is running one.
  absl::flat_hash_map<uint64_t, Lane> lanes_ ABSL_GUARDED_BY(mu_);
  // Lanes with a job and none running, in the order they are served. A lane
  // is here exactly when it has jobs and is not running.
  std::deque<uint64_t> ready_ ABSL_GUARDED_BY(mu_);
  size_t waiting_total_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Written by the constructor and Stop() only.
  std::vector<std::thread> threads_;
  absl::Mutex stop_mu_;  // serializes Stop()
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RDMA_COMMIT_QUEUE_H_
