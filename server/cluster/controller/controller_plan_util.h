// Copyright 2026 The kvstore Authors.
//
// Small helpers the controller's planning steps share (controller_plan.cc,
// controller_plan_replicas.cc). Pure functions of a map and the members;
// thread-safe as long as the arguments are not being modified.

#ifndef KVSTORE_SERVER_CLUSTER_CONTROLLER_CONTROLLER_PLAN_UTIL_H_
#define KVSTORE_SERVER_CLUSTER_CONTROLLER_CONTROLLER_PLAN_UTIL_H_

#include <cstdint>
#include <set>
#include <string>

#include "proto/kv_cluster.pb.h"
#include "server/cluster/controller/controller_plan.h"

namespace kvstore {
namespace server {
namespace plan_util {

// The map's record of `node_id`, or null.
const v1::ClusterNode* RecordOf(const v1::ClusterMap& map, const std::string& node_id);

// Every node some shard names (replicas or syncing).
std::set<std::string> NamedNodes(const v1::ClusterMap& map);

// `nodes` as it should be: exactly the nodes some shard names, sorted; a
// node's member record when that member is the incarnation the map knows
// (or it is in `placed`, just placed), else the record the map had.
google::protobuf::RepeatedPtrField<v1::ClusterNode> RebuildNodes(
    const v1::ClusterMap& map, const MemberSet& members, const std::set<std::string>& placed);

// Removes every id in `gone` from `list`, keeping the order of the rest.
void RemoveFrom(google::protobuf::RepeatedPtrField<std::string>* list,
                const std::set<std::string>& gone);

// Whether `node_id` of this incarnation is marked draining in `map`.
bool IsDraining(const v1::ClusterMap& map, const std::string& node_id, uint64_t incarnation);

// Whether `id` is in the shard's replicas or syncing list.
bool InShard(const v1::Shard& shard, const std::string& id);

}  // namespace plan_util
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_CONTROLLER_CONTROLLER_PLAN_UTIL_H_
