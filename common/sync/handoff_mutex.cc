// Copyright 2026 The kvstore Authors.

#include "common/sync/handoff_mutex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kvstore {
namespace {

// The kernel compares the word with `expected` under its own lock and
// sleeps only while they are equal, so a release between our exchange and
// the sleep is never missed. Spurious returns (EINTR, EAGAIN) are fine: the
// caller looks at the word again.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

}  // namespace

void HandoffMutex::LockContended(uint32_t seen) {
  // A thread that serves while it waits takes the lock only when free
  // (TryLock), which a sleeper's protocol below allows: a sleeper woken to
  // find it taken marks it contended again and sleeps.
  if (ServeWhileWaiting::TakeServing([this] { return TryLock(); })) return;
  SleepUntilTaken(seen);
}

void HandoffMutex::SleepUntilTaken(uint32_t seen) {
  // From here on the word says "contended" whenever this thread may sleep,
  // so the holder's Unlock() wakes someone. Taking it with the exchange
  // leaves it contended even when no one else waits: one needless wake-up
  // at worst.
  if (seen != kContended) seen = state_.exchange(kContended, std::memory_order_acquire);
  while (seen != kFree) {
    FutexWait(&state_, kContended);
    seen = state_.exchange(kContended, std::memory_order_acquire);
  }
}

void HandoffMutex::WakeOne() {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
}

}  // namespace kvstore
