// Copyright 2026 The kvstore Authors.
//
// FakeClocks: a wall clock of its own for each kvserver, which the nemesis
// steps while the process runs. Each server is started with libfaketime
// (Debian `libfaketime`, deploy/setup.sh) preloaded and a timestamp file
// of its own holding an offset from the true time ("+0", "+6s", "-6s").
// The library reads the file again at most once a second
// (FAKETIME_CACHE_DURATION=1), so a rewrite is a step of the running
// process's CLOCK_REALTIME within a second. FAKETIME_DONT_FAKE_MONOTONIC=1
// leaves CLOCK_MONOTONIC and CLOCK_BOOTTIME alone (checked on libfaketime
// 0.9.10: without it, the monotonic clocks jump with the wall clock), so a
// step hits only what reads the wall clock: in kvserver, the fence page's
// valid_until, gRPC deadlines taken from system_clock, and log times.
//
// The servers run kServerBinary, kvserver built with the system allocator:
// the shipped kvserver links jemalloc, whose start-up reads
// CLOCK_MONOTONIC, and libfaketime's own start-up allocates, so the two
// wait on each other and the server never starts (libfaketime reports
// "Unexpected recursive calls to clock_gettime()" and the process hangs).
// The code is the same; only malloc differs, which the clocks do not touch.
//
// Errors: kFailedPrecondition when the library is not installed;
// kInternal when a file cannot be written.
//
// Thread safety: Step() may run on the nemesis thread while Env() runs on
// the harness's; each touches only its node's file, written by rename so a
// reader never sees half of it.

#ifndef KVSTORE_TESTS_JEPSEN_FAKE_CLOCK_H_
#define KVSTORE_TESTS_JEPSEN_FAKE_CLOCK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kvstore {
namespace jepsen {

class FakeClocks {
 public:
  static constexpr char kLibrary[] = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
  // The runfiles path of the servers' binary (see the file comment); a
  // test that uses FakeClocks lists //server:kvserver_system_malloc in data.
  static constexpr char kServerBinary[] = "server/kvserver_system_malloc";
  static absl::Status Available();

  // Files live in `dir` (created if missing).
  explicit FakeClocks(std::string dir);

  // The environment of node `node`'s process; creates its file at "+0"
  // unless it exists (a restarted node keeps its step).
  std::vector<std::string> Env(int node);
  // Sets node `node`'s wall clock to the true time + `offset` (whole
  // seconds; zero: back to the true time).
  absl::Status Step(int node, absl::Duration offset);

 private:
  std::string Path(int node) const;
  const std::string dir_;
};

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_FAKE_CLOCK_H_
