// Copyright 2026 The kvstore Authors.
//
// Step 2 of PlanNext (RecoverDown): a DOWN shard back from a copy that
// outlived its node's lease.

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "server/cluster/controller/controller_plan.h"
#include "server/cluster/controller/controller_plan_util.h"

namespace kvstore {
namespace server {
namespace {

using plan_util::IsDraining;
using plan_util::NamedNodes;
using plan_util::RebuildNodes;

// The copy of `shard_id` that the member `last` names published, when that
// member is the same process (same memory) registered again, alive and not
// draining; else null. A process that restarted has another process_id: its
// memory, and the copy, are gone.
const v1::ShardCopy* ReturnedCopy(const v1::ClusterMap& current, const MemberSet& members,
                                  const std::set<std::string>& named, const v1::ClusterNode& last,
                                  uint32_t shard_id) {
  auto member = members.find(last.node_id());
  if (member == members.end() || last.process_id().empty() ||
      member->second.process_id() != last.process_id() ||
      IsDraining(current, last.node_id(), member->second.incarnation())) {
    return nullptr;
  }
  // Named elsewhere under an older incarnation: RemoveDead comes first.
  if (named.count(last.node_id()) > 0 && !IsAliveIn(current, members, last.node_id())) {
    return nullptr;
  }
  for (const v1::ShardCopy& copy : member->second.copies()) {
    if (copy.shard_id() == shard_id) return &copy;
  }
  return nullptr;
}

}  // namespace

std::optional<PlanStep> RecoverDown(const v1::ClusterMap& current, const MemberSet& members) {
  const std::set<std::string> named = NamedNodes(current);
  const int r = std::max<int>(1, current.replication_factor());
  PlanStep step{current, "recovered:"};
  std::set<std::string> placed;
  for (v1::Shard& shard : *step.map.mutable_shards()) {
    if (!shard.replicas().empty() || shard.last_in_sync().empty()) continue;
    // (node, applied seq) of every copy back, in last-in-sync order.
    std::vector<std::pair<std::string, uint64_t>> back;
    for (const v1::ClusterNode& last : shard.last_in_sync()) {
      const v1::ShardCopy* copy = ReturnedCopy(current, members, named, last, shard.shard_id());
      if (copy != nullptr) back.emplace_back(last.node_id(), copy->applied_seq());
    }
    if (back.empty()) continue;
    // Every copy of the last in-sync set holds every acknowledged write;
    // the highest seq also keeps the writes that were in flight.
    std::stable_sort(back.begin(), back.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    shard.add_replicas(back[0].first);
    placed.insert(back[0].first);
    // The other copies may differ on writes that were in flight: they copy
    // the shard again (in full) as syncing replicas.
    for (size_t i = 1; i < back.size() && shard.syncing_size() + 1 < r; ++i) {
      shard.add_syncing(back[i].first);
      placed.insert(back[i].first);
    }
    shard.clear_last_in_sync();
    shard.set_shard_epoch(shard.shard_epoch() + 1);
    LOG(WARNING) << "controller: shard " << shard.shard_id() << " was DOWN; " << back[0].first
                 << " registered again holding its copy (applied seq " << back[0].second
                 << ") and becomes its primary";
    absl::StrAppend(&step.what, " shard ", shard.shard_id(), " primary ", back[0].first,
                    " (its copy came back)", shard.syncing().empty() ? "" : ", syncing ",
                    absl::StrJoin(shard.syncing(), ","), ";");
  }
  if (placed.empty()) return std::nullopt;
  *step.map.mutable_nodes() = RebuildNodes(step.map, members, placed);
  return step;
}

}  // namespace server
}  // namespace kvstore
