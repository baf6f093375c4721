// Copyright 2026 The kvstore Authors.

#include "common/rdma/initiator/slot_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace initiator {

namespace {
// Bits 0 .. size-1 set.
uint64_t AllOf(size_t size) {
  return size >= SlotPool::kMaxSize ? ~uint64_t{0} : (uint64_t{1} << size) - 1;
}
}  // namespace

SlotPool::SlotPool(int size)
    : size_(static_cast<size_t>(std::clamp(size, 0, kMaxSize))), free_(AllOf(size_)) {}

// The lowest `n` free slots, or none: one compare-and-swap takes them all,
// which is what keeps a batch from holding part of what it needs.
bool SlotPool::TryTake(size_t n, uint64_t* taken) {
  uint64_t m = free_.load(std::memory_order_seq_cst);
  while (static_cast<size_t>(__builtin_popcountll(m)) >= n) {
    uint64_t take = 0;
    uint64_t rest = m;
    for (size_t i = 0; i < n; ++i) {
      take |= rest & (~rest + 1);  // the lowest set bit
      rest &= rest - 1;
    }
    // seq_cst: pairs with Give()'s, see there.
    if (free_.compare_exchange_weak(m, m & ~take, std::memory_order_seq_cst)) {
      *taken = take;
      return true;
    }
  }
  return false;
}

void SlotPool::WakeWaiters() {
  absl::MutexLock lock(&mu_);
  // All: a waiter for several slots may be behind one that wants fewer.
  released_.SignalAll();
}

absl::StatusOr<uint64_t> SlotPool::Take(size_t n, absl::Time deadline) {
  uint64_t taken = 0;
  if (TryTake(n, &taken)) return taken;
  absl::MutexLock lock(&mu_);
  waiting_.fetch_add(1, std::memory_order_seq_cst);
  bool got = TryTake(n, &taken);
  while (!got) {
    const bool timed_out = released_.WaitWithDeadline(&mu_, deadline);
    got = TryTake(n, &taken);
    if (timed_out) break;
  }
  waiting_.fetch_sub(1, std::memory_order_seq_cst);
  if (!got) {
    return absl::DeadlineExceededError(
        absl::StrCat("no ", n, " free RDMA operation slot(s) before the deadline (", size_,
                     " per connection, all in use)"));
  }
  return taken;
}

absl::StatusOr<std::vector<int>> SlotPool::Acquire(size_t n, absl::Time deadline) {
  if (n == 0 || n > size_) {
    return absl::InvalidArgumentError(absl::StrCat("asked for ", n, " operation slots of ", size_));
  }
  absl::StatusOr<uint64_t> taken = Take(n, deadline);
  if (!taken.ok()) return taken.status();
  std::vector<int> out;
  out.reserve(n);
  for (uint64_t m = *taken; m != 0; m &= m - 1) out.push_back(__builtin_ctzll(m));
  return out;
}

absl::StatusOr<int> SlotPool::AcquireOneSlow(absl::Time deadline) {
  if (size_ == 0) return absl::InvalidArgumentError("asked for 1 operation slot of 0");
  absl::StatusOr<uint64_t> taken = Take(1, deadline);
  if (!taken.ok()) return taken.status();
  return __builtin_ctzll(*taken);
}

void SlotPool::Release(const std::vector<int>& slots) {
  uint64_t bits = 0;
  for (int s : slots) bits |= uint64_t{1} << s;
  Give(bits);
}

size_t SlotPool::free() const {
  return static_cast<size_t>(__builtin_popcountll(free_.load(std::memory_order_relaxed)));
}

size_t SlotPool::waiting() const { return waiting_.load(std::memory_order_relaxed); }

}  // namespace initiator
}  // namespace kvstore
