// Copyright 2026 The kvstore Authors.

#include "client/kvctl/kvctl_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/numeric/bits.h"
#include "absl/numeric/int128.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace client {

// ---------------------------------------------------------------------------
// LatencyHistogram

LatencyHistogram::LatencyHistogram() : buckets_(kNumBuckets, 0) {}

int LatencyHistogram::BucketIndex(uint64_t value) {
  if (value < kSubBuckets) return static_cast<int>(value);
  // value is in [2^e, 2^(e+1)) with e >= kSubBucketBits; its top
  // kSubBucketBits + 1 bits select one of kSubBuckets equal sub-ranges.
  const int e = absl::bit_width(value) - 1;
  const int shift = e - kSubBucketBits;
  const int sub = static_cast<int>(value >> shift) - kSubBuckets;
  return kSubBuckets + shift * kSubBuckets + sub;
}

uint64_t LatencyHistogram::BucketLow(int index) {
  if (index < kSubBuckets) return static_cast<uint64_t>(index);
  const int shift = (index - kSubBuckets) / kSubBuckets;
  const uint64_t sub = static_cast<uint64_t>((index - kSubBuckets) % kSubBuckets);
  return (kSubBuckets + sub) << shift;
}

uint64_t LatencyHistogram::BucketHigh(int index) {
  if (index < kSubBuckets) return static_cast<uint64_t>(index);
  const int shift = (index - kSubBuckets) / kSubBuckets;
  // For the last bucket this is exactly UINT64_MAX; nothing overflows.
  return BucketLow(index) + ((uint64_t{1} << shift) - 1);
}

void LatencyHistogram::Record(uint64_t value) {
  ++buckets_[BucketIndex(value)];
  ++count_;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  sum_ += static_cast<double>(value);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kNumBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

void LatencyHistogram::Clear() {
  std::fill(buckets_.begin(), buckets_.end(), 0);
  count_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
  sum_ = 0;
}

double LatencyHistogram::Mean() const {
  return count_ == 0 ? 0 : sum_ / static_cast<double>(count_);
}

double LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  if (!(p > 0)) return static_cast<double>(min_);  // also NaN
  if (p >= 100) return static_cast<double>(max_);

  // Nearest rank. The small relative margin keeps products such as
  // 99.9 / 100 * 1000 = 999.0000000000001 from rounding up a whole rank.
  const double exact = p / 100 * static_cast<double>(count_);
  uint64_t rank = static_cast<uint64_t>(std::ceil(exact - exact * 1e-12));
  rank = std::clamp<uint64_t>(rank, 1, count_);

  uint64_t seen = 0;
  for (int i = 0; i < kNumBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const uint64_t low = BucketLow(i);
      const double mid = static_cast<double>(low) + static_cast<double>(BucketHigh(i) - low) / 2;
      return std::clamp(mid, static_cast<double>(min_), static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);  // unreachable: the counts sum to count_
}

// ---------------------------------------------------------------------------
// Configuration

absl::StatusOr<double> ParseRatio(absl::string_view text) {
  absl::string_view number = absl::StripAsciiWhitespace(text);
  const bool percent = absl::ConsumeSuffix(&number, "%");
  double value;
  if (number.empty() || !absl::SimpleAtod(number, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a ratio: \"", text, "\" (want 0..1, e.g. 0.9, or 0%..100%)"));
  }
  if (percent) value /= 100;
  if (!(value >= 0 && value <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ratio \"", text, "\" is outside 0..1 (0%..100%)"));
  }
  return value;
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(rest[digits])) ++digits;
  const absl::string_view number = rest.substr(0, digits);
  const std::string suffix = absl::AsciiStrToLower(rest.substr(digits));

  int shift;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else {
    shift = -1;
  }
  uint64_t value;
  if (number.empty() || shift < 0 || !absl::SimpleAtoi(number, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a byte size: \"", text, "\" (want an integer, optionally with K, M or G)"));
  }
  if (value > (UINT64_MAX >> shift)) {
    return absl::InvalidArgumentError(absl::StrCat("byte size \"", text, "\" is too large"));
  }
  return value << shift;
}

