// Copyright 2026 The kvstore Authors.

#include "common/metrics/registry.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// The family called `name` in `s`, or null: snapshots are sorted vectors,
// and tests look families up by name.
const FamilySnapshot* FindFamily(const Snapshot& s, const std::string& name) {
  for (const FamilySnapshot& f : s.families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// Increment adds, and one (name, labels) pair is one object however often
// it is registered.
TEST(RegistryTest, CounterCountsAndIsSharedByName) {
  Registry r;
  Counter* c = r.AddCounter("kvstore_test_ops_total", "Ops.", {{"op", "get"}});
  c->Increment();
  c->Increment(41);
  EXPECT_EQ(c->Value(), 42u);
  // Same name, help and labels: the same series, so two components that
  // both count gets add up instead of shadowing each other.
  EXPECT_EQ(r.AddCounter("kvstore_test_ops_total", "Ops.", {{"op", "get"}}), c);
  EXPECT_NE(r.AddCounter("kvstore_test_ops_total", "Ops.", {{"op", "set"}}), c);
}

// Labels are a set: the order a caller lists them in names no new series,
// and the snapshot shows them sorted by name.
TEST(RegistryTest, LabelOrderDoesNotMatter) {
  Registry r;
  Counter* a =
      r.AddCounter("kvstore_test_ops_total", "Ops.", {{"transport", "rdma"}, {"op", "get"}});
  Counter* b =
      r.AddCounter("kvstore_test_ops_total", "Ops.", {{"op", "get"}, {"transport", "rdma"}});
  EXPECT_EQ(a, b);
  const Snapshot s = r.TakeSnapshot();
  ASSERT_EQ(s.families.size(), 1u);
  ASSERT_EQ(s.families[0].samples.size(), 1u);
  EXPECT_THAT(s.families[0].samples[0].labels,
              ElementsAre(Pair("op", "get"), Pair("transport", "rdma")));
}

// Gauges go both ways, below zero included.
TEST(RegistryTest, GaugeSetAndAdd) {
  Registry r;
  Gauge* g = r.AddGauge("kvstore_test_connections", "Open connections.");
  g->Set(10);
  g->Add(-3);
  g->Add(1);
  EXPECT_EQ(g->Value(), 8);
  g->Add(-20);
  EXPECT_EQ(g->Value(), -12);
}

// Bucket choice at and around the bounds, where an off-by-one would put a
// 2 us RDMA read in the 4 us bucket.
TEST(RegistryTest, HistogramBucketIndexBoundaries) {
  // Upper bounds are inclusive (Prometheus "le"): exactly 1 us is bucket 0,
  // 1 ns over it is bucket 1 (2 us).
  EXPECT_EQ(Histogram::BucketIndex(0), 0);
  EXPECT_EQ(Histogram::BucketIndex(1), 0);
  EXPECT_EQ(Histogram::BucketIndex(1000), 0);
  EXPECT_EQ(Histogram::BucketIndex(1001), 1);
  EXPECT_EQ(Histogram::BucketIndex(2000), 1);
  EXPECT_EQ(Histogram::BucketIndex(2001), 2);
  EXPECT_EQ(Histogram::BucketIndex(3000), 2);
  EXPECT_EQ(Histogram::BucketIndex(4000), 2);
  EXPECT_EQ(Histogram::BucketIndex(4001), 3);
  EXPECT_EQ(Histogram::BucketIndex(1000 * 1000), 10);         // 1 ms <= 2^10 us
  EXPECT_EQ(Histogram::BucketIndex(1000 * 1000 * 1000), 20);  // 1 s <= 2^20 us
  const uint64_t last_bound_ns =
      Histogram::BucketUpperBoundMicros(Histogram::kFiniteBuckets - 1) * 1000;
  EXPECT_EQ(Histogram::BucketIndex(last_bound_ns), Histogram::kFiniteBuckets - 1);
  EXPECT_EQ(Histogram::BucketIndex(last_bound_ns + 1), Histogram::kFiniteBuckets);
  EXPECT_EQ(Histogram::BucketIndex(~uint64_t{0}), Histogram::kFiniteBuckets);
}

// The snapshot turns per-bucket counts into the cumulative counts of the
// format, with +Inf equal to the count and the sum exact in nanoseconds.
TEST(RegistryTest, HistogramSnapshotIsCumulative) {
  Registry r;
  Histogram* h = r.AddHistogram("kvstore_test_latency_seconds", "Latency.", {{"op", "get"}});
  h->ObserveMicros(1);                  // bucket 0 (le 1us)
  h->Observe(absl::Nanoseconds(1500));  // bucket 1 (le 2us)
  h->Observe(absl::Microseconds(3));    // bucket 2 (le 4us)
  h->Observe(absl::Microseconds(3));    // bucket 2
  h->Observe(absl::Seconds(100));       // +Inf
  h->Observe(-absl::Seconds(1));        // clamped to 0: bucket 0
  const Snapshot s = r.TakeSnapshot();
  const FamilySnapshot* f = FindFamily(s, "kvstore_test_latency_seconds");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, MetricKind::kHistogram);
  ASSERT_EQ(f->samples.size(), 1u);
  const HistogramSnapshot& hs = f->samples[0].histogram;
  // Layout: every finite bound, then one more count for +Inf.
  ASSERT_EQ(hs.upper_bounds_micros.size(), static_cast<size_t>(Histogram::kFiniteBuckets));
  ASSERT_EQ(hs.cumulative_counts.size(), static_cast<size_t>(Histogram::kFiniteBuckets + 1));
  EXPECT_EQ(hs.upper_bounds_micros[0], 1u);
  EXPECT_EQ(hs.upper_bounds_micros[3], 8u);
  // 1 us and the clamped negative; then 1.5 us; then the two 3 us.
  EXPECT_EQ(hs.cumulative_counts[0], 2u);
  EXPECT_EQ(hs.cumulative_counts[1], 3u);
  EXPECT_EQ(hs.cumulative_counts[2], 5u);
  // 100 s is past the last bound (4.19 s): only +Inf counts it.
  EXPECT_EQ(hs.cumulative_counts[Histogram::kFiniteBuckets - 1], 5u);
  EXPECT_EQ(hs.cumulative_counts[Histogram::kFiniteBuckets], 6u);
  EXPECT_EQ(hs.count, 6u);
  EXPECT_EQ(hs.sum_nanos, 1000u + 1500u + 3000u + 3000u + 100000000000u);
}

// Several writers on the same objects: relaxed atomics lose no update.
TEST(RegistryTest, ConcurrentUpdatesAreNotLost) {
  Registry r;
  Counter* c = r.AddCounter("kvstore_test_ops_total", "Ops.");
  Gauge* g = r.AddGauge("kvstore_test_inflight", "In flight.");
  Histogram* h = r.AddHistogram("kvstore_test_latency_seconds", "Latency.");
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100000;
  std::atomic<bool> stop{false};
  // A scraper runs throughout, as Prometheus would, to show that snapshots
  // neither block nor corrupt the hot path.
  std::thread scraper([&] {
    while (!stop.load()) {
      const Snapshot s = r.TakeSnapshot();
      ASSERT_EQ(s.families.size(), 3u);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // Thread t observes t+1 us, so the sum tells whether any thread's
    // observations went missing.
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        c->Increment();
        g->Add(1);
        g->Add(-1);
        h->ObserveMicros(static_cast<uint64_t>(t + 1));
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  scraper.join();
  // Exact totals: every add arrived.
  EXPECT_EQ(c->Value(), uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(g->Value(), 0);
  const Snapshot s = r.TakeSnapshot();
  const HistogramSnapshot& hs = FindFamily(s, "kvstore_test_latency_seconds")->samples[0].histogram;
  EXPECT_EQ(hs.count, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(hs.sum_nanos, uint64_t{kPerThread} * (1 + 2 + 3 + 4) * 1000);
}

// Racing registrations of one series (two components starting together)
// get one object, not two that split the count.
TEST(RegistryTest, ConcurrentRegistrationOfOneSeriesGivesOneObject) {
  Registry r;
  constexpr int kThreads = 4;
  std::vector<Counter*> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      got[t] = r.AddCounter("kvstore_test_ops_total", "Ops.", {{"op", "get"}});
      got[t]->Increment();
    });
  }
  for (auto& th : threads) th.join();
  for (Counter* c : got) EXPECT_EQ(c, got[0]);
  EXPECT_EQ(got[0]->Value(), uint64_t{kThreads});
}

TEST(RegistryTest, CallbackGaugeIsEvaluatedAtSnapshotAndRemovedWithHandle) {
  Registry r;
  std::atomic<int64_t> used{0};
  {
    CallbackHandle handle = r.AddCallbackGauge("kvstore_test_pool_used_bytes", "Pool bytes in use.",
                                               {{"pool", "main"}}, [&] { return used.load(); });
    EXPECT_TRUE(handle.registered());
    used = 4096;
    Snapshot s = r.TakeSnapshot();
    ASSERT_NE(FindFamily(s, "kvstore_test_pool_used_bytes"), nullptr);
    EXPECT_EQ(FindFamily(s, "kvstore_test_pool_used_bytes")->samples[0].gauge, 4096);
    used = 8192;
    s = r.TakeSnapshot();
    EXPECT_EQ(FindFamily(s, "kvstore_test_pool_used_bytes")->samples[0].gauge, 8192);
    // Moving the handle keeps the registration.
    CallbackHandle moved = std::move(handle);
    EXPECT_FALSE(handle.registered());  // NOLINT(bugprone-use-after-move): documented state
    EXPECT_NE(FindFamily(r.TakeSnapshot(), "kvstore_test_pool_used_bytes"), nullptr);
  }
  // Handle gone: the series and its (now empty) family are gone.
  EXPECT_EQ(FindFamily(r.TakeSnapshot(), "kvstore_test_pool_used_bytes"), nullptr);
}

// A counter whose value lives elsewhere is exposed as a counter.
TEST(RegistryTest, CallbackCounter) {
  Registry r;
  uint64_t n = 7;
  CallbackHandle handle =
      r.AddCallbackCounter("kvstore_test_evictions_total", "Evictions.", {}, [&] { return n; });
  const Snapshot s = r.TakeSnapshot();
  const FamilySnapshot* f = FindFamily(s, "kvstore_test_evictions_total");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, MetricKind::kCounter);
  EXPECT_EQ(f->samples[0].counter, 7u);
}

TEST(RegistryTest, CallbackMayRegisterWhileScrapeRuns) {
  // A callback that blocks (e.g. on the store's lock) must not block
  // registration elsewhere: registration does not wait for callbacks.
  Registry r;
  absl::Notification in_callback, release;
  CallbackHandle handle = r.AddCallbackGauge("kvstore_test_slow", "Slow.", {}, [&] {
    in_callback.Notify();
    release.WaitForNotification();
    return int64_t{1};
  });
  std::thread scraper([&] { r.TakeSnapshot(); });
  in_callback.WaitForNotification();
  Counter* c = r.AddCounter("kvstore_test_ops_total", "Ops.");
  c->Increment();
  release.Notify();
  scraper.join();
  EXPECT_EQ(c->Value(), 1u);
}

// Families by name, children by labels, whatever the registration order:
// the exposition and the flat map are then deterministic.
TEST(RegistryTest, SnapshotIsSorted) {
  Registry r;
  r.AddGauge("kvstore_b", "B.", {{"k", "2"}});
  r.AddGauge("kvstore_b", "B.", {{"k", "1"}});
  r.AddGauge("kvstore_a", "A.");
  const Snapshot s = r.TakeSnapshot();
  ASSERT_EQ(s.families.size(), 2u);
  EXPECT_EQ(s.families[0].name, "kvstore_a");
  EXPECT_EQ(s.families[1].name, "kvstore_b");
  EXPECT_THAT(s.families[1].samples[0].labels, ElementsAre(Pair("k", "1")));
  EXPECT_THAT(s.families[1].samples[1].labels, ElementsAre(Pair("k", "2")));
}

// Default() is a process-wide singleton.
TEST(RegistryTest, DefaultIsOneInstance) { EXPECT_EQ(&Registry::Default(), &Registry::Default()); }

using RegistryDeathTest = ::testing::Test;

// Each programming error aborts at registration, with a message that names
// the metric and the rule it broke.
TEST(RegistryDeathTest, MisuseAbortsWithTheMetricName) {
  Registry r;
  // Names and units.
  EXPECT_DEATH(r.AddCounter("requests_total", "No prefix."), "kvstore_");
  EXPECT_DEATH(r.AddCounter("kvstore_Requests_total", "Camel."), "kvstore_Requests_total");
  EXPECT_DEATH(r.AddCounter("kvstore_requests", "No suffix."), "_total");
  EXPECT_DEATH(r.AddGauge("kvstore_requests_total", "Gauge named as counter."), "only counters");
  EXPECT_DEATH(r.AddHistogram("kvstore_latency_micros", "Wrong unit."), "_seconds");
  EXPECT_DEATH(r.AddGauge("kvstore_x", ""), "help");
  // Labels: "le" is the histogram bucket label, and a name twice is ambiguous.
  EXPECT_DEATH(r.AddHistogram("kvstore_x_seconds", "Le.", {{"le", "1"}}), "bad label name");
  EXPECT_DEATH(r.AddGauge("kvstore_x", "Dup.", {{"a", "1"}, {"a", "2"}}), "given twice");
  // Conflicts with an existing family.
  r.AddGauge("kvstore_x", "X.", {{"a", "1"}});
  EXPECT_DEATH(r.AddCounter("kvstore_x", "X."), "");  // kind conflict (also no _total)
  EXPECT_DEATH(r.AddGauge("kvstore_x", "Other help.", {{"a", "1"}}), "two help texts");
  EXPECT_DEATH(r.AddGauge("kvstore_x", "X.", {{"b", "1"}}), "label names of the family");
  r.AddCounter("kvstore_y_total", "Y.");
  EXPECT_DEATH(r.AddGauge("kvstore_y_total", "Y."), "");
  EXPECT_DEATH(r.AddHistogram("kvstore_x", "X.", {{"a", "1"}}), "_seconds");
  // A callback series cannot also be a plain one, nor have two callbacks.
  CallbackHandle h = r.AddCallbackGauge("kvstore_z", "Z.", {}, [] { return int64_t{0}; });
  EXPECT_DEATH(r.AddGauge("kvstore_z", "Z."), "callback series");
  EXPECT_DEATH(
      { CallbackHandle h2 = r.AddCallbackGauge("kvstore_z", "Z.", {}, [] { return int64_t{0}; }); },
      "already registered");
}

TEST(RegistryDeathTest, KindConflictNamesBothKinds) {
  Registry r;
  r.AddGauge("kvstore_w_seconds", "W.");
  EXPECT_DEATH(r.AddHistogram("kvstore_w_seconds", "W."),
               "registered as a gauge and as a histogram");
}

}  // namespace
}  // namespace metrics
}  // namespace kvstore
