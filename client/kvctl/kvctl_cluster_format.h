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
// Migrations (status and slots), text: one line each, in the map's order:
//   migration 7  COPYING  slots 4096-5460  count 1365  shard 0 -> shard 3
// JSON (status and slots): "migrations":[{"id":7,"state":"COPYING",
//   "start":4096,"end":5460,"count":1365,"source_shard":0,"target_shard":3}]
//   (always present; [] when none).
// rebalance, text: a header line, then one line per planned migration:
//   queued 3 migration(s) in map epoch 9          (or: dry run: 3 migration(s)
//   migration 7  slots 4096-5460  count 1365  shard 0 -> shard 3   planned, nothing written)
//   ("slots are already even: nothing to move" when none.)
// rebalance, JSON: {"dry_run":false,"epoch":9,"planned":[{"id":7,
//   "start":..,"end":..,"count":..,"source_shard":0,"target_shard":3}]}
// rebalance --wait progress, text, one line per change:
//   epoch 12: 1 of 3 done, 1 pending; running migration 8 COPYING slots 9557-10922 shard 1 -> shard
//   3
// JSON: {"epoch":12,"done":1,"dropped":0,"total":3,"pending":1,
//   "running":{migration as above} or null}
// Invalid UTF-8 in names is replaced in JSON.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_CLUSTER_FORMAT_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_CLUSTER_FORMAT_H_

#include <string>
#include <vector>

#include "proto/kv_cluster.pb.h"

namespace kvstore {
namespace client {
namespace kvctl {

std::string FormatClusterStatus(const v1::ClusterMap& map, bool json);
std::string FormatClusterNodes(const v1::ClusterMap& map, bool json);
std::string FormatClusterSlots(const v1::ClusterMap& map, bool json);

// What `cluster accept-loss --shard=N` costs, in words, from the map: every
// key of shard N's slots, and which in-sync replicas it waits for; empty
// when the map has no such shard or the shard is not down (the server then
// refuses the request anyway).
std::string DescribeLoss(const v1::ClusterMap& map, uint32_t shard_id);

// The answer of rebalance: `planned` (written into map epoch `epoch`
// unless `dry_run`).
std::string FormatRebalancePlan(const std::vector<v1::Migration>& planned, uint64_t epoch,
                                bool dry_run, bool json);

// How far the migrations `planned` got in `map`. One not in the map any
// more is done when its target shard owns its slots, else dropped (the
// controller drops a migration whose source or target shard went down).
struct RebalanceProgress {
  uint64_t epoch = 0;
  int total = 0;
  int done = 0;
  int dropped = 0;
  int pending = 0;
  // The planned migration that is COPYING or HANDOFF; none: id 0 and
  // state unspecified.
  v1::Migration running;
  bool finished() const { return done + dropped == total; }
};
RebalanceProgress ProgressOf(const v1::ClusterMap& map, const std::vector<v1::Migration>& planned);
std::string FormatRebalanceProgress(const RebalanceProgress& progress, bool json);

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_CLUSTER_FORMAT_H_
