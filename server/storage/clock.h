// Copyright 2026 The kvstore Authors.
//
// Clock: the server's two time sources, behind one interface so that tests
// can move either of them.
//
//   * Steady(): monotonic time since an arbitrary origin (the real clock:
//     CLOCK_BOOTTIME, which keeps counting while the host is suspended, so
//     a deadline on it has passed when the host resumes). Every timer and deadline of the storage
//     layer is measured on it: the grace period before a segment is reused, lease expiry. A step of
//     the wall clock (NTP, an operator, a resumed VM) must neither free a segment a slow one-sided
//     READ may still be reading nor end a lease early or keep it alive.
//   * Wall(): absl::Now(), only for what is reported to people and clients
//     (a lease's expires_unix_ms, log lines).
//   * AwaitUntil(): a thread's timed wait on the steady clock (a keepalive
//     period, a watchdog deadline, a poll interval). Timer threads wait
//     through the clock, so that a test clock decides when they wake.
//   * Sleep(): waits on the steady clock (through AwaitUntil() unless a
//     clock says otherwise). Code that waits for a moment on Steady() to
//     come (a writer held back until a segment's grace period ends) sleeps
//     through the clock, so that a test clock decides when it returns.
//
// Thread safety: implementations are thread-safe. Real() lives for the whole
// process.

#ifndef KVSTORE_SERVER_STORAGE_CLOCK_H_
#define KVSTORE_SERVER_STORAGE_CLOCK_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvstore {
namespace server {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic: never goes back, and unaffected by changes to the wall clock.
  virtual absl::Duration Steady() const = 0;
  // Steady() in whole nanoseconds, for a caller that does integer
  // arithmetic on it (a per-request latency). This default converts.
  virtual int64_t SteadyNanos() const { return absl::ToInt64Nanoseconds(Steady()); }
  // The wall clock, for reporting only.
  virtual absl::Time Wall() const = 0;
  // Returns once Steady() has advanced by at least `d` (at once for
  // d <= 0). This default waits in AwaitUntil() for Steady() + d.
  virtual void Sleep(absl::Duration d) const;
  // With `mu` held: waits until `cond` holds or Steady() reaches `deadline`
  // (a moment on Steady(); absl::InfiniteDuration(): no deadline), and
  // returns with `mu` held and whether `cond` holds. As with
  // Mutex::AwaitWithTimeout, `cond` must only read state guarded by `mu`.
  // This default waits in real time for `deadline - Steady()`: right for
  // the real clock, and for any clock whose Steady() follows real time.
  virtual bool AwaitUntil(absl::Mutex* mu, const absl::Condition& cond,
                          absl::Duration deadline) const;

  // The process's real clocks (CLOCK_BOOTTIME and absl::Now();
  // Sleep() is absl::SleepFor()).
  static const Clock& Real();
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_CLOCK_H_
