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
// A member of a multi-member etcd (tests/jepsen) is made with Options: its
// name, the network namespace and address it runs on, and the cluster's
// `--initial-cluster`; StartAsync() launches it without waiting (a member
// alone has no quorum), WaitHealthy() waits once every member was launched.
//
// Not thread-safe: drive one EtcdProcess from one thread.

#ifndef KVSTORE_TESTS_CLUSTER_ETCD_PROCESS_H_
#define KVSTORE_TESTS_CLUSTER_ETCD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace kvstore {
namespace testing {

struct EtcdMemberOptions {
  std::string name = "default";
  std::string netns;                     // empty: the test's own namespace
  std::string ip = "127.0.0.1";          // listen and advertise address
  int client_port = 0;                   // 0: a free port (loopback only)
  int peer_port = 0;                     // 0: a free port (loopback only)
  std::string initial_cluster;           // empty: this member alone
  std::vector<std::string> extra_flags;  // e.g. --heartbeat-interval
  // TLS on the client port (single-member Start() only): etcd serves
  // https with this certificate and key and requires client certificates
  // signed by tls_ca (--client-cert-auth). /health is then read from a
  // plaintext metrics port of its own.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

class EtcdProcess {
 public:
  EtcdProcess() = default;
  explicit EtcdProcess(EtcdMemberOptions options) : options_(std::move(options)) {}
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;
  ~EtcdProcess();

  // Starts etcd and waits (at most 20 s) until its /health says true. The
  // first call picks the ports (retrying if another process takes one) and
  // the directory; later calls restart on the same ports and data.
  // kFailedPrecondition naming the package when etcd is not installed;
  // kInternal with etcd's log when it exits or does not become healthy.
  absl::Status Start();
  // The first start of a member of a multi-member cluster: launches it and
  // returns at once; call WaitHealthy() once every member was launched.
  // REQUIRES: explicit client and peer ports in Options.
  absl::Status StartAsync();
  // Waits (at most 20 s) until /health says true; kInternal with the log
  // when etcd exits or stays unhealthy (it is killed then).
  absl::Status WaitHealthy();

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

  pid_t pid() const { return pid_; }
  const std::string& name() const { return options_.name; }
  // "IP:P" (EtcdOptions::endpoints); valid after the first Start().
  const std::string& endpoint() const { return endpoint_; }
  int client_port() const { return client_port_; }
  // etcd's stderr so far (warnings and errors only).
  std::string Log() const;

 private:
  absl::Status Launch();
  absl::Status MakeDir();

  EtcdMemberOptions options_;
  pid_t pid_ = -1;
  bool paused_ = false;
  int client_port_ = 0;
  int peer_port_ = 0;
  int metrics_port_ = 0;  // with TLS: where /health is read
  std::string endpoint_;
  std::string dir_;  // holds data/ and etcd.log
};

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_CLUSTER_ETCD_PROCESS_H_
