// Copyright 2026 The kvstore Authors.
//
// The engine behind `kvctl bench`: RunBench() drives a BenchTarget (the two
// operations it times, GET and PUT) from many threads and returns a
// BenchResult. kvctl adapts a KvClient to BenchTarget
// (kv_client_bench_target.h); tests use an in-memory fake, so nothing here
// depends on the client library or needs a server.

#ifndef KVSTORE_CLIENT_KVCTL_BENCH_RUNNER_H_
#define KVSTORE_CLIENT_KVCTL_BENCH_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/kvctl/bench_config.h"
#include "client/kvctl/latency_histogram.h"

namespace kvstore {
namespace client {

// The operations the benchmark issues.
//
// Thread safety: both are called concurrently from BenchConfig::concurrency
// threads, so implementations must be thread-safe. The views passed in are
// valid only for the duration of the call.
class BenchTarget {
 public:
  virtual ~BenchTarget() = default;

  // Reads `key`; returns the value's size in bytes. kNotFound counts as a
  // miss, any other error as an error.
  virtual absl::StatusOr<uint64_t> Get(absl::string_view key) = 0;
  // Stores `value` under `key`. Any error counts as an error (and fails the
  // run during the preload).
  virtual absl::Status Put(absl::string_view key, absl::string_view value) = 0;
};

// A snapshot passed to the progress callback once per progress_interval.
struct BenchProgress {
  bool preloading = false;  // true during the preload phase
  absl::Duration elapsed;   // since the phase began
  uint64_t ops = 0;         // completed operations in this phase
  uint64_t total = 0;       // operations the phase will do; 0 when timed
  double ops_per_sec = 0;   // over the last interval
};

// What a run measured. A plain value; format it with FormatBenchReport() or
// BenchResultToJson() (bench_report.h).
struct BenchResult {
  BenchConfig config;
  std::string transport;  // copied from RunBench's argument

  // Preload phase (zero when config.preload is false).
  uint64_t preload_keys = 0;
  absl::Duration preload_elapsed;

  // Timed phase. Every operation counts in `ops` and in `gets` or `puts`,
  // whatever its outcome. Latencies are recorded for operations that got
  // an answer (success or kNotFound), not for errors.
  absl::Duration elapsed;
  uint64_t ops = 0;
  uint64_t gets = 0;
  uint64_t puts = 0;
  uint64_t misses = 0;       // GETs answered kNotFound
  uint64_t errors = 0;       // operations failing with any other status
  uint64_t get_bytes = 0;    // value bytes returned by successful GETs
  uint64_t put_bytes = 0;    // value bytes sent by successful PUTs
  absl::Status first_error;  // OK when errors == 0
  bool interrupted = false;  // the cancel flag ended the run early

  LatencyHistogram get_latency_ns;
  LatencyHistogram put_latency_ns;
  LatencyHistogram all_latency_ns;  // GETs and PUTs together

  // Answered timed-phase operations (ops - errors: successes and misses)
  // per second; 0 when elapsed is not positive.
  double OpsPerSecond() const;
  // Value bytes moved (get_bytes + put_bytes) per second, in 10^9 bytes;
  // 0 when elapsed is not positive.
  double GigabytesPerSecond() const;
};

// Runs the benchmark described by `config` against `target`. A config that
// fails ValidateBenchConfig() is returned as that kInvalidArgument.
//
// With config.preload, first PUTs every key once, spread over the worker
// threads; a failing preload PUT stops the run and its status is returned.
// Then each of config.concurrency threads loops: pick a key uniformly, GET it
// with probability get_ratio or else PUT a value of value_size bytes (taken
// from a seeded random pool), and time the call. Errors in this phase do not
// fail the run; they are counted in the result.
//
// `progress`, when set, is called from the calling thread about once per
// config.progress_interval in both phases. `cancel`, when set, is polled by
// all threads; setting it ends the current phase early and the result is
// marked interrupted (a cancelled preload returns kCancelled).
//
// `transport` is only copied into the result. Blocks until every thread it
// started has been joined; `target` and `cancel` need only outlive the call.
absl::StatusOr<BenchResult> RunBench(const BenchConfig& config, BenchTarget& target,
                                     absl::string_view transport,
                                     const std::function<void(const BenchProgress&)>& progress,
                                     const std::atomic<bool>* cancel);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_BENCH_RUNNER_H_
