// Copyright 2026 The kvstore Authors.

#include "tests/cluster/server_counters.h"

#include "absl/time/clock.h"
#include "common/control/control_client.h"

namespace kvstore {
namespace testing {

std::map<std::string, uint64_t> ServerCounters(const std::vector<std::string>& control_addresses) {
  std::map<std::string, uint64_t> sum;
  for (const std::string& address : control_addresses) {
    auto control = control::ControlClient::Dial(address);
    if (!control.ok()) continue;
    auto stats = (*control)->Stats(absl::Now() + absl::Seconds(5));
    if (!stats.ok()) continue;
    for (const auto& [series, value] : stats->counters()) sum[series] += value;
  }
  return sum;
}

uint64_t SumSeries(const std::map<std::string, uint64_t>& counters, const std::string& prefix) {
  uint64_t sum = 0;
  for (const auto& [series, value] : counters) {
    if (series.rfind(prefix, 0) == 0) sum += value;
  }
  return sum;
}

}  // namespace testing
}  // namespace kvstore
