// Copyright 2026 The kvstore Authors.
//
// DelayedAnswers: runs answers (callbacks) once their delay has passed, on
// one thread of its own, with a bound on how many wait at once.
//
// Why: a gRPC call refused for a missing or unknown credential costs the
// server little, but a client that starts the next call as soon as it is
// refused makes thousands a second, and on a small machine that alone
// slows every authenticated client. Holding each such refusal back for a
// fraction of a second (as login services do) caps what one client gets
// out of the server per second at (its concurrent calls) / (the delay);
// the callers here are gRPC's auth metadata callbacks, which may be
// answered from any thread.
//
// The bound keeps the memory held by waiting answers fixed: beyond
// `max_pending`, RunLater() refuses and the caller answers at once.
//
// Ownership: the object owns its thread. The destructor runs every answer
// still waiting (at once, on the destroying thread) and joins the thread;
// it must not run on that thread (an answer must not destroy this object).
//
// Thread safety: thread-safe.

#ifndef KVSTORE_COMMON_AUTH_DELAYED_ANSWERS_H_
#define KVSTORE_COMMON_AUTH_DELAYED_ANSWERS_H_

#include <cstddef>
#include <functional>
#include <queue>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvstore {
namespace auth {

class DelayedAnswers {
 public:
  // `max_pending` >= 1.
  explicit DelayedAnswers(size_t max_pending);
  ~DelayedAnswers();
  DelayedAnswers(const DelayedAnswers&) = delete;
  DelayedAnswers& operator=(const DelayedAnswers&) = delete;

  // Runs `answer` on this object's thread once `delay` (> 0) has passed;
  // answers due at the same time run in the order of their deadlines. False
  // (and `answer` is not kept) when `max_pending` answers already wait or
  // after Stop(): the caller answers itself.
  bool RunLater(absl::Duration delay, std::function<void()> answer);

  // Runs every waiting answer now (on the calling thread), after the one
  // the thread may be running has returned; RunLater() returns false from
  // now on, so when Stop() returns no answer runs or will run. Idempotent.
  // Not from inside an answer.
  void Stop();

  // Answers waiting now.
  size_t pending() const;

 private:
  struct Entry {
    absl::Time due;
    uint64_t order;  // ties: first in, first out
    std::function<void()> answer;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.due != b.due ? a.due > b.due : a.order > b.order;
    }
  };

  void Loop();
  // Takes every waiting answer out (under the lock).
  std::vector<std::function<void()>> TakeAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_pending_;
  mutable absl::Mutex mu_;
  std::priority_queue<Entry, std::vector<Entry>, Later> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // the thread is inside an answer
  std::thread thread_;
};

}  // namespace auth
}  // namespace kvstore

#endif  // KVSTORE_COMMON_AUTH_DELAYED_ANSWERS_H_
