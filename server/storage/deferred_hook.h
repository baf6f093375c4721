// Copyright 2026 The kvstore Authors.
//
// DeferredHook: a WriteHook for tests of the started-commit paths
// (KvStore::StartCommit, LeaseTable::StartCommitFrom). StartWrite() takes
// every write (or declines all of them, when told to) and holds it until
// the test ends its round with Finish(), as a replication stream's reply
// would; Write() publishes at once.
//
// Thread safety: thread-safe; Finish() runs the write's callbacks on the
// calling thread.

#ifndef KVSTORE_SERVER_STORAGE_DEFERRED_HOOK_H_
#define KVSTORE_SERVER_STORAGE_DEFERRED_HOOK_H_

#include <deque>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/write_hook.h"

namespace kvstore {
namespace server {

class DeferredHook : public WriteHook {
 public:
  absl::Status Write(absl::string_view key, absl::string_view entry,
                     absl::FunctionRef<absl::Status()> publish) override {
    return publish();
  }

  bool StartWrite(absl::string_view key, const layout::KeyHash&, absl::string_view entry,
                  Publish publish, Done done) override {
    absl::MutexLock lock(&mu_);
    if (decline_) return false;
    // The views as given: the store promises they stay valid until `done`.
    held_.push_back(Held{key, entry, std::string(entry), std::move(publish), std::move(done)});
    return true;
  }

  // Whether StartWrite() declines from now on.
  void set_decline(bool decline) {
    absl::MutexLock lock(&mu_);
    decline_ = decline;
  }
  // Writes started and not finished.
  size_t held() const {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }
  // The entry bytes the oldest held write was started with (a copy taken
  // then), and the view it was given (to check it still reads the same).
  std::string entry_at_start() const {
    absl::MutexLock lock(&mu_);
    return held_.front().entry_copy;
  }
  absl::string_view entry_view() const {
    absl::MutexLock lock(&mu_);
    return held_.front().entry;
  }

  // Ends the oldest held write's round: publishes it and reports the
  // store's status when `refusal` is OK; otherwise reports `refusal` and
  // publishes nothing. REQUIRES: held() > 0.
  void Finish(absl::Status refusal = absl::OkStatus()) {
    Held h;
    {
      absl::MutexLock lock(&mu_);
      h = std::move(held_.front());
      held_.pop_front();
    }
    h.done(refusal.ok() ? h.publish() : refusal);
  }

 private:
  struct Held {
    absl::string_view key, entry;
    std::string entry_copy;
    Publish publish;
    Done done;
  };
  mutable absl::Mutex mu_;
  bool decline_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Held> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_DEFERRED_HOOK_H_