absl::Status ValidateBenchConfig(const BenchConfig& config) {
  if (config.keys == 0) return absl::InvalidArgumentError("--keys must be positive");
  if (config.value_size == 0 || config.value_size > kMaxBenchValueSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("--value-size must be in 1..", kMaxBenchValueSize));
  }
  if (!(config.get_ratio >= 0 && config.get_ratio <= 1)) {
    return absl::InvalidArgumentError("--get-ratio must be in 0..1");
  }
  if (config.concurrency < 1 || config.concurrency > kMaxBenchConcurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("--concurrency must be in 1..", kMaxBenchConcurrency));
  }
  if (config.ops == 0 && config.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--duration must be positive");
  }
  if (config.progress_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("progress interval must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<BenchConfig> MakeBenchConfig(const BenchFlags& flags, uint64_t random_seed) {
  if (flags.duration_given && flags.ops_given) {
    return absl::InvalidArgumentError("--duration and --ops are mutually exclusive");
  }
  if (flags.ops_given && flags.ops == 0) {
    return absl::InvalidArgumentError("--ops must be positive");
  }
  BenchConfig config;
  config.keys = flags.keys;
  absl::StatusOr<uint64_t> value_size = ParseByteSize(flags.value_size);
  if (!value_size.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--value-size: ", value_size.status().message()));
  }
  config.value_size = *value_size;
  absl::StatusOr<double> get_ratio = ParseRatio(flags.get_ratio);
  if (!get_ratio.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--get-ratio: ", get_ratio.status().message()));
  }
  config.get_ratio = *get_ratio;
  config.concurrency = flags.concurrency;
  if (flags.ops_given) {
    config.ops = flags.ops;
  } else {
    config.duration = flags.duration;
  }
  config.preload = flags.preload;
  // 0 means "choose one"; a (very unlikely) zero draw becomes 1 so that the
  // printed seed, passed back with --seed, reproduces the run.
  config.seed = flags.seed != 0 ? flags.seed : (random_seed != 0 ? random_seed : 1);
  absl::Status status = ValidateBenchConfig(config);
  if (!status.ok()) return status;
  return config;
}

std::string BenchKey(uint64_t index) { return absl::StrFormat("bench:%08d", index); }

// ---------------------------------------------------------------------------
// Running

namespace {

using SteadyClock = std::chrono::steady_clock;

absl::Duration Since(SteadyClock::time_point start) {
  return absl::FromChrono(SteadyClock::now() - start);
}

// SplitMix64 (Vigna): spreads the user's seed and a thread index into
// well-mixed, distinct 64-bit generator seeds.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Per-purpose stream ids, so that e.g. the value pool and thread 0's key
// choices never share a generator state.
constexpr uint64_t kStreamValuePool = 0;
constexpr uint64_t kStreamPreload = 1;
constexpr uint64_t kStreamWorkers = 2;

std::mt19937_64 MakeRng(uint64_t seed, uint64_t stream, uint64_t index) {
  return std::mt19937_64(SplitMix64(SplitMix64(seed ^ SplitMix64(stream)) + index));
}

// Uniform in [0, n) by multiply-shift (Lemire). The bias is below n / 2^64,
// far under anything measurable, and the result is the same on every
// platform (std::uniform_int_distribution is implementation-defined).
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t n) {
  return absl::Uint128High64(absl::uint128(rng()) * n);
}

// Uniform in [0, 1) with 53 random bits.
double UniformUnit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Writes BenchKey(index) into `buf` without allocating; returns a view of it.
absl::string_view FormatKey(uint64_t index, char (&buf)[32]) {
  const int n = std::snprintf(buf, sizeof(buf), "bench:%08llu",
                              static_cast<unsigned long long>(index));  // NOLINT(runtime/int)
  return absl::string_view(buf, static_cast<size_t>(n));
}

// Random bytes from which PUT values are sliced at random offsets, so that
// values differ without generating value_size bytes per operation.
class ValuePool {
 public:
  ValuePool(uint64_t seed, uint64_t value_size)
      : value_size_(value_size), data_(value_size + kSlack, '\0') {
    std::mt19937_64 rng = MakeRng(seed, kStreamValuePool, 0);
    for (size_t i = 0; i < data_.size(); i += sizeof(uint64_t)) {
      const uint64_t word = rng();
      const size_t n = std::min(sizeof(word), data_.size() - i);
      std::memcpy(&data_[i], &word, n);
    }
  }

  absl::string_view Pick(std::mt19937_64& rng) const {
    return absl::string_view(data_.data() + UniformBelow(rng, kSlack + 1), value_size_);
  }

 private:
  static constexpr uint64_t kSlack = 4096;
  const uint64_t value_size_;
  std::string data_;
};

// Remembers the first error reported by any thread.
class FirstError {
 public:
  void Note(const absl::Status& status) {
    if (noted_.load(std::memory_order_relaxed)) return;  // cheap after the first
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = status;
    noted_.store(true, std::memory_order_relaxed);
  }
  bool noted() const { return noted_.load(std::memory_order_relaxed); }
  absl::Status Get() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  std::atomic<bool> noted_{false};
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// One worker thread's tallies. Only the owning thread writes them; the
// reporter reads `done` concurrently, everything else after the join. Each
// worker's state is a separate, cache-line aligned allocation so that the
// `done` counters of different threads do not share a line.
struct alignas(64) WorkerState {
  std::atomic<uint64_t> done{0};  // completed operations
  uint64_t gets = 0;
  uint64_t puts = 0;
  uint64_t misses = 0;
  uint64_t errors = 0;
  uint64_t get_bytes = 0;
  uint64_t put_bytes = 0;
  LatencyHistogram get_latency_ns;
  LatencyHistogram put_latency_ns;
};

bool Cancelled(const std::atomic<bool>* cancel) {
  return cancel != nullptr && cancel->load(std::memory_order_relaxed);
}

// Runs body(i) for i in [0, threads) on that many threads while the calling
// thread reports progress once per `interval`. `completed` sums the threads'
// progress; `total` is the phase's size (0 when timed). Once `time_limit`
// (may be infinite) has passed since the start, or `cancel` is set, `stop`
// is set; the bodies must poll it. Returns the phase's wall time, measured
// until the last thread finished.
absl::Duration RunPhase(int threads, const std::function<void(int)>& body,
                        const std::function<uint64_t()>& completed, bool preloading, uint64_t total,
                        absl::Duration interval, absl::Duration time_limit, std::atomic<bool>& stop,
                        const std::atomic<bool>* cancel,
                        const std::function<void(const BenchProgress&)>& progress) {
  absl::Notification all_done;
  std::atomic<int> running{threads};
  std::vector<std::thread> pool;
  pool.reserve(threads);
  const SteadyClock::time_point start = SteadyClock::now();
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      body(i);
      if (running.fetch_sub(1, std::memory_order_acq_rel) == 1) all_done.Notify();
    });
  }

  // Cancellation is also polled by the workers themselves; the reporter only
  // needs to look at it often enough to stop a phase whose workers are
  // blocked for a long time in one operation.
  const absl::Duration poll = std::min(interval, absl::Milliseconds(100));
  absl::Duration next_report = interval;
  uint64_t last_ops = 0;
  absl::Duration last_elapsed = absl::ZeroDuration();
  for (;;) {
    const absl::Duration elapsed = Since(start);
    absl::Duration wait = std::min(next_report, time_limit) - elapsed;
    wait = std::clamp(wait, absl::ZeroDuration(), poll);
    if (all_done.WaitForNotificationWithTimeout(wait)) break;

    const absl::Duration now = Since(start);
    if (now >= time_limit || Cancelled(cancel)) stop.store(true, std::memory_order_relaxed);
    if (now >= next_report) {
      const uint64_t ops = completed();
      if (progress) {
        BenchProgress p;
        p.preloading = preloading;
        p.elapsed = now;
        p.ops = ops;
        p.total = total;
        p.ops_per_sec =
            static_cast<double>(ops - last_ops) / absl::ToDoubleSeconds(now - last_elapsed);
        progress(p);
      }
      last_ops = ops;
      last_elapsed = now;
      // Skip ticks missed while a slow callback ran rather than bursting.
      while (next_report <= now) next_report += interval;
    }
  }
  for (std::thread& t : pool) t.join();
  return Since(start);
}

