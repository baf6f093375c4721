// Copyright 2026 The kvstore Authors.
//
// Failpoints: named places in production code where a test can make a node
// stop, fail or wait at an exact step of a protocol ("after every backup
// installed the write, before the primary publishes it"), instead of
// hoping a kill or a sleep lands in the right window.
//
//   KV_RETURN_IF_ERROR(KV_FAILPOINT("replicator/after-backups-installed"));
//
// KV_FAILPOINT(name) is an expression of type absl::Status: OK unless the
// point is armed with an action that returns an error. When no point at all
// is armed (always, in production) it costs one relaxed atomic load and a
// predicted-not-taken branch; the name is not even looked at. Names are
// "component/step" in kebab case; `git grep KV_FAILPOINT` lists them all.
//
// Arming, two ways, neither of them reachable by accident:
//   * In-process, from a test: //common/failpoint:failpoint_testing
//     (testonly, so no production binary can link it) arms a point with any
//     action: return an error, pause until the test releases it, or run a
//     callback.
//   * Across processes, for multi-process fault tests: ArmFromSpec() below,
//     which a binary calls only with the value of a flag given explicitly on
//     its command line (kvserver's hidden --failpoints). There is no
//     environment variable: a variable is inherited silently by every child
//     process, a flag is visible in the command line the test wrote. A
//     binary armed this way logs every point it arms and every hit.
//
// Thread safety: every function is thread-safe. An action runs on the
// thread that reached the point, with no lock of this library held, so it
// may block (pause) without stalling other points.

#ifndef KVSTORE_COMMON_FAILPOINT_FAILPOINT_H_
#define KVSTORE_COMMON_FAILPOINT_FAILPOINT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace failpoint {

// What an armed point does when a thread reaches it; KV_FAILPOINT evaluates
// to its result.
using Action = std::function<absl::Status()>;

// The exit status of a process stopped by an `exit` action, so that a test
// harness can tell "stopped at the failpoint" from a crash.
inline constexpr int kFailpointExitCode = 86;

// Arms points from `spec`, a comma-separated list of NAME=ACTION:
//   error(CODE)     return absl::Status(CODE, "failpoint NAME"), CODE as
//                   absl::StatusCodeToString() spells it (e.g. UNAVAILABLE)
//   sleep(DURATION) wait that long (absl::ParseDuration, e.g. 250ms), then go on
//   pause           wait for ever: the node hangs at the step until killed
//   exit            _exit(kFailpointExitCode) on the spot: the node stops
//                   at the step as a kill -9 there would stop it
// e.g. "replicator/after-backups-installed=exit,migration/after-copy=sleep(2s)".
// kInvalidArgument for a malformed spec, and then nothing is armed.
// REQUIRES: called only with a value the operator or test gave explicitly.
absl::Status ArmFromSpec(absl::string_view spec);

namespace internal {

// How many points are armed; KV_FAILPOINT looks at nothing else while it
// is zero.
extern std::atomic<int> armed_points;

// Runs the action armed at `name`, if any, and returns its result.
absl::Status Hit(absl::string_view name);

// The registry behind failpoint_testing.h and ArmFromSpec(). Arm() replaces
// an action already armed at `name`; Disarm() of an unarmed name is a no-op.
void Arm(const std::string& name, Action action);
void Disarm(const std::string& name);
// How many times a thread reached `name` while it was armed.
int64_t Hits(const std::string& name);

}  // namespace internal
}  // namespace failpoint
}  // namespace kvstore

#define KV_FAILPOINT(name)                                                                \
  (ABSL_PREDICT_FALSE(                                                                    \
       ::kvstore::failpoint::internal::armed_points.load(std::memory_order_relaxed) != 0) \
       ? ::kvstore::failpoint::internal::Hit(name)                                        \
       : ::absl::OkStatus())

#endif  // KVSTORE_COMMON_FAILPOINT_FAILPOINT_H_
