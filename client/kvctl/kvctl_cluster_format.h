// Copyright 2026 The kvstore Authors.
//
// The output of `kvctl cluster status|nodes|slots` (and of failover and
// remove-node, which print the new map as status does), as aligned text or one line of JSON.
// Pure functions of a ClusterMap; safe from any thread. Every output ends
// in '\n'.
//
// status, text:
//   epoch 7 controller n1 cluster kvstore replicas 2
//   draining n3            (only when remove-node marked some node)
//   shard 0  up    slots 0-8191  primary n0  backups n1  syncing -  shard_epoch 3
// status, JSON:
//   {"epoch":7,"controller":"n1","cluster_name":"kvstore","replication_factor":2,
//    "shards":[{"shard_id":0,"shard_epoch":3,"slots":[[0,8191]],"up":true,
//               "primary":"n0","backups":["n1"],"syncing":[]}],
//    "draining":["n3"]}
//   ("primary" is null for a shard that is down.)
// nodes, text: one line per node of the map:
//   n0  control 10.0.0.1:7300  resp 10.0.0.1:6380  incarnation 42  roles primary:0,backup:1
// nodes, JSON: {"epoch":7,"nodes":[{"node_id":..,"incarnation":..,
//   "control_address":..,"resp_address":..,"metrics_address":..,
//   "applied_map_epoch":..,"roles":["primary:0","backup:1","syncing:2"]}]}
// slots, text: one line per slot range, in slot order:
//   0-8191  shard 0  primary n0 10.0.0.1:7300
// slots, JSON: {"epoch":7,"slots":[{"start":0,"end":8191,"shard_id":0,
//   "primary":"n0","primary_address":"10.0.0.1:7300"}]}
//   (primary and primary_address null when the shard is down; "down" in text.)
// Invalid UTF-8 in names is replaced in JSON.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_CLUSTER_FORMAT_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_CLUSTER_FORMAT_H_

#include <string>

#include "proto/kv_cluster.pb.h"

namespace kvstore {
namespace client {
namespace kvctl {

std::string FormatClusterStatus(const v1::ClusterMap& map, bool json);
std::string FormatClusterNodes(const v1::ClusterMap& map, bool json);
std::string FormatClusterSlots(const v1::ClusterMap& map, bool json);

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_CLUSTER_FORMAT_H_
