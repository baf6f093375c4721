// Copyright 2026 The kvstore Authors.
//
// ShardMapEditor: the changes the primary of a shard makes to its own
// shard's in-sync set and to the migrations leaving it (architecture §19.2), as etcd transactions
// on the cluster map. The replicator calls it; membership implements it on etcd (the txn compares
// the map's mod_revision and that this node's member key still holds its lease, so a primary that
// lost its lease cannot change the map). Both return once the new map is committed in etcd and
// installed in this node's ClusterState.
//
// Errors: kFailedPrecondition when this node is not the shard's primary in
// the newest map (a map naming an earlier incarnation of this node does
// not make this process its primary), or the node is not where the change expects it;
// kUnavailable when etcd is unreachable or this node is not serving.
// Both are idempotent: RemoveReplica of a node no longer in the shard and
// MarkInSync of a node already in sync return OK (a retry after a lost reply,
// or another writer got there first).
//
// Thread safety: implementations are thread-safe.

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_SHARD_MAP_EDITOR_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_SHARD_MAP_EDITOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace server {

class ShardMapEditor {
 public:
  virtual ~ShardMapEditor() = default;
  // Drops `node_id` from the shard's in-sync backups (or its syncing list).
  virtual absl::Status RemoveReplica(uint32_t shard_id, absl::string_view node_id) = 0;
  // Moves `node_id` from the shard's syncing list to the end of its
  // in-sync replicas — only if, in the map being edited, its record has
  // `incarnation` (0: not checked) and it has been syncing since shard
  // epoch `copy_shard_epoch` or earlier (the epoch its copy began at; 0:
  // not checked): else kFailedPrecondition, it must copy again. The
  // caller's own map may be older than that one.
  virtual absl::Status MarkInSync(uint32_t shard_id, absl::string_view node_id,
                                  uint64_t incarnation, uint64_t copy_shard_epoch) = 0;

  // Slot migration (architecture §19.9), by the primary of the migration's
  // source shard. BeginHandoff: COPYING -> HANDOFF once the copy is
  // complete (already HANDOFF: OK), only while the target shard's
  // shard_epoch is still `target_shard_epoch`, the one in the map the copy
  // began on (kFailedPrecondition "copy again" otherwise: the target's
  // replica set changed under the copy). CompleteMigration: the flip — the
  // migration's slots leave the source shard and join the target shard,
  // both shard epochs are bumped and the migration is removed, in one txn
  // (already gone with its slots in the target: OK). kFailedPrecondition as
  // above, and when the migration is unknown or in another state.
  virtual absl::Status BeginHandoff(uint32_t migration_id, uint64_t target_shard_epoch) = 0;
  virtual absl::Status CompleteMigration(uint32_t migration_id) = 0;
};

// A ShardMapEditor that forwards to another one set later: the replicator
// is built before the store (it is the store's write hook), the etcd map
// store only once the listeners are bound. Until Set() (and after
// Set(nullptr)) both calls fail with kUnavailable.
class ForwardingShardMapEditor : public ShardMapEditor {
 public:
  // `target` is not owned and must stay valid until Set(nullptr) returns.
  void Set(ShardMapEditor* target) {
    absl::MutexLock lock(&mu_);
    target_ = target;
  }
  absl::Status RemoveReplica(uint32_t shard_id, absl::string_view node_id) override {
    absl::MutexLock lock(&mu_);
    if (target_ == nullptr) return absl::UnavailableError("the cluster plane is not running");
    return target_->RemoveReplica(shard_id, node_id);
  }
  absl::Status MarkInSync(uint32_t shard_id, absl::string_view node_id, uint64_t incarnation,
                          uint64_t copy_shard_epoch) override {
    absl::MutexLock lock(&mu_);
    if (target_ == nullptr) return absl::UnavailableError("the cluster plane is not running");
    return target_->MarkInSync(shard_id, node_id, incarnation, copy_shard_epoch);
  }
  absl::Status BeginHandoff(uint32_t migration_id, uint64_t target_shard_epoch) override {
    absl::MutexLock lock(&mu_);
    if (target_ == nullptr) return absl::UnavailableError("the cluster plane is not running");
    return target_->BeginHandoff(migration_id, target_shard_epoch);
  }
  absl::Status CompleteMigration(uint32_t migration_id) override {
    absl::MutexLock lock(&mu_);
    if (target_ == nullptr) return absl::UnavailableError("the cluster plane is not running");
    return target_->CompleteMigration(migration_id);
  }

 private:
  // Held across the call, so Set(nullptr) waits for calls in flight.
  absl::Mutex mu_;
  ShardMapEditor* target_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_SHARD_MAP_EDITOR_H_
