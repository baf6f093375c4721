// Copyright 2026 The kvstore Authors.
//
// NodeProcess: one kvserver process of a cluster test, with the controls
// fault tests need that tests/test_cluster.h's KvServerProcess does not
// offer: its pid, SIGSTOP/SIGCONT, waiting for an exit of its own (a node
// whose lease expired exits with status 3, architecture §19.6), CPU time,
// and running it inside a network namespace.
//
// Start() execs `server/kvserver` with the given flags plus
// --control_port/--resp_port (0 unless fixed) and --ready_file, and returns
// once the ready file names both ports. Output goes to a log file in
// TempDir(). With `netns` set, the process runs as `ip netns exec <netns>
// kvserver ...` (ip execs the server, so the pid is the server's).
//
// Errors: kInternal when the process exits during start-up (the message
// carries its log), kDeadlineExceeded when it is not ready in 30 s.
//
// Thread safety: not thread-safe; one owner (the harness) drives it.
// The destructor kills a running process (SIGKILL) and reaps it.

#ifndef KVSTORE_TESTS_CLUSTER_NODE_PROCESS_H_
#define KVSTORE_TESTS_CLUSTER_NODE_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvstore {
namespace testing {

struct NodeLaunch {
  std::vector<std::string> flags;  // without the port and ready-file flags
  int control_port = 0;            // 0: the kernel picks
  int resp_port = 0;
  std::string netns;               // empty: the test's own network namespace
  std::string host = "127.0.0.1";  // host of control_address()
  std::string log_tag;             // part of the log file name, e.g. "n1"
  // "NAME=value" set for the server (run through /usr/bin/env, which execs
  // it: the pid stays the server's). E.g. LD_PRELOAD of libfaketime.
  std::vector<std::string> env;
  // The server binary, a runfiles path (a test's data dependency).
  std::string binary = "server/kvserver";
};

class NodeProcess {
 public:
  static absl::StatusOr<std::unique_ptr<NodeProcess>> Start(const NodeLaunch& launch);
  ~NodeProcess();
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;

  pid_t pid() const { return pid_; }
  int control_port() const { return control_port_; }
  int resp_port() const { return resp_port_; }
  std::string control_address() const;
  std::string resp_address() const;
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;

  // True until the process exited and was reaped (a stopped one is running).
  bool Running();
  // SIGKILL and reap. Returns at once if not running.
  void Kill();
  // SIGTERM, wait up to `timeout`, then SIGKILL. Returns the exit status
  // (-signal when killed by one), -1 when it was not running.
  int Stop(absl::Duration timeout = absl::Seconds(10));
  // SIGSTOP / SIGCONT.
  void Pause();
  void Resume();
  // Waits up to `timeout` for the process to exit on its own; its status
  // (-signal when killed by one) or nullopt if it still runs.
  std::optional<int> WaitExit(absl::Duration timeout);
  // utime + stime of the process in clock ticks (/proc/<pid>/stat), 0 when
  // it is not running.
  uint64_t CpuTicks() const;

 private:
  NodeProcess() = default;
  void Reap(int status);

  pid_t pid_ = -1;
  int control_port_ = 0;
  int resp_port_ = 0;
  std::string host_;
  std::string log_path_;
  std::optional<int> exit_status_;
};

// sysconf(_SC_CLK_TCK): clock ticks per second of CpuTicks().
int64_t ClockTicksPerSecond();

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_CLUSTER_NODE_PROCESS_H_
