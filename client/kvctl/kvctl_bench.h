// Copyright 2026 The kvstore Authors.
//
// The engine behind `kvctl bench`, kept apart from kvctl_main.cc so that it
// can be tested without a server:
//
//   LatencyHistogram   log-linear latency histogram (~0.4% error), mergeable
//   BenchConfig        what to run, built from the flags by MakeBenchConfig()
//   BenchTarget        the two operations the benchmark drives (GET and PUT);
//                      kvctl adapts a KvClient to it, tests use a fake
//   RunBench()         optional preload, then the timed GET/PUT mix
//   BenchResult        the figures, as text (FormatBenchReport) or JSON
//                      (BenchResultToJson)
//
// It also holds PreprocessArgs(), kvctl's small layer in front of
// absl::ParseCommandLine (hyphenated flag names, help detection).
//
// Nothing here depends on the client library.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_BENCH_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_BENCH_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kvstore {
namespace client {

// ---------------------------------------------------------------------------
// LatencyHistogram

// A log-linear histogram of non-negative integers (kvctl records
// nanoseconds). Values below 2^kSubBucketBits get a bucket each; above that,
// every power-of-two range [2^e, 2^(e+1)) is split into 2^kSubBucketBits
// equal buckets, so a bucket is at most 1/128 of its lower bound wide and a
// reported percentile, a bucket midpoint, is within 0.4% of the recorded
// value it stands for. The whole uint64_t range is covered; nothing is
// clamped.
//
// Histograms with the same layout (all of them) merge exactly: merging A and
// B gives the histogram of A's and B's values recorded together.
//
// Not thread-safe: give each thread its own and Merge() them afterwards.
class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 7;
  static constexpr int kSubBuckets = 1 << kSubBucketBits;  // 128
  // One linear group for [0, kSubBuckets), then one per exponent
  // kSubBucketBits..63.
  static constexpr int kNumBuckets = kSubBuckets * (64 - kSubBucketBits + 1);

  LatencyHistogram();

  // Copyable and movable (each is ~58 KiB of counts).
  LatencyHistogram(const LatencyHistogram&) = default;
  LatencyHistogram& operator=(const LatencyHistogram&) = default;
  LatencyHistogram(LatencyHistogram&&) = default;
  LatencyHistogram& operator=(LatencyHistogram&&) = default;

  void Record(uint64_t value);
  // Adds every value recorded in `other` to this histogram.
  void Merge(const LatencyHistogram& other);
  void Clear();

  uint64_t count() const { return count_; }
  // 0 when empty.
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  // Exact mean of the recorded values; 0 when empty.
  double Mean() const;

  // The value at percentile `p` (0..100, clamped), by nearest rank: the
  // smallest recorded value v such that at least p% of the values are <= v,
  // rounded to its bucket's midpoint and clamped to [min(), max()].
  // Percentile(0) is min() and Percentile(100) is max(). 0 when empty.
  double Percentile(double p) const;

  // Layout, exposed for tests. BucketIndex(v) is the bucket holding v; it
  // holds the values [BucketLow(i), BucketHigh(i)] (inclusive).
  static int BucketIndex(uint64_t value);
  static uint64_t BucketLow(int index);
  static uint64_t BucketHigh(int index);

 private:
  std::vector<uint64_t> buckets_;  // kNumBuckets counts
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  // The sum as a double: exact to 2^53 ns (104 days), and cannot overflow.
  double sum_ = 0;
};

// ---------------------------------------------------------------------------
// Configuration

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
};

// Builds and validates a BenchConfig. --duration and --ops are mutually
// exclusive; with neither the run lasts BenchFlags::duration's default
// (10s). A zero seed is replaced by `random_seed`, which the caller draws
// from a real entropy source, so that every run reports the seed that
// reproduces its choices. kInvalidArgument on any bad value.
absl::StatusOr<BenchConfig> MakeBenchConfig(const BenchFlags& flags, uint64_t random_seed);

// "bench:%08d": bench:00000000, bench:00000001, ... (wider past 10^8 keys).
std::string BenchKey(uint64_t index);

// ---------------------------------------------------------------------------
// Running

