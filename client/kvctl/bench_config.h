// Copyright 2026 The kvstore Authors.
//
// What `kvctl bench` runs: BenchConfig, built and validated from the bench
// flags (BenchFlags) by MakeBenchConfig(), and the parsers of the flag
// syntaxes it accepts (ratios, byte sizes). Pure functions and plain
// structs: nothing here touches the network, threads or global state.

#ifndef KVSTORE_CLIENT_KVCTL_BENCH_CONFIG_H_
#define KVSTORE_CLIENT_KVCTL_BENCH_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kvstore {
namespace client {

// Parses a ratio in [0, 1]: "0.9", "1", "0", or a percentage "90%".
// kInvalidArgument for anything else (including NaN and out-of-range values).
absl::StatusOr<double> ParseRatio(absl::string_view text);

// Parses a byte count: "4096", or with a binary suffix "4k", "4K", "4KiB",
// "1m", "1MiB", "1g", "1GiB" (k = 1024). kInvalidArgument for anything else,
// including negative numbers, fractions and values that overflow uint64_t.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// Upper bounds on BenchConfig::concurrency and value_size: typo guards (the
// value pool is allocated up front), not system limits.
inline constexpr int kMaxBenchConcurrency = 4096;
inline constexpr uint64_t kMaxBenchValueSize = uint64_t{1} << 30;

// One benchmark run's parameters. A plain value; check it with
// ValidateBenchConfig() (RunBench() does) before use.
struct BenchConfig {
  uint64_t keys = 10000;       // key space: "bench:00000000" .. keys-1
  uint64_t value_size = 4096;  // bytes per PUT value and per preloaded value
  double get_ratio = 0.9;      // probability that an operation is a GET
  int concurrency = 32;        // worker threads, all sharing one target
  // The run ends after `ops` operations in total when ops > 0, otherwise
  // after `duration`.
  absl::Duration duration = absl::Seconds(10);
  uint64_t ops = 0;
  bool preload = true;  // PUT every key once before the timed run
  uint64_t seed = 1;    // drives key choice, GET/PUT choice and values
  // GETs read into registered memory (KvClient::GetInto), not a copy. The
  // engine only reports it; the target (kvctl's) acts on it.
  bool zero_copy = false;
  // How often RunBench() calls its progress callback.
  absl::Duration progress_interval = absl::Seconds(1);
};

// kInvalidArgument naming the first field out of range: keys must be
// positive, value_size in [1, kMaxBenchValueSize], get_ratio in [0, 1],
// concurrency in [1, kMaxBenchConcurrency], duration positive when ops is 0,
// and progress_interval positive.
absl::Status ValidateBenchConfig(const BenchConfig& config);

// The bench flags of kvctl as given on the command line, before validation.
// `*_given` tell whether the flag appeared at all.
struct BenchFlags {
  uint64_t keys = 10000;
  std::string value_size = "4096";  // ParseByteSize syntax
  std::string get_ratio = "0.9";    // ParseRatio syntax
  int concurrency = 32;
  absl::Duration duration = absl::Seconds(10);
  bool duration_given = false;
  uint64_t ops = 0;
  bool ops_given = false;
  bool preload = true;
  uint64_t seed = 0;  // 0: choose one (see MakeBenchConfig)
  bool zero_copy = false;
};

// Builds and validates a BenchConfig. --duration and --ops are mutually
// exclusive; with neither the run lasts BenchFlags::duration's default
// (10s). A zero seed is replaced by `random_seed`, which the caller draws
// from a real entropy source, so that every run reports the seed that
// reproduces its choices. kInvalidArgument on any bad value, with a message
// naming the flag (e.g. "--value-size: ...") fit to show the user.
absl::StatusOr<BenchConfig> MakeBenchConfig(const BenchFlags& flags, uint64_t random_seed);

// "bench:%08d": bench:00000000, bench:00000001, ... (wider past 10^8 keys).
std::string BenchKey(uint64_t index);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_BENCH_CONFIG_H_
