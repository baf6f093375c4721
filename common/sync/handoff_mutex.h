// Copyright 2026 The kvstore Authors.
//
// HandoffMutex and HandoffSharedMutex: locks that one thread may take and
// another release.
//
// Why: a replicated write holds its key's locks and its shard's barrier from
// the moment it takes its seq until it is published. When the write runs as
// a callback chain (the RESP loop starts it, the replication stream's reply
// finishes it on a gRPC thread: Replicator::StartWrite), the thread that
// releases the locks is not the one that took them, which absl::Mutex
// forbids. These keep their state in a word (HandoffMutex) or in counters
// guarded by an absl::Mutex held only for the moment of taking or releasing
// (HandoffSharedMutex), so any thread may do either.
//
// Cost: HandoffMutex is one atomic operation to take or release when
// uncontended (a waiter sleeps on a futex); HandoffSharedMutex one
// uncontended absl::Mutex lock/unlock per operation (a waiter sleeps in
// absl::Mutex::Await). No deadlock detection covers them (absl's sees only
// the shared lock's inner mutex, never held while waiting for the lock).
//
// Waiting on an event loop: a lock's holder may need the waiting thread to
// finish (a replicated write holds its key's locks until its backup's reply
// is read, and a RESP loop may be the one that reads it). Such a thread
// installs a LockWaitService (ServeWhileWaiting): instead of sleeping, a
// Lock() or ReaderLock() it makes retries the lock and does the service's
// work in between, so the holder can finish.
//
// Thread safety: every member is thread-safe. Releasing a lock that is not
// held is a bug (checked in debug builds).

#ifndef KVSTORE_COMMON_SYNC_HANDOFF_MUTEX_H_
#define KVSTORE_COMMON_SYNC_HANDOFF_MUTEX_H_

#include <atomic>
#include <cassert>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvstore {

// What a thread does instead of sleeping on a contended handoff lock.
class LockWaitService {
 public:
  virtual ~LockWaitService() = default;
  // Does the work the thread owes others (for a RESP loop: reads the
  // replies its watches are lent), waiting at most `wait` for some to
  // arrive. Runs on the waiting thread, which may hold other handoff locks
  // (never an absl::Mutex a holder needs). A lock wait inside it sleeps
  // normally: the service is not entered again while it runs.
  virtual void ServeFor(absl::Duration wait) = 0;
};

// Installs `service` (not owned; may be null: plain sleeping) for the
// calling thread until destroyed, which restores the one before.
class ServeWhileWaiting {
 public:
  explicit ServeWhileWaiting(LockWaitService* service) : before_(Slot()) { Slot() = service; }
  ~ServeWhileWaiting() { Slot() = before_; }
  ServeWhileWaiting(const ServeWhileWaiting&) = delete;
  ServeWhileWaiting& operator=(const ServeWhileWaiting&) = delete;

  // Runs `try_take` until it succeeds. With a service on this thread (and
  // not inside it) the service is served between tries and true is
  // returned once taken; otherwise false at once, without trying: the
  // caller sleeps its usual way.
  template <typename TryTake>
  static bool TakeServing(TryTake try_take) {
    LockWaitService* service = Slot();
    if (service == nullptr) return false;
    Slot() = nullptr;  // a wait inside the service sleeps
    while (!try_take()) service->ServeFor(kServeSlice);
    Slot() = service;
    return true;
  }

 private:
  // How long one ServeFor() may wait before the lock is tried again: short,
  // because a holder that does not need this thread releases it without
  // telling the service.
  static constexpr absl::Duration kServeSlice = absl::Milliseconds(1);

  static LockWaitService*& Slot() {
    static thread_local LockWaitService* service = nullptr;
    return service;
  }
  LockWaitService* const before_;
};

// An exclusive lock: one 32-bit word.
//
// Why a word and not an absl::Mutex: the key stripes (server/storage/
// key_locks.h, the replicator's) are arrays of 65536 of these, and a
// replicated SET takes one in each. Measured (perf, 4 KiB SETs at R=2): the
// cost of a stripe is the cache miss of its first touch; at 16 bytes (an
// absl::Mutex and a flag) two 1 MiB arrays missed on most writes, and each
// take and release was two atomic read-modify-writes. At 4 bytes they are
// 256 KiB each, and a take or a release is one.
//
// How: the futex protocol of Drepper's "Futexes Are Tricky" (the mutex with
// a contended state): 0 free, 1 held, 2 held and perhaps waited for. Only
// a release that finds 2 makes a system call, to wake one waiter.
class HandoffMutex {
 public:
  HandoffMutex() = default;
  HandoffMutex(const HandoffMutex&) = delete;
  HandoffMutex& operator=(const HandoffMutex&) = delete;

