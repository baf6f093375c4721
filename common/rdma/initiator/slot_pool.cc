// Copyright 2026 The kvstore Authors.

#include "common/rdma/initiator/slot_pool.h"

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace initiator {

SlotPool::SlotPool(int size) : size_(size > 0 ? size : 0) {
  for (int i = 0; i < size; ++i) free_.push_back(i);
}

absl::StatusOr<std::vector<int>> SlotPool::Acquire(size_t n, absl::Time deadline) {
  if (n == 0 || n > size_) {
    return absl::InvalidArgumentError(absl::StrCat("asked for ", n, " operation slots of ", size_));
  }
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return free_.size() >= n; };
  ++waiting_;
  const bool got = mu_.AwaitWithDeadline(absl::Condition(&enough), deadline);
  --waiting_;
  if (!got) {
    return absl::DeadlineExceededError(
        absl::StrCat("no ", n, " free RDMA operation slot(s) before the deadline (", size_,
                     " per connection, all in use)"));
  }
  std::vector<int> out(free_.end() - n, free_.end());
  free_.resize(free_.size() - n);
  return out;
}

absl::StatusOr<int> SlotPool::AcquireOne(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (free_.empty()) {
    auto any = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !free_.empty(); };
    ++waiting_;
    const bool got = mu_.AwaitWithDeadline(absl::Condition(&any), deadline);
    --waiting_;
    if (!got) {
      return absl::DeadlineExceededError(
          absl::StrCat("no free RDMA operation slot before the deadline (", size_,
                       " per connection, all in use)"));
    }
  }
  const int slot = free_.back();
  free_.pop_back();
  return slot;
}

void SlotPool::ReleaseOne(int slot) {
  absl::MutexLock lock(&mu_);
  free_.push_back(slot);
}

void SlotPool::Release(const std::vector<int>& slots) {
  absl::MutexLock lock(&mu_);
  free_.insert(free_.end(), slots.begin(), slots.end());
}

size_t SlotPool::free() const {
  absl::MutexLock lock(&mu_);
  return free_.size();
}

size_t SlotPool::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

}  // namespace initiator
}  // namespace kvstore
