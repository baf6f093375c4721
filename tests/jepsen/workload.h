// Copyright 2026 The kvstore Authors.
//
// The fault suite's workloads: client threads of the real client library
// (client/kv_client.h, cluster mode) recording every operation into one
// Recorder as jepsen::Op (history.h), for the checkers:
//
//   register   PUT / GET / DELETE on `keys` keys with Zipf(1.0)-skewed
//              access (a few hot keys, a long cold tail where divergence
//              cannot hide behind the next overwrite), each PUT a value no
//              other PUT writes ("c<client>-<n>");
//   set        each write a new key "s-<client>-<n>" written once; reads
//              sample earlier keys; lost data cannot hide behind an
//              overwrite (workload "set" in the history);
//   multiput   MultiPut batches of 2-8 pairs over the register's keys
//              (pairs across shards), one history op per pair with the
//              batch's interval and id.
//
// Read paths: register client i connects as register_paths[i % size]
// (transport, location cache) and records that path's name on its GETs;
// with none given every client uses RESP/TCP ("resp"). The set and
// MultiPut clients and the final reads always use RESP/TCP. PathMetrics
// sums the client counters (KvClient::metrics()) of one path's clients, so
// a test can tell that its RDMA reads really went one-sided.
//
// Outcome of a status (OutcomeOf): OK, and NotFound for a GET or DELETE,
// is kOk; a typed refusal of no effect (cluster::CertainlyNoEffect) or
// kInvalidArgument (refused by the client before sending) is kFail; every
// other error is kUnknown.
//
// Thread safety: Recorder is thread-safe. Workload: Start/Stop/FinalReads
// from one thread.

#ifndef KVSTORE_TESTS_JEPSEN_WORKLOAD_H_
#define KVSTORE_TESTS_JEPSEN_WORKLOAD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "tests/jepsen/history.h"

namespace kvstore {
namespace jepsen {

// Steady-clock nanoseconds: the history's clock.
int64_t NowNs();

class Recorder {
 public:
  // Records an invocation; returns its index for Complete.
  size_t Invoke(Op op);
  void Complete(size_t index, Outcome outcome, std::optional<std::string> read_value,
                std::string error);
  std::vector<Op> Snapshot() const;
  uint64_t Count(Outcome outcome) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<Op> ops_ ABSL_GUARDED_BY(mu_);
};

Outcome OutcomeOf(OpKind kind, const absl::Status& status);

// How a register client reaches the cluster.
struct ClientPath {
  std::string name = "resp";  // recorded as the GETs' path
  client::TransportMode transport = client::TransportMode::kTcp;
  std::string rdma_device;  // "" = the first with an active port
  size_t location_cache_entries = client::Options().rdma_location_cache_entries;
};

struct WorkloadOptions {
  std::vector<std::string> seeds;  // control addresses
  int register_clients = 4;
  int set_clients = 2;
  int multiput_clients = 1;
  int keys = 2000;
  std::vector<ClientPath> register_paths;  // empty: every client "resp"
  double write_fraction = 0.3;
  double delete_fraction = 0.05;
  uint64_t seed = 1;
  absl::Duration op_timeout = absl::Seconds(3);
  absl::Duration think_time = absl::Milliseconds(2);
};

class Workload {
 public:
  // `recorder` is not owned and outlives the workload.
  Workload(WorkloadOptions options, Recorder* recorder);
  ~Workload();  // Stop()s

  void Start();
  void Stop();
  // Reads every key any client wrote (register keys and set keys) once
  // successfully, retrying until `timeout` (returns by then, give or take
  // one read); records them final_read = true.
  // kDeadlineExceeded names how many keys were never read.
  absl::Status FinalReads(absl::Duration timeout);
  // The read path of register client `client` (its name in the history).
  const ClientPath& PathOf(int client) const;
  // The counters of the clients of path `name`, summed; complete once
  // Stop() returned.
  std::map<std::string, uint64_t> PathMetrics(const std::string& name) const;

 private:
  void RunClient(int client, int kind);
  void RegisterStep(int client, client::KvClient& kv, uint64_t* n, std::mt19937_64& rng);
  void SetStep(int client, client::KvClient& kv, uint64_t* n, std::mt19937_64& rng);
  void MultiPutStep(int client, client::KvClient& kv, uint64_t* n, std::mt19937_64& rng);
  absl::StatusOr<std::unique_ptr<client::KvClient>> Connect(const ClientPath& path) const;
  std::string Key(int i) const;
  int ZipfKey(std::mt19937_64& rng) const;
  // One recorded GET; its outcome (kOk or kUnknown).
  Outcome Get(int client, client::KvClient& kv, const std::string& key, const char* workload,
              bool final_read, const std::string& path);

  const WorkloadOptions options_;
  Recorder* const recorder_;
  std::vector<double> zipf_cdf_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  std::vector<std::string> set_keys_ ABSL_GUARDED_BY(mu_);  // written (any outcome)
  std::map<std::string, std::map<std::string, uint64_t>> path_metrics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_WORKLOAD_H_
