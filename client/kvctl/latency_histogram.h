// Copyright 2026 The kvstore Authors.
//
// LatencyHistogram: the log-linear histogram behind `kvctl bench`'s latency
// figures (~0.4% error, mergeable, covers all of uint64_t).

#ifndef KVSTORE_CLIENT_KVCTL_LATENCY_HISTOGRAM_H_
#define KVSTORE_CLIENT_KVCTL_LATENCY_HISTOGRAM_H_

#include <cstdint>
#include <vector>

namespace kvstore {
namespace client {

// A log-linear histogram of non-negative integers (kvctl records
// nanoseconds). Values below 2^kSubBucketBits get a bucket each; above that,
// every power-of-two range [2^e, 2^(e+1)) is split into 2^kSubBucketBits
// equal buckets, so a bucket is at most 1/128 of its lower bound wide and a
// reported percentile, a bucket midpoint, is within 0.4% of the recorded
// value it stands for. The whole uint64_t range is covered; nothing is
// clamped, and no method fails.
//
// Histograms with the same layout (all of them) merge exactly: merging A and
// B gives the histogram of A's and B's values recorded together.
//
// Thread safety: not thread-safe; give each thread its own and Merge() them
// afterwards. A histogram owns its counts and holds no outside references.
class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 7;
  static constexpr int kSubBuckets = 1 << kSubBucketBits;  // 128
  // One linear group for [0, kSubBuckets), then one per exponent
  // kSubBucketBits..63.
  static constexpr int kNumBuckets = kSubBuckets * (64 - kSubBucketBits + 1);

  // An empty histogram (count() == 0).
  LatencyHistogram();

  // Copyable and movable (each is ~58 KiB of counts).
  LatencyHistogram(const LatencyHistogram&) = default;
  LatencyHistogram& operator=(const LatencyHistogram&) = default;
  LatencyHistogram(LatencyHistogram&&) = default;
  LatencyHistogram& operator=(LatencyHistogram&&) = default;

  // Adds one occurrence of `value`.
  void Record(uint64_t value);
  // Adds every value recorded in `other` to this histogram.
  void Merge(const LatencyHistogram& other);
  // Forgets every recorded value, as if newly constructed.
  void Clear();

  // The number of recorded values.
  uint64_t count() const { return count_; }
  // The smallest recorded value; 0 when empty.
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  // The largest recorded value; 0 when empty.
  uint64_t max() const { return max_; }
  // Exact mean of the recorded values; 0 when empty.
  double Mean() const;

  // The value at percentile `p` (0..100, clamped), by nearest rank: the
  // smallest recorded value v such that at least p% of the values are <= v,
  // rounded to its bucket's midpoint and clamped to [min(), max()].
  // Percentile(0) is min() and Percentile(100) is max(). 0 when empty.
  double Percentile(double p) const;

  // Layout, exposed for tests. BucketIndex(v) is the bucket holding v; it
  // holds the values [BucketLow(i), BucketHigh(i)] (inclusive). `index` must
  // be in [0, kNumBuckets).
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

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_LATENCY_HISTOGRAM_H_
