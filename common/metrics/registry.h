// Copyright 2026 The kvstore Authors.
//
// The metrics registry: the one place where kvstore defines a counter, gauge
// or latency histogram. Everything that reports figures (the Prometheus
// endpoint, gRPC Stats, RESP INFO, `kvctl stat --json`) reads them from a
// Snapshot of a Registry, so every reader shows the same numbers.
//
// How to add a metric
// -------------------
// 1. Pick a name: `kvstore_` + snake_case subject + unit, following the
//    Prometheus conventions: counters end in `_total`
//    (kvstore_requests_total), sizes in `_bytes` (kvstore_pool_used_bytes),
//    latencies are histograms in `_seconds` (kvstore_request_duration_seconds).
//    The registry enforces the prefix, the `_total` suffix of counters and the
//    `_seconds` suffix of histograms.
// 2. Pick fixed labels that tell children of one family apart, e.g.
//    {{"transport", "rdma"}, {"op", "get"}}. Every child of a family must use
//    the same label names; values are fixed at registration (never a key,
//    client address or anything unbounded: each value set is a time series).
// 3. Register once, at start-up, and keep the pointer:
//        Counter* gets = registry.AddCounter("kvstore_requests_total",
//            "Requests served, by transport and operation.",
//            {{"transport", "rdma"}, {"op", "get"}});
//    then on the hot path call gets->Increment(): one relaxed atomic add, no
//    lookup, no lock. Figures that already live elsewhere (pool usage, table
//    sizes) become callback gauges evaluated at scrape time instead of being
//    copied on every change.
// 4. Nothing else: the endpoint, Stats and INFO pick the new series up from the
//    snapshot. Add a line to a test that reads it back.
//
// Misuse (a bad name, a counter without `_total`, the same name registered as
// two kinds or with two help texts, a family whose children disagree on label
// names) is a programming error with constant arguments: it aborts the process
// with a message naming the metric, at start-up, rather than letting a wrong
// series reach a dashboard.

#ifndef KVSTORE_COMMON_METRICS_REGISTRY_H_
#define KVSTORE_COMMON_METRICS_REGISTRY_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kvstore {
namespace metrics {

// The hot path relies on this: an update is one instruction, never a lock
// hidden inside std::atomic.
static_assert(std::atomic<uint64_t>::is_always_lock_free, "64-bit atomics must be lock-free");
static_assert(std::atomic<int64_t>::is_always_lock_free, "64-bit atomics must be lock-free");

// Label name/value pairs of one child, e.g. {{"transport","rdma"},{"op","get"}}.
// Order does not matter on input; the registry keeps them sorted by name.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricKind { kCounter, kGauge, kHistogram };

// "counter", "gauge" or "histogram": the Prometheus TYPE word.
absl::string_view MetricKindName(MetricKind kind);

// A monotonic uint64 counter. Created and owned by a Registry (the pointer
// stays valid for the registry's lifetime); thread-safe, lock-free.
// Cache-line aligned so that two hot counters never share a line.
class alignas(64) Counter {
 public:
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds n. Relaxed: a scrape may see increments of other counters in any
  // order, which is fine for monitoring and keeps the hot path one `lock xadd`.
  void Increment(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  // The current total (for tests and for code that reads its own counter).
  uint64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  friend class Registry;
  Counter() = default;
  std::atomic<uint64_t> value_{0};
};

// An int64 value that goes up and down (connections open, bytes in use).
// Created and owned by a Registry; thread-safe, lock-free.
class alignas(64) Gauge {
 public:
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  // Replaces the value; for a level read elsewhere (queue depth).
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  // Adds delta (negative to decrease); for levels kept by +1/-1 (connections).
  void Add(int64_t delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  // The current value.
  int64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  friend class Registry;
  Gauge() = default;
  std::atomic<int64_t> value_{0};
};

// A latency histogram with fixed exponential buckets: upper bounds of
// 2^i microseconds for i = 0..kFiniteBuckets-1 (1 us, 2 us, 4 us, ... 4.194304 s)
// plus +Inf. Powers of two cover the RDMA fast path (single microseconds) and
// the gRPC slow path (milliseconds) with one layout, and finding the bucket is
// one count-leading-zeros instruction instead of a search. Every histogram has
// the same bounds, so histograms can be summed and compared across transports.
// Exposed in seconds (Prometheus convention): le="0.000001" ... le="+Inf".
//
// Created and owned by a Registry; thread-safe, lock-free: an observation is
// two relaxed atomic adds (its bucket and the sum).
class alignas(64) Histogram {
 public:
  static constexpr int kFiniteBuckets = 23;

  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Records one observation. Negative durations count as zero; durations are
  // kept to the nanosecond in the sum.
  void Observe(absl::Duration d);
  void ObserveMicros(uint64_t micros);
  void ObserveNanos(uint64_t nanos);

  // Upper bound of finite bucket i (0 <= i < kFiniteBuckets), in microseconds.
  static uint64_t BucketUpperBoundMicros(int i) { return uint64_t{1} << i; }
  // Index of the bucket an observation of `nanos` falls in: the smallest i
  // with nanos <= BucketUpperBoundMicros(i) * 1000, or kFiniteBuckets (+Inf).
  static int BucketIndex(uint64_t nanos);

