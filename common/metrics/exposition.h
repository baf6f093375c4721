// Copyright 2026 The kvstore Authors.
//
// Renderings of a metrics Snapshot (common/metrics/registry.h) for its
// readers: the Prometheus text exposition format for GET /metrics, and a flat
// name -> number map for gRPC Stats (map<string, uint64>), RESP INFO lines
// and `kvctl stat --json`. All functions are pure: thread-safe, no I/O.

#ifndef KVSTORE_COMMON_METRICS_EXPOSITION_H_
#define KVSTORE_COMMON_METRICS_EXPOSITION_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "common/metrics/registry.h"

namespace kvstore {
namespace metrics {

// The Content-Type of FormatPrometheusText's output.
inline constexpr absl::string_view kPrometheusTextContentType = "text/plain; version=0.0.4";

// Prometheus text exposition format 0.0.4: for each family "# HELP" and
// "# TYPE" lines, then one line per sample; histograms as cumulative
// name_bucket{...,le="..."} lines ending with le="+Inf", then name_sum (in
// seconds) and name_count. Help text and label values are escaped (\\, \n,
// and \" in label values). Ends with a newline; an empty snapshot gives "".
std::string FormatPrometheusText(const Snapshot& snapshot);

// Escaping rules of the format, exposed for tests and other writers.
std::string EscapeHelp(absl::string_view help);
std::string EscapeLabelValue(absl::string_view value);

// A decimal number of seconds with no rounding, for whole microseconds or
// nanoseconds ("0.000001", "4.194304", "12"): bucket bounds and sums are exact,
// unlike %g, which prints 4.194304 as 4.1943.
std::string FormatMicrosAsSeconds(uint64_t micros);
std::string FormatNanosAsSeconds(uint64_t nanos);

// One entry per series, keyed in Prometheus series syntax so that the same
// string finds it in /metrics:
//   kvstore_requests_total{op="get",transport="rdma"} -> 42
//   kvstore_connections                                 -> 3   (no labels)
// Gauges below zero read as 0 (the map is unsigned, like Stats RPC's; no
// kvstore gauge is meant to go negative). A histogram NAME_seconds gives four
// entries (each with the histogram's labels):
//   NAME_seconds_count  observations (the same key as in /metrics)
//   NAME_sum_micros     total observed time, microseconds (rounded down)
//   NAME_p50_micros     upper bound of the bucket holding the median, i.e.
//   NAME_p99_micros     "at most" (0 when empty; UINT64_MAX when in +Inf)
// Label values are not escaped beyond the exposition rules; kvstore's label
// values are fixed identifiers, so the keys contain no ':' or newline and can
// be printed as INFO "key:value" lines.
std::map<std::string, uint64_t> FlattenSnapshot(const Snapshot& snapshot);

// The bucket-bound estimate used for _p50_micros/_p99_micros: the upper bound
// (microseconds) of the first bucket whose cumulative count reaches
// ceil(q * count); 0 if count is 0, UINT64_MAX if that is the +Inf bucket.
// q in (0, 1].
uint64_t QuantileUpperBoundMicros(const HistogramSnapshot& histogram, double q);

}  // namespace metrics
}  // namespace kvstore

#endif  // KVSTORE_COMMON_METRICS_EXPOSITION_H_