// The operations the benchmark issues. Both are called concurrently from
// BenchConfig::concurrency threads, so implementations must be thread-safe.
class BenchTarget {
 public:
  virtual ~BenchTarget() = default;

  // Reads `key`; returns the value's size in bytes. kNotFound counts as a
  // miss, any other error as an error.
  virtual absl::StatusOr<uint64_t> Get(absl::string_view key) = 0;
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

// One line describing `progress`, without a line ending, e.g.
// "  3.0s  1234567 ops  411522 ops/s" or "preload  5000/10000 keys  ...".
std::string FormatProgressLine(const BenchProgress& progress);

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

  double OpsPerSecond() const;
  // Value bytes moved (get_bytes + put_bytes) per second, in 10^9 bytes.
  double GigabytesPerSecond() const;
};

// Runs the benchmark described by `config` (which must pass
// ValidateBenchConfig) against `target`.
//
// With config.preload, first PUTs every key once, spread over the worker
// threads; a failing preload PUT stops the run and its status is returned.
// Then each of config.concurrency threads loops: pick a key uniformly, GET it
// with probability get_ratio or else PUT a value of value_size bytes (taken
// from a seeded random pool), and time the call.
//
// `progress`, when set, is called from the calling thread about once per
// config.progress_interval in both phases. `cancel`, when set, is polled by
// all threads; setting it ends the current phase early and the result is
// marked interrupted (a cancelled preload returns kCancelled).
//
// `transport` is only copied into the result.
absl::StatusOr<BenchResult> RunBench(const BenchConfig& config, BenchTarget& target,
                                     absl::string_view transport,
                                     const std::function<void(const BenchProgress&)>& progress,
                                     const std::atomic<bool>* cancel);

// The human-readable report: several lines, each ending in '\n'.
std::string FormatBenchReport(const BenchResult& result);

// The result as one line of JSON (no trailing newline). Field names are
// stable; scripts may rely on them:
//
//   transport        string   "rdma" or "tcp"
//   seed             integer
//   keys             integer  key space
//   value_size       integer  bytes
//   get_ratio        number
//   concurrency      integer
//   preload_keys     integer  keys PUT before the timed run
//   preload_seconds  number
//   seconds          number   length of the timed run
//   ops              integer  operations in the timed run
//   ops_per_sec      number
//   gets, puts       integer
//   misses           integer  GETs answered NOT_FOUND
//   errors           integer  operations failing otherwise
//   first_error      string   "" when errors is 0, else "CODE: message"
//   interrupted      boolean  stopped early by Ctrl-C
//   value_bytes      integer  value bytes moved by GETs and PUTs
//   gb_per_sec       number   value_bytes / seconds / 1e9
//   latency_us       object   {"get": L, "put": L, "all": L} where L is
//                             {"count", "mean", "p50", "p99", "p999", "max"}
//                             in microseconds (count is an integer)
std::string BenchResultToJson(const BenchResult& result);

// ---------------------------------------------------------------------------
// Command-line preprocessing (kvctl_main.cc)

// What PreprocessArgs needs to know about a flag name (underscore form).
enum class FlagKind {
  kUnknown,     // not a flag of this program
  kBool,        // takes no separate value: --json, --nojson, --json=false
  kTakesValue,  // --name=value or --name value
};

struct PreprocessedArgs {
  // argv with hyphenated flag names rewritten to the names absl knows:
  // "--value-size=1k" -> "--value_size=1k", "--no-preload" -> "--nopreload".
  // Everything else, including all arguments after "--", is copied as is.
  std::vector<std::string> argv;
  // The underscore names of the known flags that appear ("nopreload" is
  // recorded as "preload").
  std::set<std::string> given;
  // A help flag appeared: -h, --help, --helpfull, --helpshort (one or two
  // leading dashes).
  bool help = false;
};

// Prepares argv for absl::ParseCommandLine, which only knows underscore
// names. Follows absl's syntax: flags may appear anywhere before "--", start
// with one or two dashes, and a kTakesValue flag without "=" consumes the
// next argument. A lone "-" is positional. Unknown flags are left alone for
// absl to report.
PreprocessedArgs PreprocessArgs(const std::vector<std::string>& argv,
                                const std::function<FlagKind(absl::string_view)>& kind_of);

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_BENCH_H_
