// Copyright 2026 The kvstore Authors.

#include "server/storage/clock.h"

#include <time.h>

#include <chrono>

#include "absl/time/clock.h"

namespace kvstore {
namespace server {
namespace {

class RealClock final : public Clock {
 public:
  // CLOCK_BOOTTIME, not CLOCK_MONOTONIC (std::chrono::steady_clock): it
  // also counts the time the host was suspended, so a lease deadline taken
  // before a suspend has passed after it. (A hypervisor that stops a guest
  // without telling it can still stop both clocks; see docs.)
  absl::Duration Steady() const override {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return absl::DurationFromTimespec(ts);
  }
  int64_t SteadyNanos() const override {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  }
  absl::Time Wall() const override { return absl::Now(); }
  void Sleep(absl::Duration d) const override {
    if (d > absl::ZeroDuration()) absl::SleepFor(d);
  }
};

}  // namespace

bool Clock::AwaitUntil(absl::Mutex* mu, const absl::Condition& cond,
                       absl::Duration deadline) const {
  if (deadline == absl::InfiniteDuration()) {
    mu->Await(cond);
    return true;
  }
  return mu->AwaitWithTimeout(cond, deadline - Steady());
}

void Clock::Sleep(absl::Duration d) const {
  if (d <= absl::ZeroDuration()) return;
  // A wait for nothing but the deadline, so that a test clock (ManualClock)
  // wakes the sleeper when its time has come.
  absl::Mutex mu;
  const bool never = false;
  absl::MutexLock lock(&mu);
  AwaitUntil(&mu, absl::Condition(&never), Steady() + d);
}

const Clock& Clock::Real() {
  // Never destroyed: usable from any thread until the process exits.
  static const RealClock* const clock = new RealClock;
  return *clock;
}

}  // namespace server
}  // namespace kvstore
