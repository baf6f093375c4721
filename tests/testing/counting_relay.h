// Copyright 2026 The kvstore Authors.
//
// CountingRelay: a TCP relay on 127.0.0.1 that forwards every connection it
// accepts to one target port and counts the bytes it passed from the client
// to the target. A test points a client at relay.port() instead of the
// server and reads client_bytes() afterwards: how much of what the client
// wanted to send the server actually let in. The relay never buffers more
// than one 64 KiB chunk per direction, so once the target stops reading
// (its socket buffer and flow-control window full) the client is stopped
// too and the count stops growing.
//
// Each accepted connection gets two pump threads; the relay closes both
// sides when either side ends. The destructor stops accepting and joins
// every thread (it shuts the sockets down first).
// Test-only (testonly = True). Thread safety: port() and client_bytes()
// from any thread.

#ifndef KVSTORE_TESTS_TESTING_COUNTING_RELAY_H_
#define KVSTORE_TESTS_TESTING_COUNTING_RELAY_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace testing {

class CountingRelay {
 public:
  // Listens on 127.0.0.1 (a free port) and relays to 127.0.0.1:target_port.
  // Aborts the test process if it cannot listen (a broken test machine).
  explicit CountingRelay(int target_port);
  ~CountingRelay();
  CountingRelay(const CountingRelay&) = delete;
  CountingRelay& operator=(const CountingRelay&) = delete;

  int port() const { return port_; }
  // Bytes forwarded from clients to the target so far, all connections.
  uint64_t client_bytes() const { return client_bytes_.load(); }

 private:
  void AcceptLoop();
  void Pump(int from, int to, bool count);

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> client_bytes_{0};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_TESTING_COUNTING_RELAY_H_