// PUTs every key once. OK, the first failing PUT's status, or kCancelled.
absl::Status Preload(const BenchConfig& config, BenchTarget& target, const ValuePool& values,
                     const std::function<void(const BenchProgress&)>& progress,
                     const std::atomic<bool>* cancel, absl::Duration* elapsed) {
  // No point in more threads than keys.
  const int threads =
      static_cast<int>(std::min<uint64_t>(config.keys, static_cast<uint64_t>(config.concurrency)));
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<bool> stop{false};
  FirstError failure;
  auto body = [&](int thread) {
    std::mt19937_64 rng = MakeRng(config.seed, kStreamPreload, static_cast<uint64_t>(thread));
    char buf[32];
    while (!stop.load(std::memory_order_relaxed) && !Cancelled(cancel)) {
      const uint64_t index = next.fetch_add(1, std::memory_order_relaxed);
      if (index >= config.keys) break;
      const absl::Status status = target.Put(FormatKey(index, buf), values.Pick(rng));
      if (!status.ok()) {
        failure.Note(status);
        stop.store(true, std::memory_order_relaxed);
        break;
      }
      done.fetch_add(1, std::memory_order_relaxed);
    }
  };
  *elapsed = RunPhase(
      threads, body, [&] { return done.load(std::memory_order_relaxed); },
      /*preloading=*/true, config.keys, config.progress_interval, absl::InfiniteDuration(), stop,
      cancel, progress);
  if (failure.noted()) {
    const absl::Status first = failure.Get();
    return absl::Status(first.code(), absl::StrCat("preload: PUT failed: ", first.message()));
  }
  if (done.load() < config.keys) {
    return absl::CancelledError(
        absl::StrCat("preload interrupted after ", done.load(), " of ", config.keys, " keys"));
  }
  return absl::OkStatus();
}

}  // namespace

