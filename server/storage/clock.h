// Copyright 2026 The kvstore Authors.
//
// Clock: the server's two time sources, behind one interface so that tests
// can move either of them.
//
//   * Steady(): monotonic time (std::chrono::steady_clock) since an arbitrary
//     origin. Every timer and deadline of the storage layer is measured on
//     it: the grace period before a segment is reused, lease expiry. A step
//     of the wall clock (NTP, an operator, a resumed VM) must neither free a
//     segment a slow one-sided READ may still be reading nor end a lease
//     early or keep it alive.
//   * Wall(): absl::Now(), only for what is reported to people and clients
//     (a lease's expires_unix_ms, log lines).
//   * Sleep(): waits on the steady clock. Code that waits for a time on
//     Steady() to come (a writer held back until a segment's grace period
//     ends) sleeps through the clock, so that a fake clock, which moves
//     when slept on, never holds it back in real time.
//
// Thread safety: implementations are thread-safe. Real() lives for the whole
// process.

#ifndef KVSTORE_SERVER_STORAGE_CLOCK_H_
#define KVSTORE_SERVER_STORAGE_CLOCK_H_

#include "absl/time/time.h"

namespace kvstore {
namespace server {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic: never goes back, and unaffected by changes to the wall clock.
  virtual absl::Duration Steady() const = 0;
  // The wall clock, for reporting only.
  virtual absl::Time Wall() const = 0;
  // Returns once Steady() has advanced by at least `d` (at once for d <= 0).
  virtual void Sleep(absl::Duration d) const = 0;

  // The process's real clocks (std::chrono::steady_clock and absl::Now();
  // Sleep() is absl::SleepFor()).
  static const Clock& Real();
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_CLOCK_H_
