// Copyright 2026 The kvstore Authors.

#include "server/cluster/controller/controller_plan_util.h"

#include <algorithm>

namespace kvstore {
namespace server {
namespace plan_util {

const v1::ClusterNode* RecordOf(const v1::ClusterMap& map, const std::string& node_id) {
  for (const v1::ClusterNode& node : map.nodes()) {
    if (node.node_id() == node_id) return &node;
  }
  return nullptr;
}

std::set<std::string> NamedNodes(const v1::ClusterMap& map) {
  std::set<std::string> named;
  for (const v1::Shard& shard : map.shards()) {
    named.insert(shard.replicas().begin(), shard.replicas().end());
    named.insert(shard.syncing().begin(), shard.syncing().end());
  }
  return named;
}

google::protobuf::RepeatedPtrField<v1::ClusterNode> RebuildNodes(
    const v1::ClusterMap& map, const MemberSet& members, const std::set<std::string>& placed) {
  google::protobuf::RepeatedPtrField<v1::ClusterNode> out;
  for (const std::string& id : NamedNodes(map)) {
    const v1::ClusterNode* old = RecordOf(map, id);
    auto member = members.find(id);
    const bool use_member =
        member != members.end() && (old == nullptr || placed.count(id) > 0 ||
                                    old->incarnation() == member->second.incarnation());
    if (use_member) {
      v1::ClusterNode* node = out.Add();
      *node = member->second;
      node->clear_copies();  // the member key's, not the map's
    } else if (old != nullptr) {
      *out.Add() = *old;
    }
  }
  return out;
}

void RemoveFrom(google::protobuf::RepeatedPtrField<std::string>* list,
                const std::set<std::string>& gone) {
  list->erase(std::remove_if(list->begin(), list->end(),
                             [&](const std::string& id) { return gone.count(id) > 0; }),
              list->end());
}

bool IsDraining(const v1::ClusterMap& map, const std::string& node_id, uint64_t incarnation) {
  for (const v1::ClusterNode& d : map.draining()) {
    if (d.node_id() == node_id && d.incarnation() == incarnation) return true;
  }
  return false;
}

bool InShard(const v1::Shard& shard, const std::string& id) {
  return std::find(shard.replicas().begin(), shard.replicas().end(), id) !=
             shard.replicas().end() ||
         std::find(shard.syncing().begin(), shard.syncing().end(), id) != shard.syncing().end();
}

}  // namespace plan_util
}  // namespace server
}  // namespace kvstore
