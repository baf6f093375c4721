// Copyright 2026 The kvstore Authors.
//
// Helpers for the cross-process metrics tests: scrape a kvserver's
// GET /metrics over a real socket, check the body with promtool, and parse
// /metrics and RESP INFO's # Metrics section into series -> value maps keyed
// like gRPC Stats' counters, so a test can compare the three readers.
#ifndef KVSTORE_TESTS_METRICS_SCRAPE_H_
#define KVSTORE_TESTS_METRICS_SCRAPE_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace kvstore {
namespace testing {

// GET `path` from 127.0.0.1:`port` over a fresh TCP connection (HTTP/1.0
// style: Connection: close, read to EOF). Returns the body of a 200 reply;
// an error naming the status line otherwise, or the socket error.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// Runs `/usr/bin/promtool check metrics` on `body`. OK when it is clean.
// Without promtool: a FAILURE under CI=true/1, else kUnimplemented (the
// caller skips loudly). Lint findings or parse errors: kInvalidArgument with
// promtool's output.
absl::Status PromtoolCheck(const std::string& body);

// Sample lines of a Prometheus text body ("series value"; comments skipped).
// Values are kept as text: histogram sums are decimals, everything the tests
// compare is an integer.
std::map<std::string, std::string> ParsePrometheusText(const std::string& body);

// The "series:value" lines after "# Metrics" in an INFO reply (CRs dropped).
std::map<std::string, std::string> ParseInfoMetrics(const std::string& info);

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_METRICS_SCRAPE_H_
