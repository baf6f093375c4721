// Copyright 2026 The kvstore Authors.
//
// Test helpers that run the real binaries: TestCluster starts kvserver
// processes (ports bound to :0, learned from --ready_file), RunProcess runs a
// command such as kvctl or redis-cli and captures its output.

#ifndef KVSTORE_TESTS_TEST_CLUSTER_H_
#define KVSTORE_TESTS_TEST_CLUSTER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvstore {
namespace testing {

// Absolute path of a binary built by Bazel (a `data` dependency), e.g.
// "server/kvserver". Works under `bazel test` and in the VM harness, which
// sets TEST_SRCDIR the same way.
std::string BinaryPath(const std::string& workspace_relative);

// A scratch directory for this test (TEST_TMPDIR or /tmp).
std::string TempDir();

// The value of `series` in a flat metrics map (KvClient::metrics()), 0 when
// absent, e.g. SeriesValue(c->metrics(), "kvstore_client_reconnects_total").
uint64_t SeriesValue(const std::map<std::string, uint64_t>& metrics, const std::string& series);
// kvstore_client_requests_total{transport=`transport`} summed over its ops:
// the operations a client ran over "rdma" or "tcp" (retries included).
uint64_t RequestsOn(const std::map<std::string, uint64_t>& metrics, const std::string& transport);

struct ProcessResult {
  int exit_code = -1;  // -signal when killed by a signal
  std::string out;
  std::string err;
};

// Runs argv[0] with `input` on stdin; waits at most `timeout_s`.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& input = "",
                         int timeout_s = 60);

class KvServerProcess {
 public:
  // Starts kvserver with `flags` (plus --control_port=0 --resp_port=0
  // --ready_file=...) and waits until it serves.
  // `max_descriptors` > 0: the process's RLIMIT_NOFILE, soft and hard (so
  // kvserver cannot raise it), set between fork and exec.
  static absl::StatusOr<KvServerProcess> Start(const std::vector<std::string>& flags,
                                               int max_descriptors = 0);
  // The process id (-1 once stopped), e.g. to count its descriptors.
  pid_t pid() const { return pid_; }
  KvServerProcess(KvServerProcess&& other) noexcept;
  KvServerProcess& operator=(KvServerProcess&&) = delete;
  ~KvServerProcess();

  // SIGTERM, then waits; returns the exit status.
  int Stop();
  // SIGKILL without cleanup (fault tests).
  void Kill();
  // Waits up to `timeout` for the process to exit on its own (no signal is
  // sent) and reaps it: its exit status (-signal when a signal ended it),
  // or nullopt if it still runs.
  std::optional<int> WaitExit(absl::Duration timeout);
  bool Running() const;

  int control_port() const { return control_port_; }
  int resp_port() const { return resp_port_; }
  // The ready file's metrics_port: -1 unless started with --metrics_port.
  int metrics_port() const { return metrics_port_; }
  // The ready file's resp_tls_port: -1 unless started with --resp_tls_port.
  int resp_tls_port() const { return resp_tls_port_; }
  // Sends `sig` (e.g. SIGHUP: read the TLS certificates again).
  void Signal(int sig);
  std::string control_address() const;
  std::string rdma_device() const { return rdma_device_; }
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;

 private:
  KvServerProcess() = default;
  pid_t pid_ = -1;
  int control_port_ = 0;
  int resp_port_ = 0;
  int metrics_port_ = -1;
  int resp_tls_port_ = -1;
  std::string rdma_device_;
  std::string log_path_;
};

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_TEST_CLUSTER_H_
