// Copyright 2026 The kvstore Authors.
//
// Steps 6 and 7 of PlanNext (controller_plan.h): spreading backup roles back
// over the members after a failover refilled a dead node's place elsewhere.

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/cluster/controller/controller_plan.h"
#include "server/cluster/controller/controller_plan_util.h"

namespace kvstore {
namespace server {
namespace {

using plan_util::InShard;
using plan_util::IsDraining;
using plan_util::RebuildNodes;
using plan_util::RemoveFrom;

// Roles (replicas + syncing entries) of every live member not marked
// draining; members in no shard count 0.
std::map<std::string, int> RolesOfEligible(const v1::ClusterMap& map, const MemberSet& members) {
  std::map<std::string, int> roles;
  for (const auto& [id, node] : members) {
    if (!IsDraining(map, id, node.incarnation())) roles[id] = 0;
  }
  for (const v1::Shard& shard : map.shards()) {
    for (const std::string& id : shard.replicas()) {
      if (roles.count(id) > 0) ++roles[id];
    }
    for (const std::string& id : shard.syncing()) {
      if (roles.count(id) > 0) ++roles[id];
    }
  }
  return roles;
}

bool NamesDrainingNode(const v1::ClusterMap& map, const v1::Shard& shard) {
  for (const v1::ClusterNode& d : map.draining()) {
    if (InShard(shard, d.node_id())) return true;
  }
  return false;
}

}  // namespace

std::optional<PlanStep> TrimReplicas(const v1::ClusterMap& current, const MemberSet& members) {
  const int r = std::max<int>(1, current.replication_factor());
  const std::map<std::string, int> roles = RolesOfEligible(current, members);
  for (int i = 0; i < current.shards_size(); ++i) {
    const v1::Shard& shard = current.shards(i);
    // A shard naming a draining node is remove-node's business: its live
    // former primary stays a backup until it confirms the new map.
    if (shard.replicas_size() <= r || !shard.syncing().empty() ||
        NamesDrainingNode(current, shard)) {
      continue;
    }
    // The backup with the most roles leaves; ties: the later in the list.
    std::string drop;
    int most = -1;
    for (int j = 1; j < shard.replicas_size(); ++j) {
      auto it = roles.find(shard.replicas(j));
      const int n = it == roles.end() ? 0 : it->second;
      if (n >= most) {
        most = n;
        drop = shard.replicas(j);
      }
    }
    PlanStep step{current, absl::StrCat("trimmed: shard ", shard.shard_id(), " had ",
                                        shard.replicas_size(), " in-sync replicas for R=", r,
                                        "; backup ", drop, " (", most, " roles) leaves")};
    v1::Shard& edited = *step.map.mutable_shards(i);
    RemoveFrom(edited.mutable_replicas(), {drop});
    edited.set_shard_epoch(edited.shard_epoch() + 1);
    *step.map.mutable_nodes() = RebuildNodes(step.map, members, {});
    return step;
  }
  return std::nullopt;
}

std::optional<PlanStep> BalanceReplicas(const v1::ClusterMap& current, const MemberSet& members) {
  if (current.migrations_size() > 0) return std::nullopt;
  const int r = std::max<int>(1, current.replication_factor());
  const std::map<std::string, int> roles = RolesOfEligible(current, members);
  if (roles.size() < 2) return std::nullopt;
  int total = 0;
  for (const auto& [id, n] : roles) total += n;
  const int share = (total + static_cast<int>(roles.size()) - 1) / static_cast<int>(roles.size());
  // Busiest above its share and idlest below it (ties: node id).
  std::string busy, idle;
  for (const auto& [id, n] : roles) {
    if (busy.empty() || n > roles.at(busy)) busy = id;
    if (idle.empty() || n < roles.at(idle)) idle = id;
  }
  if (roles.at(busy) <= share || roles.at(idle) >= share) return std::nullopt;
  // One move at a time, and only into a settled shard where the busy node
  // is a backup (primaries stay where they are: moving one is a failover).
  for (int i = 0; i < current.shards_size(); ++i) {
    const v1::Shard& shard = current.shards(i);
    if (shard.replicas_size() != r || !shard.syncing().empty() || InShard(shard, idle) ||
        NamesDrainingNode(current, shard)) {
      continue;
    }
    bool busy_is_backup = false;
    for (int j = 1; j < shard.replicas_size(); ++j) busy_is_backup |= shard.replicas(j) == busy;
    if (!busy_is_backup) continue;
    PlanStep step{current,
                  absl::StrCat("balanced: ", idle, " (", roles.at(idle), " roles) syncing shard ",
                               shard.shard_id(), " to take over from backup ", busy, " (",
                               roles.at(busy), " roles, share ", share, ");")};
    v1::Shard& edited = *step.map.mutable_shards(i);
    edited.add_syncing(idle);
    edited.set_shard_epoch(edited.shard_epoch() + 1);
    *step.map.mutable_nodes() = RebuildNodes(step.map, members, {idle});
    return step;
  }
  return std::nullopt;
}

}  // namespace server
}  // namespace kvstore
