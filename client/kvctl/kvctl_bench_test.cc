// Copyright 2026 The kvstore Authors.
//
// Tests of kvctl's benchmark engine: the latency histogram, flag parsing,
// RunBench() against an in-memory target, and the reports. No server is
// involved.
//
// Randomised tests draw from one seed, printed at the start and attached to
// every failure; rerun with KVCTL_BENCH_TEST_SEED=<seed> to reproduce.

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/kvctl/bench_config.h"
#include "client/kvctl/bench_report.h"
#include "client/kvctl/bench_runner.h"
#include "client/kvctl/latency_histogram.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace client {
namespace {

using ::kvstore::testing::Eventually;
using ::testing::HasSubstr;

// The seed of this test run: KVCTL_BENCH_TEST_SEED if set, else the clock.
uint64_t TestSeed() {
  // Drawn and printed once, on first use, so that every test in the run
  // shares it and the log of a failing run names it.
  static const uint64_t seed = [] {
    uint64_t s = 0;
    const char* env = std::getenv("KVCTL_BENCH_TEST_SEED");
    if (env == nullptr || !absl::SimpleAtoi(env, &s)) {
      s = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
    }
    std::printf("kvctl_bench_test seed: %" PRIu64 " (set KVCTL_BENCH_TEST_SEED to reproduce)\n", s);
    return s;
  }();
  return seed;
}

// Every test that uses randomness starts with this, so a failure names the
// seed that produced it.
#define SEEDED_TEST_PREAMBLE() SCOPED_TRACE(absl::StrCat("KVCTL_BENCH_TEST_SEED=", TestSeed()))

// The nearest-rank percentile of sorted samples: the definition
// LatencyHistogram::Percentile approximates.
double ExactPercentile(const std::vector<uint64_t>& sorted, double p) {
  if (p <= 0) return static_cast<double>(sorted.front());
  // The histogram's rank rule and rounding margin, so that the only
  // difference a comparison measures is the bucketing.
  const double exact = p / 100 * static_cast<double>(sorted.size());
  size_t rank = static_cast<size_t>(std::ceil(exact - exact * 1e-12));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return static_cast<double>(sorted[rank - 1]);
}

// Records `samples` and checks a sweep of percentiles against the exact
// values within `tolerance` (relative).
void ExpectPercentilesClose(std::vector<uint64_t> samples, double tolerance) {
  LatencyHistogram h;
  for (uint64_t v : samples) h.Record(v);
  std::sort(samples.begin(), samples.end());
  for (double p : {0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    const double want = ExactPercentile(samples, p);
    const double got = h.Percentile(p);
    EXPECT_NEAR(got, want, want * tolerance) << "p" << p;
  }
  // Count and extremes are kept exactly, not bucketed.
  EXPECT_EQ(h.count(), samples.size());
  EXPECT_EQ(h.min(), samples.front());
  EXPECT_EQ(h.max(), samples.back());
}

// ---------------------------------------------------------------------------
// LatencyHistogram

// An empty histogram reports 0 everywhere rather than UINT64_MAX (the
// internal min sentinel) or NaN (a 0/0 mean).
TEST(LatencyHistogramTest, EmptyReportsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.Mean(), 0);
  EXPECT_EQ(h.Percentile(50), 0);
  EXPECT_EQ(h.Percentile(100), 0);
}

// Walks all buckets: they tile [0, UINT64_MAX] with no gap or overlap, the
// index functions invert each other, and each bucket keeps the 1/128
// precision bound that the 0.4% error claim rests on.
TEST(LatencyHistogramTest, LayoutCoversEveryValueOnce) {
  // Both ends of the uint64_t range are covered.
  EXPECT_EQ(LatencyHistogram::BucketLow(0), 0u);
  EXPECT_EQ(LatencyHistogram::BucketIndex(UINT64_MAX), LatencyHistogram::kNumBuckets - 1);
  EXPECT_EQ(LatencyHistogram::BucketHigh(LatencyHistogram::kNumBuckets - 1), UINT64_MAX);
  for (int i = 0; i < LatencyHistogram::kNumBuckets; ++i) {
    const uint64_t low = LatencyHistogram::BucketLow(i);
    const uint64_t high = LatencyHistogram::BucketHigh(i);
    ASSERT_LE(low, high) << i;
    ASSERT_EQ(LatencyHistogram::BucketIndex(low), i);
    ASSERT_EQ(LatencyHistogram::BucketIndex(high), i);
    // Adjacent buckets meet exactly (no value falls between two).
    if (i + 1 < LatencyHistogram::kNumBuckets) {
      ASSERT_EQ(high + 1, LatencyHistogram::BucketLow(i + 1)) << "gap or overlap after " << i;
    }
    // The precision promise: a bucket is at most 1/128 of its lower bound
    // wide (or holds one value).
    const uint64_t width = high - low + 1;
    ASSERT_TRUE(width == 1 || width <= low / LatencyHistogram::kSubBuckets) << i;
  }
}

// The same property from the value side: any value's bucket contains it.
TEST(LatencyHistogramTest, RandomValuesLandInTheirBucket) {
  SEEDED_TEST_PREAMBLE();
  std::mt19937_64 rng(TestSeed());
  for (int n = 0; n < 100000; ++n) {
    // Spread over all magnitudes: a random value shifted right 0..63 bits.
    const uint64_t v = rng() >> (rng() % 64);
    const int i = LatencyHistogram::BucketIndex(v);
    ASSERT_GE(i, 0);
    ASSERT_LT(i, LatencyHistogram::kNumBuckets);
    ASSERT_LE(LatencyHistogram::BucketLow(i), v);
    ASSERT_GE(LatencyHistogram::BucketHigh(i), v);
  }
}

// Values below kSubBuckets have a bucket each, so percentiles are exact.
TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.Record(v);
  EXPECT_EQ(h.Percentile(50), 50);
  EXPECT_EQ(h.Percentile(99), 99);
  EXPECT_EQ(h.Percentile(1), 1);
  EXPECT_EQ(h.Percentile(100), 100);
  // The mean comes from the exact sum, not from the buckets.
  EXPECT_DOUBLE_EQ(h.Mean(), 50.5);
}

