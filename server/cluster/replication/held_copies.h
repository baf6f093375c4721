// Copyright 2026 The kvstore Authors.
//
// HeldCopies: the shard copies this node's memory holds, as it publishes
// them in its member key when it registers again after a lease lapse
// (ClusterNode, architecture §19.6). The controller gives a DOWN shard back
// to such a copy when the process is one of the shard's last in-sync set.
//
// A copy is listed for every shard whose in-sync replicas name this node in
// its current map, for every DOWN shard whose last_in_sync names it (the
// slot janitor keeps those slots), and for every shard with a primary but
// fewer in-sync replicas than R of which this process applied writes (a
// candidate copy the janitor keeps; the controller places such a node
// first when it refills the shard, and its delta resync copies only the
// slots that changed): shard id, the shard's epoch in that map, and the
// highest replication seq applied (ShardSeqs). Which copy is worth anything
// is the controller's decision, on the newest map.
//
// Thread safety: a pure function of its arguments (both thread-safe).

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_HELD_COPIES_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_HELD_COPIES_H_

#include <vector>

#include "proto/kv_cluster.pb.h"
#include "server/cluster/replication/shard_seqs.h"
#include "server/routing/cluster_state.h"

namespace kvstore {
namespace server {

std::vector<v1::ShardCopy> HeldCopies(const ClusterState& state, const ShardSeqs& seqs);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_HELD_COPIES_H_
