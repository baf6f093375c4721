// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/convergence.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace jepsen {

ConvergenceReport CheckConvergence(const std::vector<ShardDumps>& shards) {
  ConvergenceReport report;
  for (const ShardDumps& shard : shards) {
    ++report.shards;
    report.replicas += shard.replicas.size();
    std::set<std::string> keys;
    for (const auto& [name, dump] : shard.replicas) {
      for (const auto& [key, value] : dump) keys.insert(key);
    }
    report.keys += keys.size();
    for (const std::string& key : keys) {
      KeyDifference d{shard.shard, key, {}};
      std::set<std::optional<std::string>> distinct;
      for (const auto& [name, dump] : shard.replicas) {
        auto it = dump.find(key);
        std::optional<std::string> v =
            it == dump.end() ? std::nullopt : std::optional<std::string>(it->second);
        distinct.insert(v);
        d.values[name] = std::move(v);
      }
      if (distinct.size() > 1) report.differences.push_back(std::move(d));
    }
  }
  return report;
}

std::string DescribeDifference(const KeyDifference& d) {
  std::string s = absl::StrCat("shard ", d.shard, " key ", d.key, ":");
  for (const auto& [name, v] : d.values) {
    absl::StrAppend(&s, " ", name, "=", v.has_value() ? *v : "(absent)");
  }
  return s;
}

}  // namespace jepsen
}  // namespace kvstore
