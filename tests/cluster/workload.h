// Copyright 2026 The kvstore Authors.
//
// Workload: K client threads, each with its own KvClient (client/kv_client.h,
// Options::servers = the seeds given), running PUT (a value no other PUT
// writes), GET and DELETE on a small key set and recording every operation
// into a History (history.h) for HistoryChecker.
//
// Outcomes recorded: OK (and NotFound for GET/DELETE) are kOk;
// kInvalidArgument is kFailed (the client refuses such a request before
// sending it); every other error is kUnknown — after a timeout or a lost
// connection the write may have been applied, and a client's own retries
// may apply it later.
//
// Thread safety: Start/Stop/FinalReads from one thread; the counters may be
// read from any thread.

#ifndef KVSTORE_TESTS_CLUSTER_WORKLOAD_H_
#define KVSTORE_TESTS_CLUSTER_WORKLOAD_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "tests/cluster/history.h"

namespace kvstore {
namespace testing {

struct WorkloadOptions {
  std::vector<std::string> servers;  // control addresses (seeds)
  int clients = 4;
  // Client ids are first_client_id .. first_client_id + clients - 1 (and
  // the next one for FinalReads); values carry them, so two workloads on
  // one History need disjoint ranges.
  int first_client_id = 0;
  int keys = 16;
  std::string key_prefix = "key";
  // Fractions of PUT and DELETE; the rest are GETs.
  double put_fraction = 0.5;
  double delete_fraction = 0.05;
  size_t value_bytes = 32;  // at least the unique tag's length
  uint32_t seed = 1;
  absl::Duration op_timeout = absl::Seconds(2);
  absl::Duration connect_timeout = absl::Seconds(2);
  // Sleep between two operations of one client (0: closed loop).
  absl::Duration think_time = absl::ZeroDuration();
  client::TransportMode transport = client::TransportMode::kTcp;
  // The cluster's shared token (client::Options::auth_token); empty: none.
  std::string auth_token;
  // TLS to the control ports (client::Options::tls_ca_file, tls_cert_file,
  // tls_key_file); empty: plaintext.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
};

class Workload {
 public:
  // `history` must outlive the workload.
  Workload(WorkloadOptions options, History* history);
  ~Workload();  // Stop()s

  // Starts the client threads; returns at once (clients connect in their
  // threads and retry until Stop()).
  void Start();
  // Asks every thread to finish its current operation and joins them.
  void Stop();

  // Reads every key once successfully (GET with kOk or NotFound), retrying
  // with fresh clients until `timeout`; each attempt is recorded with
  // final_read = true. kDeadlineExceeded names the keys never read.
  // REQUIRES: Stop() was called.
  absl::Status FinalReads(absl::Duration timeout);

  std::string Key(int i) const;
  const std::vector<std::string>& keys() const { return keys_; }
  uint64_t acknowledged_writes() const { return acked_writes_.load(); }
  uint64_t operations() const { return ops_.load(); }
  // Failed KvClient::Connect calls (not operations: not in the History) and
  // the last one's status, for a test's failure message.
  uint64_t connect_failures() const { return connect_failures_.load(); }
  std::string last_connect_error() const;
  // The client metrics (KvClient::metrics()) summed over the workload's
  // clients, taken when each client thread ends: complete after Stop().
  std::map<std::string, uint64_t> ClientMetrics() const;

 private:
  void RunClient(int client);
  client::Options ClientOptions() const;
  // One operation of `client`; records it.
  void RunOne(int client, client::KvClient& kv, uint64_t* seq, uint64_t rnd);

  const WorkloadOptions options_;
  History* const history_;
  std::vector<std::string> keys_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> acked_writes_{0};
  std::atomic<uint64_t> ops_{0};
  std::atomic<uint64_t> connect_failures_{0};
  mutable absl::Mutex mu_;
  std::string last_connect_error_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> metrics_ ABSL_GUARDED_BY(mu_);
};

// The History outcome of a client status (see the file comment).
Outcome OutcomeOf(OpType type, const absl::Status& status);

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_CLUSTER_WORKLOAD_H_
