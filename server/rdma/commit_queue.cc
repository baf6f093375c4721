// Copyright 2026 The kvstore Authors.

#include "server/rdma/commit_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sync/thread_name.h"

namespace kvstore {
namespace server {

CommitQueue::CommitQueue(std::string name, int threads) : name_(std::move(name)) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      NameThread("kv-rdma-commit");
      WorkerLoop();
    });
  }
}

CommitQueue::~CommitQueue() { Stop(); }

absl::Status CommitQueue::Push(uint64_t lane, uint32_t capacity, Job job) {
  absl::MutexLock lock(&mu_);
  if (stop_) return absl::CancelledError(absl::StrCat(name_, " commit queue is stopping"));
  Lane& l = lanes_[lane];
  if (l.jobs.size() >= std::max<uint32_t>(capacity, 1)) {
    // The lane exists already (it is full), so nothing to clean up.
    return absl::ResourceExhaustedError(
        absl::StrCat("more unanswered commits than the connection's ", capacity,
                     " commit credits (", name_, " commit queue)"));
  }
  l.jobs.push_back(std::move(job));
  ++waiting_total_;
  // First job of an idle lane: it joins the line.
  if (!l.running && l.jobs.size() == 1) ready_.push_back(lane);
  return absl::OkStatus();
}

void CommitQueue::Forget(uint64_t lane) {
  std::deque<Job> dropped;  // destroyed outside the lock
  absl::MutexLock lock(&mu_);
  auto it = lanes_.find(lane);
  if (it == lanes_.end()) return;
  waiting_total_ -= it->second.jobs.size();
  dropped.swap(it->second.jobs);
  if (it->second.running) return;  // the worker erases it when done
  lanes_.erase(it);
  ready_.erase(std::remove(ready_.begin(), ready_.end(), lane), ready_.end());
}

void CommitQueue::Stop() {
  absl::MutexLock stop_lock(&stop_mu_);
  absl::flat_hash_map<uint64_t, Lane> dropped;  // destroyed outside mu_
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    // A worker running a job finds its lane gone when done, and returns.
    dropped.swap(lanes_);
    ready_.clear();
    waiting_total_ = 0;
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

size_t CommitQueue::waiting(uint64_t lane) const {
  absl::MutexLock lock(&mu_);
  auto it = lanes_.find(lane);
  return it == lanes_.end() ? 0 : it->second.jobs.size();
}

bool CommitQueue::idle(uint64_t lane) const {
  absl::MutexLock lock(&mu_);
  // A lane is in lanes_ exactly while it holds or runs a job.
  return !lanes_.contains(lane);
}

size_t CommitQueue::waiting_total() const {
  absl::MutexLock lock(&mu_);
  return waiting_total_;
}

void CommitQueue::WorkerLoop() {
  for (;;) {
    Job job;
    uint64_t lane = 0;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &CommitQueue::HasWork));
      if (stop_) return;
      lane = ready_.front();
      ready_.pop_front();
      Lane& l = lanes_[lane];
      job = std::move(l.jobs.front());
      l.jobs.pop_front();
      --waiting_total_;
      l.running = true;
    }
    job();
    job = nullptr;  // its captures go before the lane is offered again
    absl::MutexLock lock(&mu_);
    auto it = lanes_.find(lane);
    if (it == lanes_.end()) continue;  // Stop() emptied it meanwhile
    it->second.running = false;
    if (it->second.jobs.empty()) {
      lanes_.erase(it);
    } else {
      ready_.push_back(lane);  // to the back: the other lanes go first
    }
  }
}

}  // namespace server
}  // namespace kvstore