// A value above the linear range lands in a wide bucket; percentiles must
// still report it exactly when every sample is the same.
TEST(LatencyHistogramTest, ConstantDistributionIsExact) {
  LatencyHistogram h;
  for (int n = 0; n < 1000; ++n) h.Record(123457);
  // Clamping to [min, max] turns the bucket midpoint back into the value.
  EXPECT_EQ(h.Percentile(0), 123457);
  EXPECT_EQ(h.Percentile(50), 123457);
  EXPECT_EQ(h.Percentile(99.9), 123457);
  EXPECT_EQ(h.Mean(), 123457);
}

// Out-of-range and NaN percentile arguments are clamped, not undefined.
TEST(LatencyHistogramTest, PercentileArgumentIsClamped) {
  LatencyHistogram h;
  h.Record(1000);
  h.Record(5000);
  EXPECT_EQ(h.Percentile(-5), 1000);
  EXPECT_EQ(h.Percentile(0), 1000);
  EXPECT_EQ(h.Percentile(100), 5000);
  EXPECT_EQ(h.Percentile(250), 5000);
  EXPECT_EQ(h.Percentile(std::nan("")), 1000);
}

// A distribution whose percentiles are known in closed form.
TEST(LatencyHistogramTest, UniformOneToMillionAnalytic) {
  // Every integer in [1, 10^6] once: the p-th percentile is p * 10^4.
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 1000000; ++v) h.Record(v);
  for (double p : {1.0, 10.0, 50.0, 90.0, 99.0, 99.9}) {
    const double want = p * 10000;
    EXPECT_NEAR(h.Percentile(p), want, want * 0.01) << "p" << p;
  }
  EXPECT_DOUBLE_EQ(h.Mean(), 500000.5);
}

// The next three compare against exact sorted-sample percentiles for
// distributions of different shapes; 1% leaves margin over the 0.4% bound.
TEST(LatencyHistogramTest, UniformRandomWithinOnePercent) {
  SEEDED_TEST_PREAMBLE();
  std::mt19937_64 rng(TestSeed() + 1);
  std::uniform_int_distribution<uint64_t> dist(1000, 10000000);
  std::vector<uint64_t> samples(200000);
  for (uint64_t& v : samples) v = dist(rng);
  ExpectPercentilesClose(samples, 0.01);
}

TEST(LatencyHistogramTest, ExponentialWithinOnePercent) {
  SEEDED_TEST_PREAMBLE();
  // Latency-like: mean 50 us in nanoseconds, with a long tail.
  std::mt19937_64 rng(TestSeed() + 2);
  std::exponential_distribution<double> dist(1.0 / 50000);
  std::vector<uint64_t> samples(200000);
  for (uint64_t& v : samples) v = static_cast<uint64_t>(dist(rng)) + 1;
  ExpectPercentilesClose(samples, 0.01);
}

