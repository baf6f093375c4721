// Copyright 2026 The kvstore Authors.

#include "server/storage/expiry_queue.h"

#include <algorithm>

namespace kvstore {
namespace server {

namespace {

// std::push_heap builds a max-heap; this order puts the earliest on top.
bool Later(const ExpiryQueue::Record& a, const ExpiryQueue::Record& b) {
  return a.expires_at_ms > b.expires_at_ms;
}

}  // namespace

void ExpiryQueue::Push(const Record& r) {
  absl::MutexLock lock(&mu_);
  heap_.push_back(r);
  std::push_heap(heap_.begin(), heap_.end(), Later);
}

size_t ExpiryQueue::PopDue(int64_t now_ms, size_t max, std::vector<Record>* out) {
  out->clear();
  if (now_ms < 0) return 0;
  absl::MutexLock lock(&mu_);
  while (!heap_.empty() && out->size() < max &&
         heap_.front().expires_at_ms <= static_cast<uint64_t>(now_ms)) {
    std::pop_heap(heap_.begin(), heap_.end(), Later);
    out->push_back(heap_.back());
    heap_.pop_back();
  }
  // Give back the memory of a queue that drained after a burst.
  if (heap_.capacity() > 4096 && heap_.size() < heap_.capacity() / 4) heap_.shrink_to_fit();
  return out->size();
}

uint64_t ExpiryQueue::NextDueMs() const {
  absl::MutexLock lock(&mu_);
  return heap_.empty() ? 0 : heap_.front().expires_at_ms;
}

size_t ExpiryQueue::Compact(size_t threshold, absl::FunctionRef<bool(const Record&)> live) {
  absl::MutexLock lock(&mu_);
  if (heap_.size() <= threshold) return 0;
  const size_t before = heap_.size();
  heap_.erase(std::remove_if(heap_.begin(), heap_.end(), [&](const Record& r) { return !live(r); }),
              heap_.end());
  std::make_heap(heap_.begin(), heap_.end(), Later);
  heap_.shrink_to_fit();
  return before - heap_.size();
}

size_t ExpiryQueue::size() const {
  absl::MutexLock lock(&mu_);
  return heap_.size();
}

}  // namespace server
}  // namespace kvstore
