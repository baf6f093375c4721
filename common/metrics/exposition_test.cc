// Copyright 2026 The kvstore Authors.

#include "common/metrics/exposition.h"

#include <limits>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace metrics {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;

// HELP escapes backslash and newline; label values also the double quote;
// other bytes, UTF-8 included, pass unchanged.
TEST(ExpositionTest, Escaping) {
  EXPECT_EQ(EscapeHelp("a\\b\nc \"q\""), "a\\\\b\\nc \"q\"");
  EXPECT_EQ(EscapeLabelValue("a\\b\nc \"q\""), "a\\\\b\\nc \\\"q\\\"");
  EXPECT_EQ(EscapeLabelValue("plain-ütf8"), "plain-ütf8");
}

// Bounds and sums print exactly, without float rounding or trailing zeros.
TEST(ExpositionTest, SecondsAreExactDecimals) {
  EXPECT_EQ(FormatMicrosAsSeconds(0), "0");
  EXPECT_EQ(FormatMicrosAsSeconds(1), "0.000001");
  EXPECT_EQ(FormatMicrosAsSeconds(512), "0.000512");
  EXPECT_EQ(FormatMicrosAsSeconds(4194304), "4.194304");
  EXPECT_EQ(FormatMicrosAsSeconds(2000000), "2");
  EXPECT_EQ(FormatNanosAsSeconds(1), "0.000000001");
  EXPECT_EQ(FormatNanosAsSeconds(1500), "0.0000015");
  EXPECT_EQ(FormatNanosAsSeconds(12345678901), "12.345678901");
}

// The whole output of a small registry, byte for byte: HELP/TYPE once per
// family, families and children sorted, escaping, and a histogram's
// cumulative buckets, +Inf, _sum in seconds and _count.
TEST(ExpositionTest, GoldenText) {
  Registry r;
  r.AddCounter("kvstore_requests_total", "Requests served.", {{"transport", "rdma"}, {"op", "get"}})
      ->Increment(3);
  r.AddCounter("kvstore_requests_total", "Requests served.", {{"transport", "grpc"}, {"op", "get"}})
      ->Increment(1);
  r.AddGauge("kvstore_connections", "Open connections.\nLine two \\ backslash.")->Set(-2);
  r.AddGauge("kvstore_weird", "Label escaping.", {{"v", "a\"b\\c\nd"}})->Set(1);
  Histogram* h = r.AddHistogram("kvstore_op_duration_seconds", "Op latency.", {{"op", "get"}});
  h->ObserveMicros(1);                // le 0.000001 and above
  h->Observe(absl::Microseconds(3));  // le 0.000004 and above
  h->Observe(absl::Seconds(10));      // beyond the last bound: +Inf only

  const std::string expected_head =
      "# HELP kvstore_connections Open connections.\\nLine two \\\\ backslash.\n"
      "# TYPE kvstore_connections gauge\n"
      "kvstore_connections -2\n"
      "# HELP kvstore_op_duration_seconds Op latency.\n"
      "# TYPE kvstore_op_duration_seconds histogram\n"
      "kvstore_op_duration_seconds_bucket{op=\"get\",le=\"0.000001\"} 1\n"
      "kvstore_op_duration_seconds_bucket{op=\"get\",le=\"0.000002\"} 1\n"
      "kvstore_op_duration_seconds_bucket{op=\"get\",le=\"0.000004\"} 2\n"
      "kvstore_op_duration_seconds_bucket{op=\"get\",le=\"0.000008\"} 2\n";
  const std::string expected_tail =
      "kvstore_op_duration_seconds_bucket{op=\"get\",le=\"2.097152\"} 2\n"
      "kvstore_op_duration_seconds_bucket{op=\"get\",le=\"4.194304\"} 2\n"
      "kvstore_op_duration_seconds_bucket{op=\"get\",le=\"+Inf\"} 3\n"
      "kvstore_op_duration_seconds_sum{op=\"get\"} 10.000004\n"
      "kvstore_op_duration_seconds_count{op=\"get\"} 3\n"
      "# HELP kvstore_requests_total Requests served.\n"
      "# TYPE kvstore_requests_total counter\n"
      "kvstore_requests_total{op=\"get\",transport=\"grpc\"} 1\n"
      "kvstore_requests_total{op=\"get\",transport=\"rdma\"} 3\n"
      "# HELP kvstore_weird Label escaping.\n"
      "# TYPE kvstore_weird gauge\n"
      "kvstore_weird{v=\"a\\\"b\\\\c\\nd\"} 1\n";
  // Head, the 19 middle buckets generated, and the tail: the bounds in
  // between follow the same doubling, checked here rather than typed out.
  std::string expected = expected_head;
  for (int i = 4; i < Histogram::kFiniteBuckets - 2; ++i) {
    expected += "kvstore_op_duration_seconds_bucket{op=\"get\",le=\"" +
                FormatMicrosAsSeconds(uint64_t{1} << i) + "\"} 2\n";
  }
  expected += expected_tail;
  EXPECT_EQ(FormatPrometheusText(r.TakeSnapshot()), expected);
}

