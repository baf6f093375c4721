// Copyright 2026 The kvstore Authors.
//
// Text and JSON renderings of a bench run. The text report is for people
// (aligned columns, microseconds with one decimal); the JSON is for scripts
// (tests/bench reads it), so its field names and units are a contract
// documented in bench_report.h.

#include "client/kvctl/bench_report.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace client {
namespace {

// The histograms hold nanoseconds; both reports speak microseconds.
double Micros(double ns) { return ns / 1000; }

// One row of the text report's latency table, aligned under its header.
std::string LatencyRow(absl::string_view name, const LatencyHistogram& h) {
  return absl::StrFormat("  %-6s%11d%11.1f%11.1f%11.1f%11.1f%11.1f\n", name, h.count(),
                         Micros(h.Mean()), Micros(h.Percentile(50)), Micros(h.Percentile(99)),
                         Micros(h.Percentile(99.9)), Micros(static_cast<double>(h.max())));
}

// Rounds to 3 decimals so JSON numbers stay short ("12.345", not
// "12.345000000000001" after arithmetic).
double Round3(double x) { return std::round(x * 1000) / 1000; }

// The "L" object of the JSON report's latency_us (see bench_report.h).
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

// "CODE: message", the same shape kvctl uses for its own errors; "" for OK.
std::string StatusText(const absl::Status& status) {
  if (status.ok()) return "";
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

}  // namespace

std::string FormatProgressLine(const BenchProgress& progress) {
  if (progress.preloading) {
    return absl::StrFormat("preload %6.1fs  %d/%d keys  %.0f keys/s",
                           absl::ToDoubleSeconds(progress.elapsed), progress.ops, progress.total,
                           progress.ops_per_sec);
  }
  std::string line =
      absl::StrFormat("bench %6.1fs  %d ops  %.0f ops/s", absl::ToDoubleSeconds(progress.elapsed),
                      progress.ops, progress.ops_per_sec);
  // A counted run (--ops) also shows how far along it is.
  if (progress.total > 0) absl::StrAppend(&line, absl::StrFormat("  (of %d)", progress.total));
  return line;
}

std::string FormatBenchReport(const BenchResult& r) {
  const BenchConfig& c = r.config;
  std::string out;
  // Labels are padded to 12 columns so the values line up.
  absl::StrAppendFormat(&out, "transport   %s\n", r.transport);
  absl::StrAppendFormat(&out, "seed        %d\n", c.seed);
  absl::StrAppendFormat(&out, "workload    %d keys, %d-byte values, %g%% GET, %d threads%s\n",
                        c.keys, c.value_size, c.get_ratio * 100, c.concurrency,
                        c.zero_copy ? ", zero-copy GETs" : "");
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
  // "all" is the merged histogram, not a sum of the rows' percentiles.
  absl::StrAppend(&out, LatencyRow("get", r.get_latency_ns));
  absl::StrAppend(&out, LatencyRow("put", r.put_latency_ns));
  absl::StrAppend(&out, LatencyRow("all", r.all_latency_ns));
  return out;
}

std::string BenchResultToJson(const BenchResult& r) {
  const BenchConfig& c = r.config;
  // ordered_json keeps the documented field order (plain json would sort
  // the names). Counts stay integers; only derived figures are rounded.
  nlohmann::ordered_json j;
  j["transport"] = r.transport;
  j["seed"] = c.seed;
  j["keys"] = c.keys;
  j["value_size"] = c.value_size;
  j["get_ratio"] = c.get_ratio;
  j["concurrency"] = c.concurrency;
  j["zero_copy"] = c.zero_copy;
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

}  // namespace client
}  // namespace kvstore
