// Copyright 2026 The kvstore Authors.
//
// ServerCounters: the counters of several kvservers, read with the gRPC
// Stats RPC (keyed as in /metrics) and summed by series, for tests and
// benchmarks that check what the servers did (e.g. how many replicated
// writes went by RDMA). A server that does not answer within 5 s is left
// out. No token: for the test clusters, which run without one.

#ifndef KVSTORE_TESTS_CLUSTER_SERVER_COUNTERS_H_
#define KVSTORE_TESTS_CLUSTER_SERVER_COUNTERS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvstore {
namespace testing {

std::map<std::string, uint64_t> ServerCounters(const std::vector<std::string>& control_addresses);

// The sum of the series in `counters` whose name starts with `prefix`.
uint64_t SumSeries(const std::map<std::string, uint64_t>& counters, const std::string& prefix);

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_CLUSTER_SERVER_COUNTERS_H_