TEST(LatencyHistogramTest, LogNormalWithinOnePercent) {
  SEEDED_TEST_PREAMBLE();
  // Spans several decades: median ~20 us, p99.9 in the milliseconds.
  std::mt19937_64 rng(TestSeed() + 3);
  std::lognormal_distribution<double> dist(std::log(20000.0), 1.2);
  std::vector<uint64_t> samples(200000);
  for (uint64_t& v : samples) v = static_cast<uint64_t>(dist(rng));
  ExpectPercentilesClose(samples, 0.01);
}

// RunBench merges per-thread histograms; merging must lose nothing, so
// every percentile of the merge equals that of one combined histogram.
TEST(LatencyHistogramTest, MergeEqualsRecordingTogether) {
  SEEDED_TEST_PREAMBLE();
  std::mt19937_64 rng(TestSeed() + 4);
  std::lognormal_distribution<double> dist(std::log(10000.0), 1.5);
  LatencyHistogram all;
  LatencyHistogram parts[3];
  for (int n = 0; n < 100000; ++n) {
    const uint64_t v = static_cast<uint64_t>(dist(rng));
    all.Record(v);
    // Each value also goes to one of three parts, as to worker threads.
    parts[rng() % 3].Record(v);
  }
  LatencyHistogram merged;
  for (const LatencyHistogram& part : parts) merged.Merge(part);

  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
  EXPECT_NEAR(merged.Mean(), all.Mean(), all.Mean() * 1e-12);
  for (double p = 0; p <= 100; p += 0.1) {
    ASSERT_EQ(merged.Percentile(p), all.Percentile(p)) << "p" << p;
  }
}

// Merging an empty histogram must not disturb min (its sentinel is
// UINT64_MAX), and Clear() must reset the sentinels for the next Record().
TEST(LatencyHistogramTest, MergeWithEmptyAndClear) {
  LatencyHistogram h;
  h.Record(700);
  h.Record(900);
  LatencyHistogram empty;
  h.Merge(empty);
  EXPECT_EQ(h.count(), 2u);
  EXPECT_EQ(h.min(), 700u);
  EXPECT_EQ(h.max(), 900u);

  empty.Merge(h);
  EXPECT_EQ(empty.count(), 2u);
  EXPECT_EQ(empty.min(), 700u);
  EXPECT_NEAR(empty.Percentile(50), 700, 700 * 0.005);  // 700's bucket is [700, 703]

  h.Clear();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.Percentile(50), 0);
  h.Record(5);
  EXPECT_EQ(h.min(), 5u);
  EXPECT_EQ(h.max(), 5u);
}

// ---------------------------------------------------------------------------
// Parsing

// Both spellings of --get-ratio: a fraction and a percentage.
TEST(ParseRatioTest, Accepts) {
  EXPECT_EQ(*ParseRatio("0.9"), 0.9);
  EXPECT_EQ(*ParseRatio("0"), 0);
  EXPECT_EQ(*ParseRatio("1"), 1);
  EXPECT_EQ(*ParseRatio("1.0"), 1);
  EXPECT_EQ(*ParseRatio(" .5 "), 0.5);
  EXPECT_DOUBLE_EQ(*ParseRatio("90%"), 0.9);
  EXPECT_EQ(*ParseRatio("100%"), 1);
  EXPECT_EQ(*ParseRatio("0%"), 0);
}

// Everything that is not a finite ratio in range, including the values
// SimpleAtod would happily parse (nan, inf).
TEST(ParseRatioTest, Rejects) {
  for (const char* text :
       {"", "%", "abc", "1.5", "-0.1", "101%", "nan", "inf", "-inf", "0.9x", "9:1", "0.5%%"}) {
    absl::StatusOr<double> r = ParseRatio(text);
    EXPECT_FALSE(r.ok()) << "\"" << text << "\" gave " << *r;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

// --value-size: plain bytes and the K/M/G suffixes in their spellings.
TEST(ParseByteSizeTest, Accepts) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("1b"), 1u);
  EXPECT_EQ(*ParseByteSize("4k"), 4096u);
  EXPECT_EQ(*ParseByteSize("4K"), 4096u);
  EXPECT_EQ(*ParseByteSize("4KiB"), 4096u);
  EXPECT_EQ(*ParseByteSize("4kb"), 4096u);
  EXPECT_EQ(*ParseByteSize("1m"), 1048576u);
  EXPECT_EQ(*ParseByteSize("1MiB"), 1048576u);
  EXPECT_EQ(*ParseByteSize("2G"), 2147483648u);
  EXPECT_EQ(*ParseByteSize(" 64 "), 64u);
}

