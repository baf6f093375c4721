// Copyright 2026 The kvstore Authors.
//
// MapStore: the cluster map in etcd (/kvstore/<cluster>/map), read and
// written by compare-and-swap on its mod_revision (architecture §19.2), and
// the ShardMapEditor of this node: the in-sync-set changes a primary makes
// to its own shard.
//
// An edit reads the newest map from etcd (not the local one), checks its
// preconditions there, and commits the edited map (shard_epoch + 1, epoch +
// 1) by a txn that also compares this node's member key with its lease: a
// node whose lease is gone cannot change the map. When the map changed
// between read and txn the edit starts over (re-read, re-check), at most
// `max_attempts` times. Every map it reads or writes is installed into
// ClusterState before the call returns.
//
// Errors (as ShardMapEditor): kFailedPrecondition when there is no map, the
// shard is unknown, this node is not its primary in the newest map (or that
// map names an earlier incarnation of this node: a restarted process holds
// nothing of the shard), or the
// node is not where the change expects it (MarkInSync: not syncing, another
// incarnation, or added again since its copy began; RemoveReplica: the
// primary itself; BeginHandoff: the migration is not COPYING, or its target
// shard's epoch moved since the copy began); kUnavailable when this node is not
// serving, its lease is gone, etcd is unreachable or every attempt lost its
// race. RemoveReplica of a node already absent from the shard is OK: the
// in-sync set is what the caller needs it to be.
//
// Thread safety: thread-safe; edits are serialised (one primary's edits of
// its shards would only race each other).

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_MAP_STORE_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_MAP_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/cluster/membership/shard_map_editor.h"
#include "server/routing/cluster_state.h"

namespace kvstore {
namespace server {

struct MapStoreOptions {
  std::string cluster_name = "kvstore";
  // This node and the lease its member key is held under (Membership).
  std::string node_id;
  int64_t lease = 0;
  // Edits that lose the race to another map writer this many times fail.
  int max_attempts = 5;
  // Test hook: runs after an edit read the map and before its txn (a test
  // changes the map there to make the txn lose its race). Empty in
  // production.
  std::function<void()> before_txn;
};

// The map as stored, with the revision a compare-and-swap needs.
struct StoredMap {
  v1::ClusterMap map;
  int64_t mod_revision = 0;
};

class MapStore : public ShardMapEditor {
 public:
  // `etcd` and `state` must outlive the MapStore.
  MapStore(etcd::EtcdClient* etcd, ClusterState* state, MapStoreOptions options);

  // The stored map; nullopt when there is none yet. kDataLoss for a value
  // that is not a map.
  absl::StatusOr<std::optional<StoredMap>> Read() const;

  // ShardMapEditor.
  absl::Status RemoveReplica(uint32_t shard_id, absl::string_view node_id) override;
  absl::Status MarkInSync(uint32_t shard_id, absl::string_view node_id, uint64_t incarnation,
                          uint64_t copy_shard_epoch) override;
  absl::Status BeginHandoff(uint32_t migration_id, uint64_t target_shard_epoch) override;
  absl::Status CompleteMigration(uint32_t migration_id) override;

 private:
  // Changes one shard of the newest map. `change` returns kFailedPrecondition
  // to refuse, or OK with `*changed` false when there is nothing to do.
  using ShardChange = std::function<absl::Status(v1::Shard* shard, bool* changed)>;
  absl::Status Edit(uint32_t shard_id, const char* what, const ShardChange& change);
  // Edit() with the whole map at hand (migrations change two shards).
  // `shard` is the one this node must lead; its epoch is bumped.
  using MapChange =
      std::function<absl::Status(v1::ClusterMap* map, v1::Shard* shard, bool* changed)>;
  absl::Status EditMap(uint32_t shard_id, const char* what, const MapChange& change);
  // The shard of `migration_id`'s source in the newest stored map (to pick
  // the shard EditMap checks); kFailedPrecondition when unknown.
  absl::StatusOr<uint32_t> MigrationSource(uint32_t migration_id, bool* gone);
  // kFailedPrecondition when `map` records another incarnation of this
  // node than options_.lease: this process is not the one the map gave its
  // roles to (it restarted), so it may not act as their primary.
  absl::Status CheckSameLife(const v1::ClusterMap& map) const;
  // Installs `map` into the ClusterState (an older epoch is ignored).
  absl::Status Install(const v1::ClusterMap& map);

  etcd::EtcdClient* const etcd_;
  ClusterState* const state_;
  const MapStoreOptions options_;
  const std::string map_key_;
  const std::string member_key_;
  absl::Mutex edit_mu_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_MAP_STORE_H_
