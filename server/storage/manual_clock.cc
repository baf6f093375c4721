// Copyright 2026 The kvstore Authors.

#include "server/storage/manual_clock.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

namespace kvstore {
namespace server {
namespace {

constexpr int64_t kWallStartNs = 1700000000ll * 1000000000;

// A waiter re-checks its deadline this often in real time. Advance() wakes
// waiters at once; this only bounds the rare wake-up it cannot deliver (the
// waiter held its mutex at that instant, between checking and sleeping).
constexpr absl::Duration kRecheck = absl::Milliseconds(10);

}  // namespace

struct ManualClock::State {
  struct Waiter {
    absl::Mutex* mu;
    absl::Duration deadline;
  };

  std::atomic<int64_t> steady_ns{1000000000};
  std::atomic<int64_t> wall_ns{kWallStartNs};

  absl::Mutex mu;
  std::set<Waiter*> waiters ABSL_GUARDED_BY(mu);
  // Threads an Advance() woke by their deadline that have not waited again.
  std::set<std::thread::id> busy ABSL_GUARDED_BY(mu);

  absl::Duration Now() const { return absl::Nanoseconds(steady_ns.load()); }
};

namespace {

// Ends a thread's "busy" mark on every clock it used when the thread exits:
// a timer thread may end right after its last wake-up (a lost lease).
class ExitHook {
 public:
  ~ExitHook() {
    for (const std::weak_ptr<ManualClock::State>& weak : states_) {
      if (std::shared_ptr<ManualClock::State> state = weak.lock()) {
        absl::MutexLock lock(&state->mu);
        state->busy.erase(std::this_thread::get_id());
      }
    }
  }
  void Watch(const std::shared_ptr<ManualClock::State>& state) {
    for (const std::weak_ptr<ManualClock::State>& weak : states_) {
      if (weak.lock() == state) return;
    }
    states_.push_back(state);
  }

 private:
  std::vector<std::weak_ptr<ManualClock::State>> states_;
};

thread_local ExitHook exit_hook;

}  // namespace

ManualClock::ManualClock() : state_(std::make_shared<State>()) {}

ManualClock::~ManualClock() = default;

absl::Duration ManualClock::Steady() const { return state_->Now(); }

absl::Time ManualClock::Wall() const { return absl::FromUnixNanos(state_->wall_ns.load()); }

bool ManualClock::AwaitUntil(absl::Mutex* mu, const absl::Condition& cond,
                             absl::Duration deadline) const {
  State& s = *state_;
  State::Waiter waiter{mu, deadline};
  {
    // Lock order: the waiter's mutex, then the clock's. Advance() holds the
    // clock's and only tries the waiter's, so the two cannot deadlock.
    absl::MutexLock lock(&s.mu);
    s.busy.erase(std::this_thread::get_id());
    s.waiters.insert(&waiter);
  }
  auto done = [&] { return cond.Eval() || s.Now() >= deadline; };
  while (!mu->AwaitWithTimeout(absl::Condition(&done), kRecheck)) {
  }
  const bool held = cond.Eval();
  exit_hook.Watch(state_);
  absl::MutexLock lock(&s.mu);
  s.waiters.erase(&waiter);
  // Woken by time: the thread now works because of an Advance(), and the
  // clock is not settled until it waits again.
  if (!held) s.busy.insert(std::this_thread::get_id());
  return held;
}

void ManualClock::Advance(absl::Duration d) {
  State& s = *state_;
  const int64_t ns = absl::ToInt64Nanoseconds(std::max(d, absl::ZeroDuration()));
  s.steady_ns += ns;
  s.wall_ns += ns;
  absl::MutexLock lock(&s.mu);
  const absl::Duration now = s.Now();
  for (State::Waiter* w : s.waiters) {
    // Releasing a mutex makes absl re-evaluate the conditions of the threads
    // waiting on it, which now see the new time. A mutex held by someone
    // else is released by them soon, to the same effect.
    if (w->deadline <= now && w->mu->TryLock()) w->mu->Unlock();
  }
}

void ManualClock::StepWall(absl::Duration d) { state_->wall_ns += absl::ToInt64Nanoseconds(d); }

bool ManualClock::Settled() const {
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  s.busy.erase(std::this_thread::get_id());
  if (!s.busy.empty()) return false;
  const absl::Duration now = s.Now();
  return std::none_of(s.waiters.begin(), s.waiters.end(),
                      [now](const State::Waiter* w) { return w->deadline <= now; });
}

int ManualClock::Waiters() const {
  absl::MutexLock lock(&state_->mu);
  return static_cast<int>(state_->waiters.size());
}

}  // namespace server
}  // namespace kvstore