// Signs, fractions, inner spaces, unknown suffixes, hex, and the two ways
// to overflow: too many digits, and a suffix shift past 2^64.
TEST(ParseByteSizeTest, Rejects) {
  for (const char* text : {"", "k", "-1", "+1", "1.5k", "4 k", "4x", "4kk", "0x10",
                           "18446744073709551616", "17179869184G"}) {
    absl::StatusOr<uint64_t> r = ParseByteSize(text);
    EXPECT_FALSE(r.ok()) << "\"" << text << "\" gave " << *r;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

// The key format is visible to users (kvctl scan), so it is pinned here.
TEST(BenchKeyTest, Format) {
  EXPECT_EQ(BenchKey(0), "bench:00000000");
  EXPECT_EQ(BenchKey(42), "bench:00000042");
  EXPECT_EQ(BenchKey(99999999), "bench:99999999");
  EXPECT_EQ(BenchKey(123456789), "bench:123456789");
}

// BenchFlags' defaults are kvctl's flag defaults; they must validate and
// take the drawn seed.
TEST(MakeBenchConfigTest, Defaults) {
  absl::StatusOr<BenchConfig> c = MakeBenchConfig(BenchFlags(), /*random_seed=*/77);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->keys, 10000u);
  EXPECT_EQ(c->value_size, 4096u);
  EXPECT_EQ(c->get_ratio, 0.9);
  EXPECT_EQ(c->concurrency, 32);
  EXPECT_EQ(c->duration, absl::Seconds(10));
  EXPECT_EQ(c->ops, 0u);
  EXPECT_TRUE(c->preload);
  EXPECT_EQ(c->seed, 77u);  // no --seed: the drawn one
}

// Every flag reaches the config; --ops and --duration select the mode; a
// drawn zero seed is never reported.
TEST(MakeBenchConfigTest, FlagsCarryOver) {
  BenchFlags f;
  f.keys = 500;
  f.value_size = "1k";
  f.get_ratio = "50%";
  f.concurrency = 4;
  f.ops = 1234;
  f.ops_given = true;
  f.preload = false;
  f.seed = 9;
  absl::StatusOr<BenchConfig> c = MakeBenchConfig(f, 77);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->keys, 500u);
  EXPECT_EQ(c->value_size, 1024u);
  EXPECT_EQ(c->get_ratio, 0.5);
  EXPECT_EQ(c->concurrency, 4);
  EXPECT_EQ(c->ops, 1234u);
  EXPECT_FALSE(c->preload);
  EXPECT_EQ(c->seed, 9u);  // --seed wins over the drawn one

  f.ops_given = false;
  f.duration = absl::Milliseconds(1500);
  f.duration_given = true;
  c = MakeBenchConfig(f, 77);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ops, 0u);
  EXPECT_EQ(c->duration, absl::Milliseconds(1500));

  f.seed = 0;
  c = MakeBenchConfig(f, 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(c->seed, 0u);  // a reported seed is always reusable with --seed
}

// Each bad flag yields kInvalidArgument naming that flag, since kvctl shows
// the message as a usage error.
TEST(MakeBenchConfigTest, RejectsBadFlags) {
  struct Case {
    std::function<void(BenchFlags&)> change;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](BenchFlags& f) { f.duration_given = f.ops_given = true, f.ops = 5; },
       "mutually exclusive"},
      {[](BenchFlags& f) { f.ops_given = true, f.ops = 0; }, "--ops must be positive"},
      {[](BenchFlags& f) { f.keys = 0; }, "--keys"},
      {[](BenchFlags& f) { f.value_size = "0"; }, "--value-size"},
      {[](BenchFlags& f) { f.value_size = "2G"; }, "--value-size"},
      {[](BenchFlags& f) { f.value_size = "lots"; }, "--value-size"},
      {[](BenchFlags& f) { f.get_ratio = "1.1"; }, "--get-ratio"},
      {[](BenchFlags& f) { f.concurrency = 0; }, "--concurrency"},
      {[](BenchFlags& f) { f.concurrency = kMaxBenchConcurrency + 1; }, "--concurrency"},
      {[](BenchFlags& f) { f.duration = absl::ZeroDuration(), f.duration_given = true; },
       "--duration"},
      {[](BenchFlags& f) { f.duration = -absl::Seconds(1), f.duration_given = true; },
       "--duration"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    BenchFlags f;
    cases[i].change(f);
    absl::StatusOr<BenchConfig> c = MakeBenchConfig(f, 1);
    ASSERT_FALSE(c.ok()) << "case " << i;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << "case " << i;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(cases[i].message)) << "case " << i;
  }
}

