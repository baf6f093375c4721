// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/replica_check.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/jepsen/history_check.h"
#include "tests/jepsen/replica_reader.h"

namespace kvstore {
namespace jepsen {
namespace {

using testing::ClusterHarness;

std::map<std::string, std::string> RespAddresses(ClusterHarness& c) {
  std::map<std::string, std::string> out;
  for (int i = 0; i < c.size(); ++i) {
    if (c.Running(i)) out[ClusterHarness::NodeId(i)] = c.node(i)->resp_address();
  }
  return out;
}

}  // namespace

ReplicaCheck CompareReplicas(ClusterHarness& c, const std::vector<Op>& ops,
                             absl::Duration timeout) {
  std::vector<std::string> keys;
  for (const Op& op : ops) {
    if (op.is_write()) keys.push_back(op.key);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  absl::StatusOr<std::vector<ShardDumps>> dumps = absl::UnavailableError("not read");
  for (const absl::Time until = absl::Now() + timeout; absl::Now() < until;) {
    absl::StatusOr<v1::ClusterMap> map = c.GetMap();
    dumps = map.ok() ? ReadReplicas(*map, RespAddresses(c), keys)
                     : absl::StatusOr<std::vector<ShardDumps>>(map.status());
    if (dumps.ok()) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  ReplicaCheck r;
  if (!dumps.ok()) {
    r.text = absl::StrCat("not checked: ", dumps.status().ToString());
    return r;
  }
  r.checked = true;
  r.text = ConvergenceText(CheckConvergence(*dumps), 10, &r.diverged);
  return r;
}

}  // namespace jepsen
}  // namespace kvstore
