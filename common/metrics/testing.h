// Copyright 2026 The kvstore Authors.
//
// Test helpers for reading figures back out of a metrics Registry. Tests ask
// for a series by the same string that /metrics, gRPC Stats and RESP INFO
// show (FlattenSnapshot's key syntax), so a test also pins the public name.
#ifndef KVSTORE_COMMON_METRICS_TESTING_H_
#define KVSTORE_COMMON_METRICS_TESTING_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/metrics/registry.h"

namespace kvstore {
namespace metrics {
namespace testing {

// The value of `series` in FlattenSnapshot(registry.TakeSnapshot()), e.g.
// Value(r, "kvstore_commits_total") or
// Value(r, "kvstore_server_requests_total{op=\"get\",transport=\"tcp\"}").
// A series that is not registered is a test bug: it fails the test (ADD_FAILURE
// naming the series) and returns 0.
uint64_t Value(const Registry& registry, absl::string_view series);

}  // namespace testing
}  // namespace metrics
}  // namespace kvstore

#endif  // KVSTORE_COMMON_METRICS_TESTING_H_
