// Copyright 2026 The kvstore Authors.
//
// EtcdProcess: a throw-away single-member etcd (/usr/bin/etcd, Debian's
// etcd-server) for tests, on free loopback ports and in a scratch data
// directory under TEST_TMPDIR (or /tmp).
//
//   kvstore::testing::EtcdProcess etcd;
//   ASSERT_TRUE(etcd.Start().ok());
//   options.endpoints = {etcd.endpoint()};
//
// Start() may be called again after Stop() or Kill(): etcd comes back on the
// same ports with the same data (a restart). The destructor kills etcd and
// removes the directory. etcd dies with the thread that started it
// (PR_SET_PDEATHSIG), so a crashed test leaves no etcd behind.
//
// Not thread-safe: drive one EtcdProcess from one thread.

#ifndef KVSTORE_TESTS_CLUSTER_ETCD_PROCESS_H_
#define KVSTORE_TESTS_CLUSTER_ETCD_PROCESS_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace kvstore {
namespace testing {

class EtcdProcess {
 public:
  EtcdProcess() = default;
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;
  ~EtcdProcess();

  // Starts etcd and waits (at most 20 s) until its /health says true. The
  // first call picks the ports (retrying if another process takes one) and
  // the directory; later calls restart on the same ports and data.
  // kFailedPrecondition naming the package when etcd is not installed;
  // kInternal with etcd's log when it exits or does not become healthy.
  absl::Status Start();

  // SIGTERM, then waits (SIGKILL after 10 s); returns the exit status
  // (-signal when killed), -1 when not running. etcd shuts down cleanly and
  // then re-raises the signal, so a clean stop returns -SIGTERM.
  int Stop();
  // SIGKILL and wait: a crash.
  void Kill();
  // SIGSTOP / SIGCONT: a hung etcd (connections stay open, nothing answers).
  // Both return once the process has stopped / continued.
  void Pause();
  void Resume();
  bool Running() const { return pid_ > 0; }

  // "127.0.0.1:P" (EtcdOptions::endpoints); valid after the first Start().
  const std::string& endpoint() const { return endpoint_; }
  int client_port() const { return client_port_; }
  // etcd's stderr so far (warnings and errors only).
  std::string Log() const;

 private:
  absl::Status Launch();
  absl::Status WaitHealthy();

  pid_t pid_ = -1;
  bool paused_ = false;
  int client_port_ = 0;
  int peer_port_ = 0;
  std::string endpoint_;
  std::string dir_;  // holds data/ and etcd.log
};

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_CLUSTER_ETCD_PROCESS_H_
