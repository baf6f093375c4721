// Copyright 2026 The kvstore Authors.

#include "common/metrics/exposition.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kvstore {
namespace metrics {

namespace {

// Appends `value` with backslashes and newlines escaped, and double quotes
// too if `escape_quote`. The format escapes only backslash and newline in
// HELP, plus the double quote in label values; anything else (UTF-8
// included) passes through, since the format is UTF-8 text.
void AppendEscaped(std::string* out, absl::string_view value, bool escape_quote) {
  for (const char c : value) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && escape_quote) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

// "{a=\"x\",b=\"y\"}", with `extra` (e.g. le="0.5") appended as the last
// pair; "" when there is nothing to print, as the format wants no "{}".
std::string LabelBlock(const Labels& labels, absl::string_view extra_name = "",
                       absl::string_view extra_value = "") {
  if (labels.empty() && extra_name.empty()) return "";
  std::string out = "{";
  // Commas go between pairs only: a trailing comma is legal in 0.0.4 but
  // not in every parser that reads these lines (INFO, kvctl).
  bool first = true;
  auto add = [&](absl::string_view name, absl::string_view value) {
    if (!first) out.push_back(',');
    first = false;
    absl::StrAppend(&out, name, "=\"");
    AppendEscaped(&out, value, /*escape_quote=*/true);
    out.push_back('"');
  };
  // Label names need no escaping: the registry admits only [a-z0-9_].
  for (const auto& [name, value] : labels) add(name, value);
  // `le` last, after the series' own labels, as Prometheus clients print it.
  if (!extra_name.empty()) add(extra_name, extra_value);
  out.push_back('}');
  return out;
}

// Integer part, then the fraction with trailing zeros removed:
// (4194304, 1000000) -> "4.194304", (2000000, 1000000) -> "2".
std::string FormatFixedPoint(uint64_t value, uint64_t scale, int digits) {
  // Integer arithmetic throughout: a double cannot hold every nanosecond
  // sum exactly, and exact text keeps golden tests and promtool stable.
  std::string out = absl::StrCat(value / scale);
  uint64_t fraction = value % scale;
  if (fraction == 0) return out;  // "2", not "2.000000"
  std::string frac = absl::StrCat(fraction);
  frac.insert(0, digits - frac.size(), '0');  // leading zeros: 1 us -> "000001"
  // Never empties `frac`: fraction != 0 has a non-zero digit.
  while (frac.back() == '0') frac.pop_back();
  absl::StrAppend(&out, ".", frac);
  return out;
}

}  // namespace

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  AppendEscaped(&out, help, /*escape_quote=*/false);
  return out;
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  AppendEscaped(&out, value, /*escape_quote=*/true);
  return out;
}

std::string FormatMicrosAsSeconds(uint64_t micros) { return FormatFixedPoint(micros, 1000000, 6); }

std::string FormatNanosAsSeconds(uint64_t nanos) { return FormatFixedPoint(nanos, 1000000000, 9); }

std::string FormatPrometheusText(const Snapshot& snapshot) {
  std::string out;
  // One HELP and one TYPE line per family, before its first sample: the
  // format forbids repeating them or splitting a family's samples.
  for (const FamilySnapshot& family : snapshot.families) {
    absl::StrAppend(&out, "# HELP ", family.name, " ", EscapeHelp(family.help), "\n");
    absl::StrAppend(&out, "# TYPE ", family.name, " ", MetricKindName(family.kind), "\n");
    for (const SampleSnapshot& s : family.samples) {
      switch (family.kind) {
        case MetricKind::kCounter:
          absl::StrAppend(&out, family.name, LabelBlock(s.labels), " ", s.counter, "\n");
          break;
        case MetricKind::kGauge:
          // Signed: a gauge may be negative, which the format allows.
          absl::StrAppend(&out, family.name, LabelBlock(s.labels), " ", s.gauge, "\n");
          break;
        case MetricKind::kHistogram: {
          // Buckets are cumulative in the snapshot already; bounds are
          // printed in seconds, the base unit the name promises.
          const HistogramSnapshot& h = s.histogram;
          for (size_t i = 0; i < h.cumulative_counts.size(); ++i) {
            // The last cumulative count is the +Inf bucket, which the format
            // requires and which must equal _count.
            const std::string le = i < h.upper_bounds_micros.size()
                                       ? FormatMicrosAsSeconds(h.upper_bounds_micros[i])
                                       : "+Inf";
            absl::StrAppend(&out, family.name, "_bucket", LabelBlock(s.labels, "le", le), " ",
                            h.cumulative_counts[i], "\n");
          }
          // _sum was read a moment apart from the buckets, so under load
          // it may include an observation _count does not yet: harmless.
          absl::StrAppend(&out, family.name, "_sum", LabelBlock(s.labels), " ",
                          FormatNanosAsSeconds(h.sum_nanos), "\n");
          absl::StrAppend(&out, family.name, "_count", LabelBlock(s.labels), " ", h.count, "\n");
          break;
        }
      }
    }
  }
  return out;
}

uint64_t QuantileUpperBoundMicros(const HistogramSnapshot& histogram, double q) {
  if (histogram.count == 0 || histogram.cumulative_counts.empty()) return 0;
  // Rank of the q-quantile among `count` sorted observations (1-based);
  // at least 1 so that a tiny q still names the first non-empty bucket.
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(histogram.count)));
  // Clamp both ways: q > 1 or rounding must not ask for a missing rank.
  if (rank < 1) rank = 1;
  if (rank > histogram.count) rank = histogram.count;
  // Linear scan: 23 buckets, read on a Stats call, not on the data path.
  for (size_t i = 0; i < histogram.upper_bounds_micros.size(); ++i) {
    if (histogram.cumulative_counts[i] >= rank) return histogram.upper_bounds_micros[i];
  }
  // Only the +Inf bucket reaches the rank: "more than the last bound".
  return std::numeric_limits<uint64_t>::max();
}

std::map<std::string, uint64_t> FlattenSnapshot(const Snapshot& snapshot) {
  std::map<std::string, uint64_t> out;
  for (const FamilySnapshot& family : snapshot.families) {
    for (const SampleSnapshot& s : family.samples) {
      // The same label text as /metrics, so a key can be grepped there.
      const std::string labels = LabelBlock(s.labels);
      switch (family.kind) {
        case MetricKind::kCounter:
          out[family.name + labels] = s.counter;
          break;
        case MetricKind::kGauge:
          out[family.name + labels] = s.gauge < 0 ? 0 : static_cast<uint64_t>(s.gauge);
          break;
        case MetricKind::kHistogram: {
          const HistogramSnapshot& h = s.histogram;
          // _count keeps the full name, as in /metrics; the microsecond
          // figures drop "_seconds" so that no key names two units.
          absl::string_view base = family.name;
          absl::ConsumeSuffix(&base, "_seconds");
          out[absl::StrCat(family.name, "_count", labels)] = h.count;
          out[absl::StrCat(base, "_sum_micros", labels)] = h.sum_nanos / 1000;
          out[absl::StrCat(base, "_p50_micros", labels)] = QuantileUpperBoundMicros(h, 0.5);
          out[absl::StrCat(base, "_p99_micros", labels)] = QuantileUpperBoundMicros(h, 0.99);
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace metrics
}  // namespace kvstore