// ---------------------------------------------------------------------------
// RunBench

// An in-memory BenchTarget with fault knobs. It logs every call, so tests
// can check which keys and value sizes RunBench used. Thread-safe: one
// mutex guards everything.
class FakeTarget : public BenchTarget {
 public:
  // kNotFound for a key never PUT; kUnavailable for every GET after
  // FailGets().
  absl::StatusOr<uint64_t> Get(absl::string_view key) override {
    absl::MutexLock lock(&mu_);
    log_.push_back(absl::StrCat("G ", key));
    if (fail_gets_) return absl::UnavailableError("injected GET failure");
    auto it = data_.find(key);
    if (it == data_.end()) return absl::NotFoundError(absl::StrCat("no key ", key));
    return it->second.size();
  }

  // Logs "P key size hash": the hash lets SameSeedSameSingleThreadedRun
  // compare values without storing them twice.
  absl::Status Put(absl::string_view key, absl::string_view value) override {
    absl::MutexLock lock(&mu_);
    log_.push_back(absl::StrCat("P ", key, " ", value.size(), " ",
                                std::hash<std::string>()(std::string(value))));
    ++puts_;
    if (fail_puts_after_ >= 0 && puts_ > fail_puts_after_) {
      return absl::ResourceExhaustedError("injected PUT failure");
    }
    data_[key] = std::string(value);
    return absl::OkStatus();
  }

  // PUTs after the first `n` fail (n < 0: never).
  void FailPutsAfter(int64_t n) {
    absl::MutexLock lock(&mu_);
    fail_puts_after_ = n;
  }
  // Every later GET fails with kUnavailable.
  void FailGets() {
    absl::MutexLock lock(&mu_);
    fail_gets_ = true;
  }
  // The number of keys stored.
  size_t size() {
    absl::MutexLock lock(&mu_);
    return data_.size();
  }
  // Every call so far, in the order the mutex admitted them.
  std::vector<std::string> log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  int64_t puts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t fail_puts_after_ ABSL_GUARDED_BY(mu_) = -1;
  bool fail_gets_ ABSL_GUARDED_BY(mu_) = false;
};

// A run small enough to finish in milliseconds against FakeTarget, with a
// short progress interval so that progress is exercised too.
BenchConfig SmallConfig() {
  BenchConfig c;
  c.keys = 200;
  c.value_size = 100;
  c.concurrency = 4;
  c.ops = 4000;
  c.seed = TestSeed();
  c.progress_interval = absl::Milliseconds(20);
  return c;
}

// A counted run does exactly config.ops operations across all threads, and
// the tallies, byte counts and histograms agree with one another.
TEST(RunBenchTest, OpsModeRunsExactlyThatManyOps) {
  SEEDED_TEST_PREAMBLE();
  FakeTarget target;
  BenchConfig c = SmallConfig();
  c.get_ratio = 0.5;
  absl::StatusOr<BenchResult> r = RunBench(c, target, "fake", nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->transport, "fake");
  EXPECT_EQ(r->preload_keys, 200u);
  EXPECT_EQ(target.size(), 200u);  // the preload wrote every key
  EXPECT_EQ(r->ops, 4000u);
  EXPECT_EQ(r->gets + r->puts, 4000u);
  // 4000 fair coin flips: 5 sigma is ~160.
  EXPECT_NEAR(static_cast<double>(r->gets), 2000, 200);
  EXPECT_EQ(r->misses, 0u);
  EXPECT_EQ(r->errors, 0u);
  EXPECT_TRUE(r->first_error.ok());
  EXPECT_FALSE(r->interrupted);
  // Every key was preloaded with a 100-byte value, so every GET hit and
  // returned 100 bytes; every operation got an answer and was timed.
  EXPECT_EQ(r->get_bytes, r->gets * 100);
  EXPECT_EQ(r->put_bytes, r->puts * 100);
  EXPECT_EQ(r->get_latency_ns.count(), r->gets);
  EXPECT_EQ(r->put_latency_ns.count(), r->puts);
  EXPECT_EQ(r->all_latency_ns.count(), 4000u);
  EXPECT_GT(r->OpsPerSecond(), 0);
  EXPECT_GT(r->GigabytesPerSecond(), 0);
}

