// Copyright 2026 The kvstore Authors.

#include "common/failpoint/failpoint_testing.h"

#include <utility>

namespace kvstore {
namespace failpoint {

Action ReturnError(absl::Status error) {
  return [error = std::move(error)] { return error; };
}

ScopedFailpoint::ScopedFailpoint(std::string name, Action action) : name_(std::move(name)) {
  internal::Arm(name_, std::move(action));
}

ScopedFailpoint::~ScopedFailpoint() { internal::Disarm(name_); }

Pause::Pause(std::string name) : name_(std::move(name)), state_(std::make_shared<State>()) {
  internal::Arm(name_, [state = state_] {
    absl::MutexLock lock(&state->mu);
    ++state->reached;
    state->mu.Await(absl::Condition(&state->released));
    return absl::OkStatus();
  });
}

Pause::~Pause() { Release(); }

bool Pause::WaitUntilReached(absl::Duration bound) {
  absl::MutexLock lock(&state_->mu);
  auto reached = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) { return state_->reached > 0; };
  return state_->mu.AwaitWithTimeout(absl::Condition(&reached), bound);
}

void Pause::Release() {
  // Disarm first, so that threads arriving from now on pass the point
  // without touching this pause's lock; any already in the action see
  // `released` below.
  internal::Disarm(name_);
  absl::MutexLock lock(&state_->mu);
  state_->released = true;
}

int64_t Pause::reached() const {
  absl::MutexLock lock(&state_->mu);
  return state_->reached;
}

}  // namespace failpoint
}  // namespace kvstore
