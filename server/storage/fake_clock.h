// Copyright 2026 The kvstore Authors.
//
// FakeClock: a Clock for tests that moves only when told. Advance() moves
// both clocks (time goes by), StepWall() moves the wall clock alone (a clock
// step by NTP or an operator), and Sleep() advances the steady clock by the
// time slept, so code that waits on the clock (a writer held back until a
// grace period ends) returns at once having "waited" exactly that long.
// Timers of the storage layer (grace periods, lease expiry) then end exactly
// when the test says, whatever the load on the machine.
//
// For code that waits by Sleep() or reads Steady() (KvStore, LeaseTable, the
// RESP loops). Timer threads that wait in AwaitUntil() (membership, the
// controller) want ManualClock, which wakes them as the test advances it;
// here AwaitUntil() keeps the default (a real-time wait).
//
// Steady() starts at 1 s (not zero, so "zero" never looks like a deadline
// already reached), Wall() at 2023-11-14 22:13:20 UTC.
//
// Thread safety: thread-safe (atomics); any thread may read or move it.

#ifndef KVSTORE_SERVER_STORAGE_FAKE_CLOCK_H_
#define KVSTORE_SERVER_STORAGE_FAKE_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {

class FakeClock final : public Clock {
 public:
  absl::Duration Steady() const override { return absl::Nanoseconds(steady_ns_.load()); }
  absl::Time Wall() const override { return absl::FromUnixNanos(kWallStartNs + wall_ns_.load()); }
  void Sleep(absl::Duration d) const override {
    if (d > absl::ZeroDuration()) Advance(d);
  }

  // Time goes by: both clocks move forward by `d`.
  void Advance(absl::Duration d) const {
    steady_ns_ += absl::ToInt64Nanoseconds(d);
    wall_ns_ += absl::ToInt64Nanoseconds(d);
  }
  // The wall clock alone is set forward (or back, for negative `d`).
  void StepWall(absl::Duration d) { wall_ns_ += absl::ToInt64Nanoseconds(d); }

 private:
  static constexpr int64_t kWallStartNs = 1700000000ll * 1000000000;
  // mutable: Sleep() is const in Clock (the real clock's has no state) and
  // moves a fake clock.
  mutable std::atomic<int64_t> steady_ns_{1000000000};
  mutable std::atomic<int64_t> wall_ns_{0};
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_FAKE_CLOCK_H_
