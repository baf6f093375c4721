// Copyright 2026 The kvstore Authors.
//
// Arming failpoints (failpoint.h) from a test, in-process. Test-only: the
// library is testonly, so no production binary can arm a point this way.
//
//   // Every write stops after its backups installed it, before publish:
//   failpoint::ScopedFailpoint fail("replicator/after-backups-installed",
//                                   failpoint::ReturnError(absl::UnavailableError("cut")));
//
//   // Hold the first thread that gets there until the test says so:
//   failpoint::Pause pause("migration/after-copy");
//   ASSERT_TRUE(pause.WaitUntilReached());
//   ... look at the cluster while the node is stopped at that step ...
//   pause.Release();
//
// A point stays armed until its ScopedFailpoint or Pause is destroyed; one
// action per name at a time (arming a name already armed replaces its
// action). Thread safety: as failpoint.h; a Pause may be released from any
// thread.

#ifndef KVSTORE_COMMON_FAILPOINT_FAILPOINT_TESTING_H_
#define KVSTORE_COMMON_FAILPOINT_FAILPOINT_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/failpoint/failpoint.h"

namespace kvstore {
namespace failpoint {

// An action that returns `error` every time.
Action ReturnError(absl::Status error);

// Arms `name` with `action` for the object's lifetime.
class ScopedFailpoint {
 public:
  ScopedFailpoint(std::string name, Action action);
  ~ScopedFailpoint();
  ScopedFailpoint(const ScopedFailpoint&) = delete;
  ScopedFailpoint& operator=(const ScopedFailpoint&) = delete;

  // Threads that reached the point (armed by anyone) so far.
  int64_t hits() const { return internal::Hits(name_); }

 private:
  const std::string name_;
};

// Arms `name` so that every thread reaching it waits there until Release()
// (or destruction, which releases). After Release() the point is disarmed:
// later arrivals pass.
class Pause {
 public:
  explicit Pause(std::string name);
  ~Pause();
  Pause(const Pause&) = delete;
  Pause& operator=(const Pause&) = delete;

  // Whether a thread is (or was) held at the point within `bound`; a
  // generous default, as for Eventually().
  bool WaitUntilReached(absl::Duration bound = absl::Seconds(60));
  // Lets every held thread go on and disarms the point. Idempotent.
  void Release();
  // Threads that reached the point while it was armed.
  int64_t reached() const;

 private:
  // Shared with the action, which may still be running on a released
  // thread after the Pause is gone.
  struct State {
    mutable absl::Mutex mu;
    int64_t reached ABSL_GUARDED_BY(mu) = 0;
    bool released ABSL_GUARDED_BY(mu) = false;
  };
  const std::string name_;
  const std::shared_ptr<State> state_;
};

}  // namespace failpoint
}  // namespace kvstore

#endif  // KVSTORE_COMMON_FAILPOINT_FAILPOINT_TESTING_H_
