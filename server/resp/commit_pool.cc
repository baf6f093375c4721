// Copyright 2026 The kvstore Authors.

#include "server/resp/commit_pool.h"

#include <unistd.h>

#include <memory>
#include <utility>

#include "common/sync/thread_name.h"

namespace kvstore {
namespace server {
namespace resp_internal {

CommitPool::CommitPool(KvStore* store, int notify_fd, size_t max_threads)
    : store_(store), notify_fd_(notify_fd), max_threads_(max_threads < 1 ? 1 : max_threads) {}

CommitPool::~CommitPool() { Stop(); }

void CommitPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  // A started commit ends by its replication deadline (or at once, when
  // its stream breaks); its callback must not find the pool gone.
  absl::MutexLock lock(&done_mu_);
  done_mu_.Await(absl::Condition(
      +[](std::atomic<size_t>* n) { return n->load(std::memory_order_relaxed) == 0; }, &started_));
}

void CommitPool::Submit(Job job) {
  ++outstanding_;
  if (job.command) return Queue(std::move(job));
  // The common replicated SET needs no worker (KvStore::StartCommit): the
  // backups' answer finishes it on the replication stream's thread.
  // Owned by the callback, which runs exactly once when the commit starts
  // (and never when it is declined). Held by a plain pointer: a callback of
  // two pointers is stored inside its std::function, where a shared_ptr
  // cost a second heap block per SET.
  Job* started = new Job(std::move(job));
  // Counted in without a lock (a lock round trip per SET otherwise):
  // Stop() waits for zero under done_mu_, and every count out is made
  // under done_mu_.
  started_.fetch_add(1, std::memory_order_relaxed);
  // The loop wrote and sealed the entry in its own reservation.
  if (store_->StartCommitReserved(started->reservation, [this, started](absl::Status s) {
        Job owned = std::move(*started);
        delete started;
        Finished(std::move(owned), std::move(s), "", /*was_started=*/true);
      })) {
    return;
  }
  Job declined = std::move(*started);
  delete started;
  Queue(std::move(declined), /*count_out=*/true);
}

void CommitPool::Queue(Job job, bool count_out) {
  if (count_out) {
    absl::MutexLock lock(&done_mu_);
    started_.fetch_sub(1, std::memory_order_relaxed);
  }
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    jobs_.push_back(std::move(job));
    // An idle worker takes it (the unlock wakes one waiting on jobs_);
    // otherwise one more, so that no SET waits behind another's round.
    if (idle_ < jobs_.size() && threads_.size() < max_threads_) start = true;
  }
  if (start) {
    threads_.emplace_back([this] {
      NameThread("kv-commit");
      Work();
    });
  }
}

void CommitPool::TakeDone(std::vector<Done>* out) {
  out->clear();
  {
    absl::MutexLock lock(&done_mu_);
    out->swap(done_);
  }
  outstanding_ -= out->size();
}

void CommitPool::Work() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      ++idle_;
      mu_.Await(absl::Condition(
          +[](CommitPool* p)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->stop_ || !p->jobs_.empty(); },
          this));
      --idle_;
      // Queued jobs are finished even when stopping: each holds an entry
      // and a client waiting for its answer.
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (job.command) {
      std::string reply = job.command();
      Finished(std::move(job), absl::OkStatus(), std::move(reply), /*was_started=*/false);
      continue;
    }
    // The loop wrote and sealed the entry in its own reservation.
    absl::Status s = store_->CommitReserved(job.reservation);
    Finished(std::move(job), std::move(s), "", /*was_started=*/false);
  }
}

void CommitPool::Finished(Job job, absl::Status status, std::string reply, bool was_started) {
  const bool on_loop = LoopScope::Current() == this;
  if (on_loop) finished_on_loop_ = true;
  absl::MutexLock lock(&done_mu_);
  // Woken once per batch: while the loop has not taken the last one, it
  // will see this one with it. The loop's own thread needs no wake-up; a
  // later finisher on another thread then finds done_ not empty and writes
  // none either, which is right: the loop looks once its event is handled.
  if (done_.empty() && !on_loop) {
    uint64_t one = 1;
    // Under done_mu_: once a started commit is counted out, Stop() may
    // return and the loop close the fd.
    (void)!write(notify_fd_, &one, sizeof(one));
  }
  done_.push_back(Done{std::move(job), std::move(status), std::move(reply)});
  if (was_started) started_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
