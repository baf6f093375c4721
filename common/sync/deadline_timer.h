// Copyright 2026 The kvstore Authors.
//
// DeadlineTimer: runs a callback when its deadline (real time) passes,
// unless it was cancelled first. For work started without a thread that
// waits for it (a replicated write started by Replicator::StartWrite),
// which still needs someone to give up on it at its deadline.
//
// One thread of its own runs every callback in deadline order, after the
// deadline; a callback must not block for long (it delays the next).
//
// Thread safety: thread-safe. Cancel() returns false once the callback has
// started (it may still be running). The destructor drops the callbacks not
// yet due and joins the thread.

#ifndef KVSTORE_COMMON_SYNC_DEADLINE_TIMER_H_
#define KVSTORE_COMMON_SYNC_DEADLINE_TIMER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvstore {

class DeadlineTimer {
 public:
  using Id = std::pair<absl::Time, uint64_t>;

  DeadlineTimer();
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Runs `fn` on the timer's thread once `deadline` has passed.
  Id Add(absl::Time deadline, std::function<void()> fn);
  // Forgets `id`'s callback; false if it already ran or started.
  bool Cancel(const Id& id);

 private:
  void Run();

  absl::Mutex mu_;
  std::map<Id, std::function<void()>> due_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  // The earliest deadline the thread is sleeping towards; an Add() of an
  // earlier one wakes it.
  absl::Time sleeping_until_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kvstore

#endif  // KVSTORE_COMMON_SYNC_DEADLINE_TIMER_H_