 private:
  friend class Registry;
  Histogram() = default;
  // Per-bucket (not cumulative) counts; the last one is +Inf. The total
  // count is their sum, read at snapshot time, which saves a third atomic add
  // per observation and keeps _count equal to the +Inf bucket.
  std::array<std::atomic<uint64_t>, kFiniteBuckets + 1> buckets_{};
  std::atomic<uint64_t> sum_nanos_{0};
};

// ---------------------------------------------------------------------------
// Snapshot: plain values, copied out of a registry at one time (each value is
// read atomically; different values are not read at one instant).

struct HistogramSnapshot {
  // Upper bounds of the finite buckets, microseconds, ascending.
  std::vector<uint64_t> upper_bounds_micros;
  // Cumulative counts: cumulative_counts[i] observations were <= bound i.
  // One longer than upper_bounds_micros: the last entry is +Inf (== count).
  std::vector<uint64_t> cumulative_counts;
  uint64_t count = 0;
  uint64_t sum_nanos = 0;
};

struct SampleSnapshot {
  Labels labels;                // sorted by label name
  uint64_t counter = 0;         // kCounter
  int64_t gauge = 0;            // kGauge
  HistogramSnapshot histogram;  // kHistogram
};

struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricKind kind = MetricKind::kCounter;
  std::vector<SampleSnapshot> samples;  // sorted by labels
};

// Families sorted by name: output built from it is deterministic.
struct Snapshot {
  std::vector<FamilySnapshot> families;
};

// ---------------------------------------------------------------------------

class Registry;

// Keeps a callback metric registered; destroying (or Reset()ting) it
// unregisters the callback and waits for a scrape that is running it to
// finish, so the callback's captures may be destroyed right after. Movable,
// not copyable. Must not be destroyed from inside a callback, nor while
// holding a lock that the callback takes (the wait would deadlock).
class CallbackHandle {
 public:
  // An empty handle (registers nothing).
  CallbackHandle() = default;
  // Moves take over the registration and leave `other` empty; assigning
  // over a registered handle unregisters its series first.
  CallbackHandle(CallbackHandle&& other) noexcept;
  CallbackHandle& operator=(CallbackHandle&& other) noexcept;
  ~CallbackHandle();

  // Unregisters now (see the class comment for the wait); then empty.
  void Reset();
  // Whether this handle still keeps a series registered.
  bool registered() const { return registry_ != nullptr; }

 private:
  friend class Registry;
  CallbackHandle(Registry* registry, uint64_t id) : registry_(registry), id_(id) {}
  Registry* registry_ = nullptr;
  uint64_t id_ = 0;
};

// The set of metrics of a process (Default()) or of a test (a local instance).
// Thread-safe: registration and snapshots may run concurrently with each other
// and with updates. Metric objects are owned by the registry and live as long
// as it does; the registry must outlive every CallbackHandle it returned.
class Registry {
 public:
  // An empty registry (tests make their own; production uses Default()).
  Registry();
  // Destroys the metrics: pointers from Add* dangle afterwards, and every
  // CallbackHandle must have been destroyed or Reset() before.
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The process-wide registry that kvserver and the client library use.
  // Never destroyed (so metrics stay valid during static destruction).
  static Registry& Default();

  // Returns the child of family `name` with `labels`, creating the family
  // and/or child on first use; registering the same name, help and labels
  // again returns the same object (so two components may share a series).
  // Aborts on misuse (see the file comment). Takes a mutex: call at start-up
  // and keep the pointer, not per operation.
  Counter* AddCounter(absl::string_view name, absl::string_view help, Labels labels = {});
  Gauge* AddGauge(absl::string_view name, absl::string_view help, Labels labels = {});
  Histogram* AddHistogram(absl::string_view name, absl::string_view help, Labels labels = {});

  // A gauge (or counter) whose value `fn` computes at snapshot time, e.g.
  // bytes in use read from the memory pool. `fn` runs on the snapshotting
  // thread (a scrape), possibly concurrently with the caller's other code,
  // and must be thread-safe and quick; it must not call into this Registry.
  // The series exists while the returned handle does. Unlike AddCounter, a
  // second callback with the same name and labels aborts (two sources for
  // one series is a bug). A callback counter must itself be monotonic.
  [[nodiscard]] CallbackHandle AddCallbackGauge(absl::string_view name, absl::string_view help,
                                                Labels labels, std::function<int64_t()> fn);
  [[nodiscard]] CallbackHandle AddCallbackCounter(absl::string_view name, absl::string_view help,
                                                  Labels labels, std::function<uint64_t()> fn);

  // Copies every value out (running the callbacks). Safe to call from any
  // thread at any time; cost is linear in the number of series.
  Snapshot TakeSnapshot() const;

 private:
  friend class CallbackHandle;
  struct Child;
  struct Family;
  struct Callback;

  // Finds or creates family `name` of `kind` (aborting on conflicts) and
  // validates `labels` against it; returns the family with labels sorted.
  Family* GetFamilyLocked(absl::string_view name, absl::string_view help, MetricKind kind,
                          Labels* labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Child* AddChild(absl::string_view name, absl::string_view help, MetricKind kind, Labels labels);
  CallbackHandle AddCallback(absl::string_view name, absl::string_view help, MetricKind kind,
                             Labels labels, std::function<int64_t()> gauge_fn,
                             std::function<uint64_t()> counter_fn);
  void RemoveCallback(uint64_t id);

  // Lock order: mu_ is never held while user code (a callback) runs;
  // callback_mu_ is held while callbacks run and while one is removed, so
  // removal waits for a running callback. Never take mu_ then callback_mu_.
  mutable absl::Mutex callback_mu_;
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(callback_mu_);
  std::map<std::string, std::unique_ptr<Family>, std::less<>> families_ ABSL_GUARDED_BY(mu_);
  uint64_t next_callback_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace metrics
}  // namespace kvstore

#endif  // KVSTORE_COMMON_METRICS_REGISTRY_H_
