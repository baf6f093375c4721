// Copyright 2026 The kvstore Authors.
//
// ShardMapEditor: the two changes the primary of a shard makes to its own
// shard's in-sync set (architecture §19.2), as etcd transactions on the
// cluster map. The replicator calls it; membership implements it on etcd
// (the txn compares the map's mod_revision and that this node's member key
// still holds its lease, so a primary that lost its lease cannot change the
// map). Both return once the new map is committed in etcd and installed in
// this node's ClusterState.
//
// Errors: kFailedPrecondition when this node is not the shard's primary in
// the newest map, or the node is not where the change expects it;
// kUnavailable when etcd is unreachable or this node is not serving.
// Both are idempotent: RemoveReplica of a node no longer in the shard and
// MarkInSync of a node already in sync return OK (a retry after a lost reply,
// or another writer got there first).
//
// Thread safety: implementations are thread-safe.

#ifndef KVSTORE_SERVER_CLUSTER_SHARD_MAP_EDITOR_H_
#define KVSTORE_SERVER_CLUSTER_SHARD_MAP_EDITOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace server {

class ShardMapEditor {
 public:
  virtual ~ShardMapEditor() = default;
  // Drops `node_id` from the shard's in-sync backups (or its syncing list).
  virtual absl::Status RemoveReplica(uint32_t shard_id, absl::string_view node_id) = 0;
  // Moves `node_id` from the shard's syncing list to the end of its
  // in-sync replicas.
  virtual absl::Status MarkInSync(uint32_t shard_id, absl::string_view node_id) = 0;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_SHARD_MAP_EDITOR_H_
