// Copyright 2026 The kvstore Authors.

#include "common/metrics/testing.h"

#include <map>

#include "common/metrics/exposition.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace metrics {
namespace testing {

uint64_t Value(const Registry& registry, absl::string_view series) {
  // The whole flat map per call: tests read a handful of figures, and going
  // through the public rendering checks the key syntax too.
  const std::map<std::string, uint64_t> flat = FlattenSnapshot(registry.TakeSnapshot());
  auto it = flat.find(std::string(series));
  if (it == flat.end()) {
    // ADD_FAILURE, not FAIL: FAIL returns from a void function only, and the
    // test should go on to report its other expectations too.
    ADD_FAILURE() << "no series " << series << " in the registry";
    return 0;
  }
  return it->second;
}

}  // namespace testing
}  // namespace metrics
}  // namespace kvstore
