// Copyright 2026 The kvstore Authors.
//
// RunBench(): threads, randomness and tallies for `kvctl bench`.
//
// A run has up to two phases, both driven by RunPhase(): the optional
// preload (every key PUT once, keys handed out from a shared counter) and
// the timed mix (each worker picks keys and operations from its own
// generator). Workers tally into private state that is merged after the
// join; on the hot path they share only the claim counter of a counted run
// (`issued`), the first-error slot, and the target itself.

#include "client/kvctl/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace kvstore {
namespace client {
namespace {

// Steady, not system, time: a clock step must not distort latencies.
using SteadyClock = std::chrono::steady_clock;

absl::Duration Since(SteadyClock::time_point start) {
  return absl::FromChrono(SteadyClock::now() - start);
}

// Nanoseconds from `start` until now, for one operation's latency.
uint64_t NanosSince(SteadyClock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - start).count());
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

// The generator for thread `index` of purpose `stream` in a run seeded with
// `seed`. mt19937_64's output is fixed by the standard, so a seed replays the
// same choices on every platform.
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
// Thread safety: immutable after construction; Pick() may run concurrently.
class ValuePool {
 public:
  // Fills value_size + kSlack bytes from the kStreamValuePool generator.
  ValuePool(uint64_t seed, uint64_t value_size)
      : value_size_(value_size), data_(value_size + kSlack, '\0') {
    std::mt19937_64 rng = MakeRng(seed, kStreamValuePool, 0);
    for (size_t i = 0; i < data_.size(); i += sizeof(uint64_t)) {
      const uint64_t word = rng();
      const size_t n = std::min(sizeof(word), data_.size() - i);
      std::memcpy(&data_[i], &word, n);
    }
  }

  // A value_size-byte view into the pool, valid while the pool lives.
  absl::string_view Pick(std::mt19937_64& rng) const {
    return absl::string_view(data_.data() + UniformBelow(rng, kSlack + 1), value_size_);
  }

 private:
  static constexpr uint64_t kSlack = 4096;
  const uint64_t value_size_;
  std::string data_;
};

// Remembers the first error reported by any thread. Thread-safe.
class FirstError {
 public:
  // Keeps `status` if it is the first one noted.
  void Note(const absl::Status& status) {
    if (noted_.load(std::memory_order_relaxed)) return;  // cheap after the first
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = status;
    noted_.store(true, std::memory_order_relaxed);
  }
  // Whether Note() has been called.
  bool noted() const { return noted_.load(std::memory_order_relaxed); }
  // The first noted status; OK if none.
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
  // The last body to finish wakes the reporter at once instead of at its
  // next poll, so short runs are not rounded up to a poll interval.
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
    // Sleep until the next report, the time limit or the next poll,
    // whichever comes first.
    const absl::Duration elapsed = Since(start);
    absl::Duration wait = std::min(next_report, time_limit) - elapsed;
    wait = std::clamp(wait, absl::ZeroDuration(), poll);
    if (all_done.WaitForNotificationWithTimeout(wait)) break;

