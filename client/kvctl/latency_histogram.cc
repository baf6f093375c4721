// Copyright 2026 The kvstore Authors.
//
// LatencyHistogram's bucket arithmetic and percentile search. The layout is
// HdrHistogram's idea in its simplest form: an exponent picks a group, the
// next kSubBucketBits bits pick a bucket in it.

#include "client/kvctl/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/numeric/bits.h"

namespace kvstore {
namespace client {

// Every bucket exists from the start: 58 KiB is cheap next to a benchmark,
// and Record() then never allocates or branches on growth.
LatencyHistogram::LatencyHistogram() : buckets_(kNumBuckets, 0) {}

int LatencyHistogram::BucketIndex(uint64_t value) {
  // Small values are their own index: the first group is linear.
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
  // The inverse of BucketIndex(): group number is the shift, the position in
  // the group the sub-range.
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
  // Exact extremes let Percentile() clamp a bucket midpoint back to a value
  // that was really seen.
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  sum_ += static_cast<double>(value);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  // Same layout everywhere, so merging is bucket-wise addition; an empty
  // `other` (min_ UINT64_MAX, max_ 0) leaves the extremes alone.
  for (int i = 0; i < kNumBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

void LatencyHistogram::Clear() {
  // Keeps the allocation; back to the constructor's state otherwise.
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

  // A linear walk over 7424 buckets, done a handful of times per report.
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

}  // namespace client
}  // namespace kvstore