// Nothing registered: an empty body, which Prometheus accepts.
TEST(ExpositionTest, EmptyRegistryGivesEmptyText) {
  Registry r;
  EXPECT_EQ(FormatPrometheusText(r.TakeSnapshot()), "");
}

// The format requires the last line to end in '\n' too.
TEST(ExpositionTest, EveryLineEndsWithNewline) {
  Registry r;
  r.AddGauge("kvstore_g", "G.")->Set(1);
  const std::string text = FormatPrometheusText(r.TakeSnapshot());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_THAT(text, HasSubstr("kvstore_g 1\n"));
}

// The flat map: one key per series in Prometheus syntax, negative gauges
// as 0, and four derived entries per histogram.
TEST(ExpositionTest, FlattenSnapshot) {
  Registry r;
  r.AddCounter("kvstore_requests_total", "R.", {{"transport", "rdma"}, {"op", "get"}})
      ->Increment(5);
  r.AddGauge("kvstore_connections", "C.")->Set(3);
  r.AddGauge("kvstore_negative", "N.")->Set(-3);
  Histogram* h = r.AddHistogram("kvstore_op_duration_seconds", "L.", {{"op", "get"}});
  for (int i = 0; i < 98; ++i) h->ObserveMicros(3);  // le 4 us
  h->ObserveMicros(100);                             // le 128 us
  h->ObserveMicros(100);
  // 98 of 100 at <= 4 us: the median and the 98th are in that bucket, the
  // 99th is one of the 100 us ones (<= 128 us).
  const auto flat = FlattenSnapshot(r.TakeSnapshot());
  EXPECT_THAT(flat, Contains(Pair("kvstore_requests_total{op=\"get\",transport=\"rdma\"}", 5u)));
  EXPECT_THAT(flat, Contains(Pair("kvstore_connections", 3u)));
  EXPECT_THAT(flat, Contains(Pair("kvstore_negative", 0u)));
  EXPECT_THAT(flat, Contains(Pair("kvstore_op_duration_seconds_count{op=\"get\"}", 100u)));
  EXPECT_THAT(flat, Contains(Pair("kvstore_op_duration_sum_micros{op=\"get\"}", 98u * 3 + 200)));
  EXPECT_THAT(flat, Contains(Pair("kvstore_op_duration_p50_micros{op=\"get\"}", 4u)));
  EXPECT_THAT(flat, Contains(Pair("kvstore_op_duration_p99_micros{op=\"get\"}", 128u)));
  // Nothing else: 1 counter + 2 gauges + 4 histogram entries.
  EXPECT_EQ(flat.size(), 7u);
}

// Quantile estimate at the edges: empty, all in +Inf, exactly at a rank.
TEST(ExpositionTest, QuantileEdges) {
  Registry r;
  Histogram* h = r.AddHistogram("kvstore_q_seconds", "Q.");
  auto hist = [&] { return r.TakeSnapshot().families[0].samples[0].histogram; };
  EXPECT_EQ(QuantileUpperBoundMicros(hist(), 0.5), 0u);  // empty
  h->Observe(absl::Seconds(60));                         // +Inf only
  EXPECT_EQ(QuantileUpperBoundMicros(hist(), 0.5), std::numeric_limits<uint64_t>::max());
  for (int i = 0; i < 9; ++i) h->ObserveMicros(1);
  EXPECT_EQ(QuantileUpperBoundMicros(hist(), 0.5), 1u);
  // 10 observations, 9 at 1 us: rank ceil(0.9*10) = 9 is still 1 us, rank
  // ceil(0.91*10) = 10 is the +Inf one.
  EXPECT_EQ(QuantileUpperBoundMicros(hist(), 0.9), 1u);
  EXPECT_EQ(QuantileUpperBoundMicros(hist(), 0.91), std::numeric_limits<uint64_t>::max());
}

}  // namespace
}  // namespace metrics
}  // namespace kvstore
