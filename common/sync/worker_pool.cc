// Copyright 2026 The kvstore Authors.

#include "common/sync/worker_pool.h"

#include <utility>

#include "common/sync/thread_name.h"

namespace kvstore {

WorkerPool::WorkerPool(size_t max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}

WorkerPool::~WorkerPool() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void WorkerPool::Submit(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back(std::move(job));
  // An idle worker takes it (the unlock wakes one waiting on jobs_);
  // otherwise one more starts, so that no job waits behind another's wait.
  if (idle_ < jobs_.size() && threads_.size() < max_threads_) {
    threads_.emplace_back([this] {
      NameThread("kv-worker");
      Work();
    });
  }
}

void WorkerPool::Work() {
  for (;;) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      ++idle_;
      mu_.Await(absl::Condition(
          +[](WorkerPool* p)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->stop_ || !p->jobs_.empty(); },
          this));
      --idle_;
      if (jobs_.empty()) return;  // stopping, and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace kvstore
