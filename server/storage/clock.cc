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

const Clock& Clock::Real() {
  // Never destroyed: usable from any thread until the process exits.
  static const RealClock* const clock = new RealClock;
  return *clock;
}

}  // namespace server
}  // namespace kvstore
