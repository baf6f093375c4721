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
// forbids. These keep their state in a flag guarded by an absl::Mutex held
// only for the moment of taking or releasing, so any thread may do either.
//
// Cost: one uncontended absl::Mutex lock/unlock per operation; a waiter
// sleeps in absl::Mutex::Await. No deadlock detection covers them (absl's
// sees only the inner mutex, never held while waiting for the lock itself).
//
// Thread safety: every member is thread-safe. Releasing a lock that is not
// held is a bug (checked in debug builds).

#ifndef KVSTORE_COMMON_SYNC_HANDOFF_MUTEX_H_
#define KVSTORE_COMMON_SYNC_HANDOFF_MUTEX_H_

#include <cassert>

#include "absl/synchronization/mutex.h"

namespace kvstore {

// An exclusive lock.
class HandoffMutex {
 public:
  HandoffMutex() = default;
  HandoffMutex(const HandoffMutex&) = delete;
  HandoffMutex& operator=(const HandoffMutex&) = delete;

  void Lock() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &HandoffMutex::FreeLocked));
    held_ = true;
  }
  // Takes the lock if it is free; never waits.
  bool TryLock() {
    absl::MutexLock lock(&mu_);
    if (held_) return false;
    held_ = true;
    return true;
  }
  // REQUIRES: held (by any thread).
  void Unlock() {
    absl::MutexLock lock(&mu_);
    assert(held_);
    held_ = false;
  }

 private:
  bool FreeLocked() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return !held_; }

  absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
};

// A reader/writer lock. A waiting writer keeps new readers out, so a steady
// stream of writes (the readers) cannot starve a barrier (the writer).
// Readers must therefore never take it twice on one thread.
class HandoffSharedMutex {
 public:
  HandoffSharedMutex() = default;
  HandoffSharedMutex(const HandoffSharedMutex&) = delete;
  HandoffSharedMutex& operator=(const HandoffSharedMutex&) = delete;

  void ReaderLock() {
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
