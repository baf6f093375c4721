// Copyright 2026 The kvstore Authors.
//
// ManualClock: a Clock for tests of code with timer threads (membership's
// keepalive and watchdog, the controller's poll). Its time moves only when
// the test calls Advance(), and a thread waiting in AwaitUntil() for a
// moment on Steady() wakes when an Advance() passes that moment, not
// before, whatever the load on the machine.
//
// Settled() lets a test step time without racing those threads: it is true
// once every thread that an Advance() woke by its deadline has done its work
// and waits in AwaitUntil() again (or has ended). Advance(), wait until
// Settled(), Advance() again: each timer fires at its moment, in order, as
// if time had passed for real on an idle machine. A thread that AwaitUntil
// returned to because its condition came true is not waited for (that is
// not the clock's doing); nor is the thread calling Settled().
//
// Steady() starts at 1 s (so that zero never looks like a deadline already
// reached), Wall() at 2023-11-14 22:13:20 UTC; both move together, except
// that StepWall() moves the wall clock alone.
//
// Thread safety: thread-safe. The clock must outlive the threads waiting on
// it; threads that merely used it may outlive it.

#ifndef KVSTORE_SERVER_STORAGE_MANUAL_CLOCK_H_
#define KVSTORE_SERVER_STORAGE_MANUAL_CLOCK_H_

#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {

class ManualClock final : public Clock {
 public:
  ManualClock();
  ~ManualClock() override;
  ManualClock(const ManualClock&) = delete;
  ManualClock& operator=(const ManualClock&) = delete;

  absl::Duration Steady() const override;
  absl::Time Wall() const override;
  // Returns when `cond` holds or an Advance() has moved Steady() to
  // `deadline` or past it.
  bool AwaitUntil(absl::Mutex* mu, const absl::Condition& cond,
                  absl::Duration deadline) const override;

  // Time goes by: both clocks move forward by `d` (>= 0), and every waiter
  // whose deadline is now reached is woken.
  void Advance(absl::Duration d);
  // The wall clock alone is set forward (or back, for negative `d`): an
  // NTP or operator step. Wakes nobody (waits are on Steady()).
  void StepWall(absl::Duration d);
  // See above. Poll it with a bounded wait (Eventually).
  bool Settled() const;
  // Threads inside AwaitUntil() right now, whatever their deadline.
  int Waiters() const;

  struct State;  // shared with the exit hooks of threads that used the clock

 private:
  const std::shared_ptr<State> state_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_MANUAL_CLOCK_H_