// Only bench:NNNNNNNN keys below config.keys are touched, with values of
// exactly value_size bytes.
TEST(RunBenchTest, UsesTheBenchKeySpaceAndValueSize) {
  SEEDED_TEST_PREAMBLE();
  FakeTarget target;
  BenchConfig c = SmallConfig();
  c.keys = 10;
  c.get_ratio = 0;
  ASSERT_TRUE(RunBench(c, target, "fake", nullptr, nullptr).ok());
  for (const std::string& entry : target.log()) {
    ASSERT_THAT(entry, ::testing::MatchesRegex("P bench:0000000[0-9] 100 [0-9]+"));
  }
}

// Against an empty store every GET misses; a miss is not an error.
TEST(RunBenchTest, WithoutPreloadGetsMiss) {
  SEEDED_TEST_PREAMBLE();
  FakeTarget target;
  BenchConfig c = SmallConfig();
  // No preload and GETs only: the fake stays empty throughout.
  c.preload = false;
  c.get_ratio = 1;
  absl::StatusOr<BenchResult> r = RunBench(c, target, "fake", nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->preload_keys, 0u);
  EXPECT_EQ(r->gets, 4000u);
  EXPECT_EQ(r->puts, 0u);
  EXPECT_EQ(r->misses, 4000u);
  EXPECT_EQ(r->errors, 0u);
  EXPECT_EQ(r->get_bytes, 0u);
  // Misses got an answer, so their latency counts.
  EXPECT_EQ(r->get_latency_ns.count(), 4000u);
}

// get_ratio 0 must never issue a GET (UniformUnit() < 0 is never true).
TEST(RunBenchTest, RatioZeroIsAllPuts) {
  SEEDED_TEST_PREAMBLE();
  FakeTarget target;
  BenchConfig c = SmallConfig();
  // No preload either, so the fake sees nothing but timed PUTs.
  c.preload = false;
  c.get_ratio = 0;
  absl::StatusOr<BenchResult> r = RunBench(c, target, "fake", nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->puts, 4000u);
  EXPECT_EQ(r->gets, 0u);
  EXPECT_EQ(r->get_latency_ns.count(), 0u);
}

// Failing operations do not stop a timed run: they are counted, kept out
// of the latency figures, and the first one is reported.
TEST(RunBenchTest, ErrorsAreCountedAndTheFirstIsKept) {
  SEEDED_TEST_PREAMBLE();
  FakeTarget target;
  target.FailGets();
  BenchConfig c = SmallConfig();
  c.get_ratio = 0.5;
  absl::StatusOr<BenchResult> r = RunBench(c, target, "fake", nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  // The run still does all 4000 operations; exactly the GETs failed.
  EXPECT_EQ(r->ops, 4000u);
  EXPECT_EQ(r->errors, r->gets);
  EXPECT_GT(r->errors, 0u);
  EXPECT_EQ(r->misses, 0u);
  EXPECT_EQ(r->get_latency_ns.count(), 0u);  // failed operations are not timed
  EXPECT_EQ(r->first_error.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r->first_error.message()), HasSubstr("injected GET failure"));
  EXPECT_THAT(FormatBenchReport(*r), HasSubstr("first error UNAVAILABLE: injected GET failure"));
}

// A server that dies mid-run makes every operation fail fast; failures must
// not show up as throughput (they did: ops_per_sec counted them).
TEST(RunBenchTest, FailedOperationsAreNotThroughput) {
  SEEDED_TEST_PREAMBLE();
  FakeTarget target;
  target.FailGets();
  BenchConfig c = SmallConfig();
  c.get_ratio = 1;  // every timed operation fails
  absl::StatusOr<BenchResult> r = RunBench(c, target, "fake", nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->errors, r->ops);
  EXPECT_GT(r->ops, 0u);
  EXPECT_EQ(r->OpsPerSecond(), 0);
  nlohmann::json j = nlohmann::json::parse(BenchResultToJson(*r));
  EXPECT_EQ(j["ops_per_sec"].get<double>(), 0);
}

