// Copyright 2026 The kvstore Authors.
//
// SlotPool: the free list of an RDMA path's operation slots (OpEngine), as
// plain indices, so that its waiting rules can be tested without a device.
//
// Rules that keep a path from deadlocking on its own slots:
//   * a batch takes all the slots it needs at once, never one by one (two
//     batches each holding part of what they need would wait on each other);
//   * every wait has a deadline: Acquire() gives up with kDeadlineExceeded
//     instead of blocking forever;
//   * a caller never acquires while it holds slots (callers reuse the slots
//     they hold; see RdmaReader::MultiGetBatch and RdmaWriter::MultiPutBatch).
//     With 64 slots, four threads each holding 16 and waiting for one more
//     used to hang for good.
//
// How: the free slots are the set bits of one 64-bit word, so taking and
// giving back are one atomic operation each, with no lock (the single-key
// GET takes and gives back a slot on every call, and a mutex pair was a
// visible share of its client-side cost). Only a caller that has to wait
// takes the mutex, to sleep on its condition variable.
//
// Thread safety: thread-safe.

#ifndef KVSTORE_COMMON_RDMA_INITIATOR_SLOT_POOL_H_
#define KVSTORE_COMMON_RDMA_INITIATOR_SLOT_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvstore {
namespace initiator {

class SlotPool {
 public:
  // The most slots a pool holds (one bit each in one word).
  static constexpr int kMaxSize = 64;

  // Slots 0 .. size-1, all free. `size` is clamped to [0, kMaxSize].
  explicit SlotPool(int size);
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // `n` free slot indices, taken together once that many are free.
  // kInvalidArgument if n is 0 or more than the pool holds (it could never
  // be satisfied); kDeadlineExceeded if they are not free by `deadline`.
  absl::StatusOr<std::vector<int>> Acquire(size_t n, absl::Time deadline);
  // Gives back slots taken by Acquire().
  void Release(const std::vector<int>& slots);
  // Acquire(1) and Release() of one slot without the vectors: the
  // single-key GET and PUT take one slot per call. Inline, with the waiting
  // out of line: a GET that finds a slot free costs one compare-and-swap
  // (callgrind: the out-of-line layers of StatusOr cost more than the swap).
  absl::StatusOr<int> AcquireOne(absl::Time deadline) {
    int slot;
    if (TryAcquireOne(&slot)) return slot;
    return AcquireOneSlow(deadline);
  }
  // AcquireOne() without waiting: true, and *slot set, if one was free.
  bool TryAcquireOne(int* slot) {
    uint64_t m = free_.load(std::memory_order_seq_cst);
    while (m != 0) {
      // The lowest free slot. seq_cst: pairs with Give()'s, see there.
      if (free_.compare_exchange_weak(m, m & (m - 1), std::memory_order_seq_cst)) {
        *slot = __builtin_ctzll(m);
        return true;
      }
    }
    return false;
  }
  void ReleaseOne(int slot) { Give(uint64_t{1} << slot); }
  // Slots free right now (a snapshot, for tests).
  size_t free() const;
  // Callers blocked in Acquire() or AcquireOne() right now (a snapshot, so
  // that a test can release slots once a waiter is known to wait).
  size_t waiting() const;

 private:
  bool TryTake(size_t n, uint64_t* taken);
  // `n` slots as bits, waiting for them until `deadline`.
  absl::StatusOr<uint64_t> Take(size_t n, absl::Time deadline);
  absl::StatusOr<int> AcquireOneSlow(absl::Time deadline);
  // The slots come back before the waiters are looked at, and a waiter
  // counts itself before it looks at the slots (both seq_cst): so either
  // the waiter sees these slots, or this sees the waiter and wakes it under
  // mu_, which the waiter holds until it sleeps. No wake-up is lost.
  void Give(uint64_t bits) {
    free_.fetch_or(bits, std::memory_order_seq_cst);
    if (waiting_.load(std::memory_order_seq_cst) != 0) WakeWaiters();
  }
  void WakeWaiters();

  const size_t size_;
  // Bit i set: slot i is free.
  std::atomic<uint64_t> free_;
  // Callers in Take()'s slow path; Give() wakes them only when there are any.
  std::atomic<size_t> waiting_{0};
  absl::Mutex mu_;
  absl::CondVar released_;
};

}  // namespace initiator
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_INITIATOR_SLOT_POOL_H_
