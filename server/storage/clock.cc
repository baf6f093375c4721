// Copyright 2026 The kvstore Authors.

#include "server/storage/clock.h"

#include <chrono>

#include "absl/time/clock.h"

namespace kvstore {
namespace server {
namespace {

class RealClock final : public Clock {
 public:
  absl::Duration Steady() const override {
    return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
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
