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

const Clock& Clock::Real() {
  // Never destroyed: usable from any thread until the process exits.
  static const RealClock* const clock = new RealClock;
  return *clock;
}

}  // namespace server
}  // namespace kvstore