double BenchResult::OpsPerSecond() const {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  return seconds > 0 ? static_cast<double>(ops) / seconds : 0;
}

double BenchResult::GigabytesPerSecond() const {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  return seconds > 0 ? static_cast<double>(get_bytes + put_bytes) / seconds / 1e9 : 0;
}

std::string FormatProgressLine(const BenchProgress& progress) {
  if (progress.preloading) {
    return absl::StrFormat("preload %6.1fs  %d/%d keys  %.0f keys/s",
                           absl::ToDoubleSeconds(progress.elapsed), progress.ops, progress.total,
                           progress.ops_per_sec);
  }
  std::string line =
      absl::StrFormat("bench %6.1fs  %d ops  %.0f ops/s", absl::ToDoubleSeconds(progress.elapsed),
                      progress.ops, progress.ops_per_sec);
  if (progress.total > 0) absl::StrAppend(&line, absl::StrFormat("  (of %d)", progress.total));
  return line;
}

absl::StatusOr<BenchResult> RunBench(const BenchConfig& config, BenchTarget& target,
                                     absl::string_view transport,
                                     const std::function<void(const BenchProgress&)>& progress,
                                     const std::atomic<bool>* cancel) {
  absl::Status valid = ValidateBenchConfig(config);
  if (!valid.ok()) return valid;

  BenchResult result;
  result.config = config;
  result.transport = std::string(transport);
  const ValuePool values(config.seed, config.value_size);

  if (config.preload) {
    absl::Status status =
        Preload(config, target, values, progress, cancel, &result.preload_elapsed);
    if (!status.ok()) return status;
    result.preload_keys = config.keys;
  }

  std::vector<std::unique_ptr<WorkerState>> workers;
  workers.reserve(config.concurrency);
  for (int i = 0; i < config.concurrency; ++i) workers.push_back(std::make_unique<WorkerState>());
  std::atomic<uint64_t> issued{0};  // operations claimed, when ops > 0
  std::atomic<bool> stop{false};
  FirstError first_error;

  auto body = [&](int thread) {
    WorkerState& state = *workers[thread];
    std::mt19937_64 rng = MakeRng(config.seed, kStreamWorkers, static_cast<uint64_t>(thread));
    char buf[32];
    uint64_t done = 0;
    for (;;) {
      if (stop.load(std::memory_order_relaxed) || Cancelled(cancel)) break;
      if (config.ops > 0 && issued.fetch_add(1, std::memory_order_relaxed) >= config.ops) break;
      const absl::string_view key = FormatKey(UniformBelow(rng, config.keys), buf);
      if (UniformUnit(rng) < config.get_ratio) {
        ++state.gets;
        const SteadyClock::time_point start = SteadyClock::now();
        absl::StatusOr<uint64_t> size = target.Get(key);
        const uint64_t ns = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - start)
                .count());
        if (size.ok()) {
          state.get_bytes += *size;
          state.get_latency_ns.Record(ns);
        } else if (absl::IsNotFound(size.status())) {
          ++state.misses;
          state.get_latency_ns.Record(ns);
        } else {
          ++state.errors;
          first_error.Note(size.status());
        }
      } else {
        ++state.puts;
        const absl::string_view value = values.Pick(rng);
        const SteadyClock::time_point start = SteadyClock::now();
        const absl::Status status = target.Put(key, value);
        const uint64_t ns = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - start)
                .count());
        if (status.ok()) {
          state.put_bytes += value.size();
          state.put_latency_ns.Record(ns);
        } else {
          ++state.errors;
          first_error.Note(status);
        }
      }
      // Single writer: a store is enough, and cheaper than fetch_add.
      state.done.store(++done, std::memory_order_relaxed);
    }
  };
  auto completed = [&] {
    uint64_t sum = 0;
    for (const auto& w : workers) sum += w->done.load(std::memory_order_relaxed);
    return sum;
  };
  const absl::Duration time_limit = config.ops > 0 ? absl::InfiniteDuration() : config.duration;
  result.elapsed = RunPhase(config.concurrency, body, completed, /*preloading=*/false, config.ops,
                            config.progress_interval, time_limit, stop, cancel, progress);

  for (const auto& w : workers) {
    result.ops += w->done.load(std::memory_order_relaxed);
    result.gets += w->gets;
    result.puts += w->puts;
    result.misses += w->misses;
    result.errors += w->errors;
    result.get_bytes += w->get_bytes;
    result.put_bytes += w->put_bytes;
    result.get_latency_ns.Merge(w->get_latency_ns);
    result.put_latency_ns.Merge(w->put_latency_ns);
  }
  result.all_latency_ns = result.get_latency_ns;
  result.all_latency_ns.Merge(result.put_latency_ns);
  result.first_error = first_error.Get();
  result.interrupted = Cancelled(cancel);
  return result;
}