  void Lock() {
    uint32_t seen;
    if (!TryTake(&seen)) LockContended(seen);
  }
  // Lock(), but a contended wait always sleeps, never serving the thread's
  // LockWaitService: for locks held only for a few instructions, by holders
  // that never need the waiting thread, and that a service's work could take
  // again (a held one would then deadlock the thread on itself).
  void LockPlain() {
    uint32_t seen;
    if (!TryTake(&seen)) SleepUntilTaken(seen);
  }
  // Takes the lock if it is free; never waits.
  bool TryLock() {
    uint32_t seen;
    return TryTake(&seen);
  }
  // REQUIRES: held (by any thread).
  void Unlock() {
    const uint32_t was = state_.exchange(kFree, std::memory_order_release);
    assert(was != kFree);
    if (was == kContended) WakeOne();
  }

 private:
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kHeld = 1;
  static constexpr uint32_t kContended = 2;
  // The uncontended take: free to held. On failure `*seen` is the state
  // found.
  bool TryTake(uint32_t* seen) {
    *seen = kFree;
    return state_.compare_exchange_strong(*seen, kHeld, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  // Marks the lock contended and sleeps until it is free; `seen` is the
  // state the fast path found.
  void LockContended(uint32_t seen);
  // The futex wait of LockContended, without the service.
  void SleepUntilTaken(uint32_t seen);
  void WakeOne();

  std::atomic<uint32_t> state_{kFree};
};
static_assert(sizeof(HandoffMutex) == 4, "the stripe arrays count on a word per lock");

// A reader/writer lock. A waiting writer keeps new readers out, so a steady
// stream of writes (the readers) cannot starve a barrier (the writer).
// Readers must therefore never take it twice on one thread.
class HandoffSharedMutex {
 public:
  HandoffSharedMutex() = default;
  HandoffSharedMutex(const HandoffSharedMutex&) = delete;
  HandoffSharedMutex& operator=(const HandoffSharedMutex&) = delete;

  void ReaderLock() {
    if (ServeWhileWaiting::TakeServing([this] { return TryReaderLock(); })) return;
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &HandoffSharedMutex::ReaderMayEnterLocked));
    ++readers_;
  }
  // Takes a reader's share if no writer holds or awaits the lock.
  bool TryReaderLock() {
    absl::MutexLock lock(&mu_);
    if (!ReaderMayEnterLocked()) return false;
    ++readers_;
    return true;
  }
  void ReaderUnlock() {
    absl::MutexLock lock(&mu_);
    assert(readers_ > 0);
    --readers_;
  }
  void Lock() {
    absl::MutexLock lock(&mu_);
    ++writers_waiting_;
    mu_.Await(absl::Condition(this, &HandoffSharedMutex::WriterMayEnterLocked));
    --writers_waiting_;
    writer_ = true;
  }
  void Unlock() {
    absl::MutexLock lock(&mu_);
    assert(writer_);
    writer_ = false;
  }

 private:
  bool ReaderMayEnterLocked() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !writer_ && writers_waiting_ == 0;
  }
  bool WriterMayEnterLocked() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !writer_ && readers_ == 0;
  }

  absl::Mutex mu_;
  int readers_ ABSL_GUARDED_BY(mu_) = 0;
  int writers_waiting_ ABSL_GUARDED_BY(mu_) = 0;
  bool writer_ ABSL_GUARDED_BY(mu_) = false;
};

// Scoped holders, for code that takes and releases on one thread.
class HandoffLock {
 public:
  explicit HandoffLock(HandoffMutex* mu) : mu_(mu) { mu_->Lock(); }
  ~HandoffLock() { mu_->Unlock(); }
  HandoffLock(const HandoffLock&) = delete;
  HandoffLock& operator=(const HandoffLock&) = delete;

 private:
  HandoffMutex* const mu_;
};

class HandoffReaderLock {
 public:
  explicit HandoffReaderLock(HandoffSharedMutex* mu) : mu_(mu) { mu_->ReaderLock(); }
  ~HandoffReaderLock() { mu_->ReaderUnlock(); }
  HandoffReaderLock(const HandoffReaderLock&) = delete;
  HandoffReaderLock& operator=(const HandoffReaderLock&) = delete;

 private:
  HandoffSharedMutex* const mu_;
};

class HandoffWriterLock {
 public:
  explicit HandoffWriterLock(HandoffSharedMutex* mu) : mu_(mu) { mu_->Lock(); }
  ~HandoffWriterLock() { mu_->Unlock(); }
  HandoffWriterLock(const HandoffWriterLock&) = delete;
  HandoffWriterLock& operator=(const HandoffWriterLock&) = delete;

 private:
  HandoffSharedMutex* const mu_;
};

}  // namespace kvstore

#endif  // KVSTORE_COMMON_SYNC_HANDOFF_MUTEX_H_
