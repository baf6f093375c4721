// Copyright 2026 The kvstore Authors.

#include "common/sync/deadline_timer.h"

#include "absl/time/clock.h"
#include "common/sync/thread_name.h"

namespace kvstore {

DeadlineTimer::DeadlineTimer()
    : thread_([this] {
        NameThread("kv-deadlines");
        Run();
      }) {}

DeadlineTimer::~DeadlineTimer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

DeadlineTimer::Id DeadlineTimer::Add(absl::Time deadline, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  Id id(deadline, next_++);
  due_.emplace(id, std::move(fn));
  return id;
}

bool DeadlineTimer::Cancel(const Id& id) {
  absl::MutexLock lock(&mu_);
  return due_.erase(id) > 0;
}

void DeadlineTimer::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    const absl::Time next = due_.empty() ? absl::InfiniteFuture() : due_.begin()->first.first;
    if (next <= absl::Now()) {
      std::function<void()> fn = std::move(due_.begin()->second);
      due_.erase(due_.begin());
      mu_.Unlock();
      fn();
      mu_.Lock();
      continue;
    }
    // Woken early by an earlier deadline or the destructor; a later one
    // added meanwhile changes nothing.
    sleeping_until_ = next;
    auto woken = +[](DeadlineTimer* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return t->stop_ || (!t->due_.empty() && t->due_.begin()->first.first < t->sleeping_until_);
    };
    mu_.AwaitWithDeadline(absl::Condition(woken, this), next);
  }
}

}  // namespace kvstore