    const absl::Duration now = Since(start);
    if (now >= time_limit || Cancelled(cancel)) stop.store(true, std::memory_order_relaxed);
    if (now >= next_report) {
      const uint64_t ops = completed();
      if (progress) {
        // The rate is over the last interval, not the whole phase, so a
        // slowdown shows up as it happens.
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
  // Threads claim keys from `next` rather than owning ranges, so a slow
  // thread does not leave a tail of keys for the others to wait on.
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
  // Short of keys without a failure: only cancellation stops a preload.
  if (done.load() < config.keys) {
    return absl::CancelledError(
        absl::StrCat("preload interrupted after ", done.load(), " of ", config.keys, " keys"));
  }
  return absl::OkStatus();
}

// What the timed phase's workers share. Everything but the atomics and
// `first_error` (both thread-safe) is read-only while they run.
struct TimedPhase {
  const BenchConfig& config;
  BenchTarget& target;
  const ValuePool& values;
  const std::atomic<bool>* cancel;
  std::atomic<uint64_t> issued{0};  // operations claimed, when ops > 0
  std::atomic<bool> stop{false};
  FirstError first_error;
};

// One timed GET of `key`, tallied in `state`. Misses are answers and are
// timed; errors are not.
void TimedGet(TimedPhase& phase, absl::string_view key, WorkerState& state) {
  ++state.gets;
  const SteadyClock::time_point start = SteadyClock::now();
  absl::StatusOr<uint64_t> size = phase.target.Get(key);
  const uint64_t ns = NanosSince(start);
  if (size.ok()) {
    state.get_bytes += *size;
    state.get_latency_ns.Record(ns);
  } else if (absl::IsNotFound(size.status())) {
    ++state.misses;
    state.get_latency_ns.Record(ns);
  } else {
    ++state.errors;
    phase.first_error.Note(size.status());
  }
}

// One timed PUT of `key` with a value from the pool, tallied in `state`.
void TimedPut(TimedPhase& phase, absl::string_view key, std::mt19937_64& rng, WorkerState& state) {
  ++state.puts;
  // Picked before the clock starts: only the call itself is timed.
  const absl::string_view value = phase.values.Pick(rng);
  const SteadyClock::time_point start = SteadyClock::now();
  const absl::Status status = phase.target.Put(key, value);
  const uint64_t ns = NanosSince(start);
  if (status.ok()) {
    state.put_bytes += value.size();
    state.put_latency_ns.Record(ns);
  } else {
    ++state.errors;
    phase.first_error.Note(status);
  }
}

// Worker `thread` of the timed phase: GETs and PUTs until stopped,
// cancelled, or (with config.ops) out of operations to claim.
void TimedWorker(TimedPhase& phase, int thread, WorkerState& state) {
  const BenchConfig& config = phase.config;
  std::mt19937_64 rng = MakeRng(config.seed, kStreamWorkers, static_cast<uint64_t>(thread));
  char buf[32];
  uint64_t done = 0;
  for (;;) {
    if (phase.stop.load(std::memory_order_relaxed) || Cancelled(phase.cancel)) break;
    // Claiming before the operation makes the total exactly config.ops
    // however the threads interleave.
    if (config.ops > 0 && phase.issued.fetch_add(1, std::memory_order_relaxed) >= config.ops) {
      break;
    }
    const absl::string_view key = FormatKey(UniformBelow(rng, config.keys), buf);
    if (UniformUnit(rng) < config.get_ratio) {
      TimedGet(phase, key, state);
    } else {
      TimedPut(phase, key, rng, state);
    }
    // Single writer: a store is enough, and cheaper than fetch_add.
    state.done.store(++done, std::memory_order_relaxed);
  }
}

// Adds the workers' tallies to `result`, after they have been joined.
void MergeWorkers(const std::vector<std::unique_ptr<WorkerState>>& workers, BenchResult& result) {
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
}

}  // namespace

double BenchResult::OpsPerSecond() const {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  // Only answered operations are throughput: a server that has died fails
  // every call at once, and counting those would report its death as speed.
  const uint64_t answered = ops >= errors ? ops - errors : 0;
  return seconds > 0 ? static_cast<double>(answered) / seconds : 0;
}

double BenchResult::GigabytesPerSecond() const {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  return seconds > 0 ? static_cast<double>(get_bytes + put_bytes) / seconds / 1e9 : 0;
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
  // One pool for both phases: the seed alone determines every value.
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
  TimedPhase phase{config, target, values, cancel};
  auto body = [&](int thread) { TimedWorker(phase, thread, *workers[thread]); };
  auto completed = [&] {
    uint64_t sum = 0;
    for (const auto& w : workers) sum += w->done.load(std::memory_order_relaxed);
    return sum;
  };
  const absl::Duration time_limit = config.ops > 0 ? absl::InfiniteDuration() : config.duration;
  result.elapsed = RunPhase(config.concurrency, body, completed, /*preloading=*/false, config.ops,
                            config.progress_interval, time_limit, phase.stop, cancel, progress);

  MergeWorkers(workers, result);
  result.first_error = phase.first_error.Get();
  result.interrupted = Cancelled(cancel);
  return result;
}

}  // namespace client
}  // namespace kvstore
