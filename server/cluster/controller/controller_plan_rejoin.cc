// Copyright 2026 The kvstore Authors.
//
// Step 0 of PlanNext (Rejoin): a node back from a lease lapse with its
// memory keeps its roles under its new incarnation.

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/cluster/controller/controller_plan.h"
#include "server/cluster/controller/controller_plan_util.h"

namespace kvstore {
namespace server {

bool IsRejoin(const v1::ClusterMap& map, const MemberSet& members, const std::string& node_id) {
  auto member = members.find(node_id);
  const v1::ClusterNode* record = plan_util::RecordOf(map, node_id);
  return member != members.end() && record != nullptr && !record->process_id().empty() &&
         record->process_id() == member->second.process_id() &&
         record->incarnation() != member->second.incarnation();
}

std::optional<PlanStep> Rejoin(const v1::ClusterMap& current, const MemberSet& members) {
  std::set<std::string> back;
  for (const std::string& id : plan_util::NamedNodes(current)) {
    if (IsRejoin(current, members, id)) back.insert(id);
  }
  if (back.empty()) return std::nullopt;
  PlanStep step{current, "registered again with their memory (roles kept):"};
  for (v1::ClusterNode& node : *step.map.mutable_nodes()) {
    if (back.count(node.node_id()) == 0) continue;
    absl::StrAppend(&step.what, " ", node.node_id(), " incarnation ", node.incarnation(), " -> ",
                    members.at(node.node_id()).incarnation(), ";");
    node = members.at(node.node_id());
    node.clear_copies();  // the member key's, not the map's
  }
  // A draining mark follows the process, not the lease.
  for (v1::ClusterNode& mark : *step.map.mutable_draining()) {
    if (back.count(mark.node_id()) == 0) continue;
    if (mark.incarnation() == plan_util::RecordOf(current, mark.node_id())->incarnation()) {
      mark.set_incarnation(members.at(mark.node_id()).incarnation());
    }
  }
  // The primary's writes carry its incarnation, and a backup refuses one
  // whose incarnation is not its map's (the primary would then drop it):
  // a new shard epoch makes a backup still on the older map answer "map
  // behind", which the primary retries, instead.
  for (v1::Shard& shard : *step.map.mutable_shards()) {
    if (!shard.replicas().empty() && back.count(shard.replicas(0)) > 0) {
      shard.set_shard_epoch(shard.shard_epoch() + 1);
    }
  }
  return step;
}

}  // namespace server
}  // namespace kvstore
