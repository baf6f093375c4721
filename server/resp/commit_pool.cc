// Copyright 2026 The kvstore Authors.

#include "server/resp/commit_pool.h"

#include <unistd.h>

#include <utility>

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
}

void CommitPool::Submit(Job job) {
  ++outstanding_;
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    jobs_.push_back(std::move(job));
    // An idle worker takes it (the unlock wakes one waiting on jobs_);
    // otherwise one more, so that no SET waits behind another's round.
    if (idle_ < jobs_.size() && threads_.size() < max_threads_) start = true;
  }
  if (start) threads_.emplace_back([this] { Work(); });
}

std::vector<CommitPool::Done> CommitPool::TakeDone() {
  std::vector<Done> done;
  {
    absl::MutexLock lock(&mu_);
    done.swap(done_);
  }
  outstanding_ -= done.size();
  return done;
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
    // SealEntry() computed the checksum over these very bytes.
    absl::Status s =
        store_->Commit(job.reservation.offset, job.reservation.size, /*verify_checksum=*/false);
    bool wake;
    {
      absl::MutexLock lock(&mu_);
      wake = done_.empty();  // else the loop has not taken the last batch yet
      done_.push_back(Done{std::move(job), std::move(s)});
    }
    if (wake) {
      uint64_t one = 1;
      (void)!write(notify_fd_, &one, sizeof(one));
    }
  }
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