// A failing preload PUT, unlike a timed-phase error, fails the whole run.
TEST(RunBenchTest, FailedPreloadStopsTheRun) {
  SEEDED_TEST_PREAMBLE();
  FakeTarget target;
  // The 51st preload PUT fails; its code survives and the message says
  // which phase failed.
  target.FailPutsAfter(50);
  absl::StatusOr<BenchResult> r = RunBench(SmallConfig(), target, "fake", nullptr, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("preload"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("injected PUT failure"));
}

// RunBench validates its config itself rather than trusting the caller.
TEST(RunBenchTest, InvalidConfigIsRejected) {
  FakeTarget target;
  BenchConfig c = SmallConfig();
  c.concurrency = 0;
  absl::StatusOr<BenchResult> r = RunBench(c, target, "fake", nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// A timed run stops near its duration and calls the progress callback with
// sane, non-decreasing figures for both phases.
TEST(RunBenchTest, DurationModeStopsAndReportsProgress) {
  SEEDED_TEST_PREAMBLE();
  FakeTarget target;
  BenchConfig c = SmallConfig();
  c.ops = 0;
  c.duration = absl::Milliseconds(300);
  std::vector<BenchProgress> seen;  // the callback runs on this thread
  absl::StatusOr<BenchResult> r = RunBench(
      c, target, "fake", [&](const BenchProgress& p) { seen.push_back(p); }, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->elapsed, absl::Milliseconds(300));
  // Generous: a loaded machine may overrun a little, but not by seconds.
  EXPECT_LT(r->elapsed, absl::Seconds(10));
  EXPECT_GT(r->ops, 0u);
  EXPECT_FALSE(r->interrupted);

  int timed = 0;
  uint64_t last_ops = 0;
  for (const BenchProgress& p : seen) {
    // Preload reports count keys out of config.keys; a timed run has no
    // total.
    if (p.preloading) {
      EXPECT_EQ(p.total, 200u);
      continue;
    }
    ++timed;
    EXPECT_EQ(p.total, 0u);
    EXPECT_GE(p.ops, last_ops);
    EXPECT_GE(p.ops_per_sec, 0);
    last_ops = p.ops;
  }
  // ~15 reports are due in 300 ms at a 20 ms interval; allow a slow machine.
  EXPECT_GE(timed, 3);
  EXPECT_LE(last_ops, r->ops);
}

// The cancel flag (kvctl's SIGINT handler sets it) ends a long timed run
// well before its duration, and the result says so.
TEST(RunBenchTest, CancelEndsTheRunEarly) {
  SEEDED_TEST_PREAMBLE();
  FakeTarget target;
  BenchConfig c = SmallConfig();
  c.ops = 0;
  c.duration = absl::Seconds(60);
  std::atomic<bool> cancel{false};
  // Cancelled once the timed run is under way (past the preload of
  // c.keys PUTs), as a SIGINT mid-run would.
  std::thread canceller([&] {
    EXPECT_TRUE(Eventually([&] { return target.log().size() > 2 * c.keys; }));
    cancel.store(true);
  });
  absl::StatusOr<BenchResult> r = RunBench(c, target, "fake", nullptr, &cancel);
  canceller.join();
  ASSERT_TRUE(r.ok()) << r.status();
  // Not the 60 s duration's end: only the cancel sets this.
  EXPECT_TRUE(r->interrupted);
  EXPECT_THAT(FormatBenchReport(*r), HasSubstr("(interrupted)"));
}

// Cancelled before the preload finished: there are no figures to report.
TEST(RunBenchTest, CancelledPreloadIsAnError) {
  FakeTarget target;
  // Already set: the preload stops before its first PUT.
  std::atomic<bool> cancel{true};
  absl::StatusOr<BenchResult> r = RunBench(SmallConfig(), target, "fake", nullptr, &cancel);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
}

// --seed reproduces a run: with one thread the exact operation sequence
// (keys and value hashes) repeats, and another seed changes it.
TEST(RunBenchTest, SameSeedSameSingleThreadedRun) {
  SEEDED_TEST_PREAMBLE();
  auto run = [](uint64_t seed) {
    FakeTarget target;
    BenchConfig c = SmallConfig();
    // One thread: with more, the interleaving (and so the log order) would
    // differ from run to run.
    c.concurrency = 1;
    c.ops = 500;
    c.seed = seed;
    EXPECT_TRUE(RunBench(c, target, "fake", nullptr, nullptr).ok());
    return target.log();
  };
  const std::vector<std::string> a = run(TestSeed());
  EXPECT_EQ(a, run(TestSeed()));
  EXPECT_NE(a, run(TestSeed() + 1));
}

// ---------------------------------------------------------------------------
// Reporting

// A hand-made result with known figures, including an error whose message
// holds invalid UTF-8 (as a binary key would).
BenchResult SampleResult() {
  BenchResult r;
  r.config.keys = 1000;
  r.config.value_size = 4096;
  r.config.get_ratio = 0.9;
  r.config.concurrency = 8;
  r.config.seed = 42;
  r.transport = "tcp";
  r.preload_keys = 1000;
  r.preload_elapsed = absl::Milliseconds(250);
  r.elapsed = absl::Seconds(2);
  r.ops = 1000;
  r.gets = 900;
  r.puts = 100;
  r.misses = 3;
  r.errors = 1;
  // 897 GETs hit (900 minus 3 misses) and 99 PUTs succeeded (one error).
  r.get_bytes = 897 * 4096;
  r.put_bytes = 99 * 4096;
  r.first_error = absl::DeadlineExceededError("op timed out on key \xff\xfe");
  for (int i = 0; i < 897; ++i) r.get_latency_ns.Record(10000 + i);
  for (int i = 0; i < 99; ++i) r.put_latency_ns.Record(20000 + i);
  r.all_latency_ns = r.get_latency_ns;
  r.all_latency_ns.Merge(r.put_latency_ns);
  return r;
}

// The JSON report is a contract for scripts: every documented field is
// present with the documented type and unit, on one line, and an invalid
// UTF-8 error message does not make the dump throw.
TEST(ReportTest, JsonHasTheDocumentedFields) {
  const std::string text = BenchResultToJson(SampleResult());
  EXPECT_EQ(text.find('\n'), std::string::npos);  // one line
  // Parsed back rather than matched as text, so the checks do not depend on
  // number formatting.
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["transport"], "tcp");
  EXPECT_EQ(j["seed"], 42);
  EXPECT_EQ(j["keys"], 1000);
  EXPECT_EQ(j["value_size"], 4096);
  EXPECT_EQ(j["get_ratio"], 0.9);
  EXPECT_EQ(j["concurrency"], 8);
  EXPECT_EQ(j["preload_keys"], 1000);
  EXPECT_EQ(j["preload_seconds"], 0.25);
  EXPECT_EQ(j["seconds"], 2.0);
  EXPECT_EQ(j["ops"], 1000);
  EXPECT_EQ(j["ops_per_sec"], 499.5);  // 999 answered (1 error) in 2 s
  EXPECT_EQ(j["gets"], 900);
  EXPECT_EQ(j["puts"], 100);
  EXPECT_EQ(j["misses"], 3);
  EXPECT_EQ(j["errors"], 1);
  EXPECT_THAT(j["first_error"].get<std::string>(), HasSubstr("DEADLINE_EXCEEDED: op timed out"));
  EXPECT_EQ(j["interrupted"], false);
  EXPECT_EQ(j["value_bytes"], 996 * 4096);
  EXPECT_EQ(j["gb_per_sec"], std::round(996.0 * 4096 / 2 / 1e9 * 1000) / 1000);
  for (const char* kind : {"get", "put", "all"}) {
    const nlohmann::json& l = j["latency_us"][kind];
    for (const char* field : {"count", "mean", "p50", "p99", "p999", "max"}) {
      EXPECT_TRUE(l.contains(field)) << kind << "." << field;
    }
  }
  // Figures from SampleResult's recorded values, within bucket precision.
  EXPECT_EQ(j["latency_us"]["get"]["count"], 897);
  EXPECT_EQ(j["latency_us"]["all"]["count"], 996);
  EXPECT_NEAR(j["latency_us"]["get"]["p50"].get<double>(), 10.448, 0.05);
  EXPECT_NEAR(j["latency_us"]["put"]["p99"].get<double>(), 20.098, 0.1);
  EXPECT_EQ(j["latency_us"]["put"]["max"], 20.098);
}

// The text report shows each figure with its label.
TEST(ReportTest, TextHasTheFigures) {
  const std::string text = FormatBenchReport(SampleResult());
  for (const char* want :
       {"transport   tcp", "seed        42", "1000 keys, 4096-byte values, 90% GET, 8 threads",
        "preload     1000 keys in 0.25 s", "ops         1000 in 2.00 s = 499.5 ops/s",
        "gets        900 (misses 3)", "puts        100", "errors      1",
        "first error DEADLINE_EXCEEDED", "GB/s", "p50", "p99", "p99.9", "  get ", "  put ",
        "  all "}) {
    EXPECT_THAT(text, HasSubstr(want));
  }
}

// The progress line formats for both phases, with and without a total.
TEST(ReportTest, ProgressLines) {
  BenchProgress p;
  p.elapsed = absl::Seconds(3);
  p.ops = 1234567;
  p.ops_per_sec = 411522.4;
  EXPECT_EQ(FormatProgressLine(p), "bench    3.0s  1234567 ops  411522 ops/s");
  p.total = 2000000;
  EXPECT_THAT(FormatProgressLine(p), HasSubstr("(of 2000000)"));
  p.preloading = true;
  p.ops = 5000;
  p.total = 10000;
  p.ops_per_sec = 2500;
  EXPECT_EQ(FormatProgressLine(p), "preload    3.0s  5000/10000 keys  2500 keys/s");
}

}  // namespace
}  // namespace client
}  // namespace kvstore
