// Copyright 2026 The kvstore Authors.

#include "common/auth/rpc_policy.h"

#include <utility>

namespace kvstore {
namespace auth {
namespace {

struct Rule {
  absl::string_view method;
  Permission permission;
};

constexpr Rule kRules[] = {
    // KvControl: the data clients' API.
    {"kvstore.v1.KvControl/Handshake", Permission::kSession},
    {"kvstore.v1.KvControl/ConnectQp", Permission::kSession},
    {"kvstore.v1.KvControl/DisconnectQp", Permission::kSession},
    {"kvstore.v1.KvControl/GrantLease", Permission::kLease},
    {"kvstore.v1.KvControl/RenewLease", Permission::kLease},
    {"kvstore.v1.KvControl/ReleaseLease", Permission::kLease},
    {"kvstore.v1.KvControl/Get", Permission::kRead},
    {"kvstore.v1.KvControl/Scan", Permission::kRead},
    {"kvstore.v1.KvControl/Stats", Permission::kRead},
    {"kvstore.v1.KvControl/Ttl", Permission::kRead},
    {"kvstore.v1.KvControl/ReportReads", Permission::kRead},
    {"kvstore.v1.KvControl/Expire", Permission::kWrite},
    {"kvstore.v1.KvControl/Put", Permission::kWrite},
    {"kvstore.v1.KvControl/Delete", Permission::kWrite},
    // KvCluster: the map for every principal (clients route with it) ...
    {"kvstore.v1.KvCluster/GetClusterMap", Permission::kClusterMap},
    // ... what one kvserver calls on another ...
    {"kvstore.v1.KvCluster/Replicate", Permission::kPeer},
    {"kvstore.v1.KvCluster/ReplicateStream", Permission::kPeer},
    {"kvstore.v1.KvCluster/ReplicaStatus", Permission::kPeer},
    {"kvstore.v1.KvCluster/SyncShard", Permission::kPeer},
    {"kvstore.v1.KvCluster/ReportInSync", Permission::kPeer},
    {"kvstore.v1.KvCluster/ImportWrite", Permission::kPeer},
    {"kvstore.v1.KvCluster/BeginImport", Permission::kPeer},
    {"kvstore.v1.KvCluster/ImportEntries", Permission::kPeer},
    {"kvstore.v1.KvCluster/AcceptHandoff", Permission::kPeer},
    {"kvstore.v1.KvCluster/ShardDigest", Permission::kPeer},
    {"kvstore.v1.KvCluster/ReconcileSlots", Permission::kPeer},
    // ... and the operator's requests (a node that is not the controller
    // forwards them with the operator's own credential).
    {"kvstore.v1.KvCluster/Failover", Permission::kAdmin},
    {"kvstore.v1.KvCluster/RemoveNode", Permission::kAdmin},
    {"kvstore.v1.KvCluster/AddNode", Permission::kAdmin},
    {"kvstore.v1.KvCluster/Rebalance", Permission::kAdmin},
    {"kvstore.v1.KvCluster/AcceptLoss", Permission::kAdmin},
};

}  // namespace

std::optional<Permission> RpcPermission(absl::string_view method) {
  for (const Rule& rule : kRules) {
    if (rule.method == method) return rule.permission;
  }
  return std::nullopt;
}

}  // namespace auth
}  // namespace kvstore
