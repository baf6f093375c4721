// Copyright 2026 The kvstore Authors.

#include "common/auth/delayed_answers.h"

#include <utility>

#include "glog/logging.h"

namespace kvstore {
namespace auth {

DelayedAnswers::DelayedAnswers(size_t max_pending) : max_pending_(max_pending) {
  CHECK_GE(max_pending_, 1u);
  thread_ = std::thread([this] { Loop(); });
}

DelayedAnswers::~DelayedAnswers() {
  CHECK(std::this_thread::get_id() != thread_.get_id())
      << "an answer destroyed the DelayedAnswers that ran it";
  Stop();
  thread_.join();
}

bool DelayedAnswers::RunLater(absl::Duration delay, std::function<void()> answer) {
  absl::MutexLock lock(&mu_);
  if (stopped_ || queue_.size() >= max_pending_) return false;
  queue_.push(Entry{absl::Now() + delay, next_order_++, std::move(answer)});
  return true;
}

void DelayedAnswers::Stop() {
  std::vector<std::function<void()>> now;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    now = TakeAll();
    // An answer the thread took out before is finished too when Stop()
    // returns, so the caller may then tear down what answers use.
    mu_.Await(absl::Condition(
        +[](bool* running) { return !*running; }, &running_));
  }
  for (auto& answer : now) answer();
}

size_t DelayedAnswers::pending() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

std::vector<std::function<void()>> DelayedAnswers::TakeAll() {
  std::vector<std::function<void()>> all;
  while (!queue_.empty()) {
    // top() is const: the answer is copied out, then the entry dropped.
    all.push_back(queue_.top().answer);
    queue_.pop();
  }
  return all;
}

void DelayedAnswers::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopped_) {
    // Wakes for the earliest deadline, a new (maybe earlier) entry, or Stop().
    const size_t seen = queue_.size();
    const absl::Time due = queue_.empty() ? absl::InfiniteFuture() : queue_.top().due;
    auto changed = [this, seen, due]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return stopped_ || queue_.size() != seen || (!queue_.empty() && queue_.top().due != due);
    };
    if (due > absl::Now()) {
      mu_.AwaitWithDeadline(absl::Condition(&changed), due);
      continue;
    }
    std::function<void()> answer = queue_.top().answer;
    queue_.pop();
    // Answers run without the lock: they call into gRPC, and RunLater()
    // must not wait for them.
    running_ = true;
    mu_.Unlock();
    answer();
    mu_.Lock();
    running_ = false;
  }
}

}  // namespace auth
}  // namespace kvstore