// ---------------------------------------------------------------------------
// Reporting

namespace {

double Micros(double ns) { return ns / 1000; }

std::string LatencyRow(absl::string_view name, const LatencyHistogram& h) {
  return absl::StrFormat("  %-6s%11d%11.1f%11.1f%11.1f%11.1f%11.1f\n", name, h.count(),
                         Micros(h.Mean()), Micros(h.Percentile(50)), Micros(h.Percentile(99)),
                         Micros(h.Percentile(99.9)), Micros(static_cast<double>(h.max())));
}

// Rounds to 3 decimals so JSON numbers stay short ("12.345", not
// "12.345000000000001" after arithmetic).
double Round3(double x) { return std::round(x * 1000) / 1000; }

nlohmann::ordered_json LatencyJson(const LatencyHistogram& h) {
  nlohmann::ordered_json j;
  j["count"] = h.count();
  j["mean"] = Round3(Micros(h.Mean()));
  j["p50"] = Round3(Micros(h.Percentile(50)));
  j["p99"] = Round3(Micros(h.Percentile(99)));
  j["p999"] = Round3(Micros(h.Percentile(99.9)));
  j["max"] = Round3(Micros(static_cast<double>(h.max())));
  return j;
}

std::string StatusText(const absl::Status& status) {
  if (status.ok()) return "";
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

}  // namespace

std::string FormatBenchReport(const BenchResult& r) {
  const BenchConfig& c = r.config;
  std::string out;
  absl::StrAppendFormat(&out, "transport   %s\n", r.transport);
  absl::StrAppendFormat(&out, "seed        %d\n", c.seed);
  absl::StrAppendFormat(&out, "workload    %d keys, %d-byte values, %g%% GET, %d threads\n", c.keys,
                        c.value_size, c.get_ratio * 100, c.concurrency);
  if (r.preload_keys > 0) {
    absl::StrAppendFormat(&out, "preload     %d keys in %.2f s\n", r.preload_keys,
                          absl::ToDoubleSeconds(r.preload_elapsed));
  }
  absl::StrAppendFormat(&out, "ops         %d in %.2f s = %.1f ops/s%s\n", r.ops,
                        absl::ToDoubleSeconds(r.elapsed), r.OpsPerSecond(),
                        r.interrupted ? " (interrupted)" : "");
  absl::StrAppendFormat(&out, "gets        %d (misses %d)\n", r.gets, r.misses);
  absl::StrAppendFormat(&out, "puts        %d\n", r.puts);
  absl::StrAppendFormat(&out, "errors      %d\n", r.errors);
  if (!r.first_error.ok()) {
    absl::StrAppendFormat(&out, "first error %s\n", StatusText(r.first_error));
  }
  absl::StrAppendFormat(&out, "throughput  %.3f GB/s of values (%d bytes)\n",
                        r.GigabytesPerSecond(), r.get_bytes + r.put_bytes);
  // "µs" is two bytes, so it stays out of the width-formatted header.
  absl::StrAppend(&out, "latency (µs)\n");
  absl::StrAppendFormat(&out, "  %-6s%11s%11s%11s%11s%11s%11s\n", "", "count", "mean", "p50", "p99",
                        "p99.9", "max");
  absl::StrAppend(&out, LatencyRow("get", r.get_latency_ns));
  absl::StrAppend(&out, LatencyRow("put", r.put_latency_ns));
  absl::StrAppend(&out, LatencyRow("all", r.all_latency_ns));
  return out;
}

std::string BenchResultToJson(const BenchResult& r) {
  const BenchConfig& c = r.config;
  nlohmann::ordered_json j;
  j["transport"] = r.transport;
  j["seed"] = c.seed;
  j["keys"] = c.keys;
  j["value_size"] = c.value_size;
  j["get_ratio"] = c.get_ratio;
  j["concurrency"] = c.concurrency;
  j["preload_keys"] = r.preload_keys;
  j["preload_seconds"] = Round3(absl::ToDoubleSeconds(r.preload_elapsed));
  j["seconds"] = Round3(absl::ToDoubleSeconds(r.elapsed));
  j["ops"] = r.ops;
  j["ops_per_sec"] = Round3(r.OpsPerSecond());
  j["gets"] = r.gets;
  j["puts"] = r.puts;
  j["misses"] = r.misses;
  j["errors"] = r.errors;
  j["first_error"] = StatusText(r.first_error);
  j["interrupted"] = r.interrupted;
  j["value_bytes"] = r.get_bytes + r.put_bytes;
  j["gb_per_sec"] = Round3(r.GigabytesPerSecond());
  j["latency_us"]["get"] = LatencyJson(r.get_latency_ns);
  j["latency_us"]["put"] = LatencyJson(r.put_latency_ns);
  j["latency_us"]["all"] = LatencyJson(r.all_latency_ns);
  // Error messages may quote binary keys: replace invalid UTF-8 rather than
  // throw.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// ---------------------------------------------------------------------------
// Command-line preprocessing

namespace {

bool IsHelpFlag(absl::string_view name) {
  return name == "h" || name == "help" || name == "helpfull" || name == "helpshort" ||
         name == "helppackage" || name == "helpon" || name == "helpmatch";
}

}  // namespace

PreprocessedArgs PreprocessArgs(const std::vector<std::string>& argv,
                                const std::function<FlagKind(absl::string_view)>& kind_of) {
  PreprocessedArgs out;
  out.argv.reserve(argv.size());
  bool flags_ended = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    // argv[0], positionals (a lone "-" too) and everything after "--".
    if (i == 0 || flags_ended || arg.size() < 2 || arg[0] != '-') {
      out.argv.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_ended = true;
      out.argv.push_back(arg);
      continue;
    }
    const size_t dashes = arg[1] == '-' ? 2 : 1;
    const absl::string_view body = absl::string_view(arg).substr(dashes);
    const size_t eq = body.find('=');
    const absl::string_view value_part =
        eq == absl::string_view::npos ? absl::string_view() : body.substr(eq);
    std::string name = absl::StrReplaceAll(body.substr(0, eq), {{"-", "_"}});
    if (IsHelpFlag(name)) {
      out.help = true;
      out.argv.push_back(arg);
      continue;
    }
    FlagKind kind = kind_of(name);
    std::string given = name;
    if (kind == FlagKind::kUnknown) {
      // Negated booleans: --nojson, and the hyphenated --no-json.
      absl::string_view base = name;
      if (absl::ConsumePrefix(&base, "no")) {
        absl::ConsumePrefix(&base, "_");
        if (!base.empty() && kind_of(base) == FlagKind::kBool) {
          kind = FlagKind::kBool;
          given = std::string(base);
          name = absl::StrCat("no", base);
        }
      }
    }
    if (kind == FlagKind::kUnknown) {
      out.argv.push_back(arg);  // absl reports it, under the user's spelling
      continue;
    }
    out.given.insert(given);
    out.argv.push_back(absl::StrCat(std::string(dashes, '-'), name, value_part));
    if (kind == FlagKind::kTakesValue && eq == absl::string_view::npos && i + 1 < argv.size()) {
      out.argv.push_back(argv[++i]);  // the value, whatever it looks like
    }
  }
  return out;
}

}  // namespace client
}  // namespace kvstore
