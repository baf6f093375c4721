// Copyright 2026 The kvstore Authors.
//
// MigrationDriver: the source primary's side of a slot migration
// (architecture §19.9), driven by the map. A background thread looks at
// every installed map (ClusterState listener) and polls every
// `poll_interval`; for the running migration whose source shard this node
// leads it takes the next step:
//
//   COPYING   wait out the writes of the source shard routed on older maps
//             (they were not forwarded: Replicator::DrainShard), open a
//             copy session on the target primary (BeginImport), send every
//             entry of the slots, each read under its stripe lock
//             (ScanSlots), in ImportEntries batches of at most
//             `batch_bytes`, then ShardMapEditor::BeginHandoff with the
//             target shard's epoch of the map the copy began on (refused
//             when the target's replicas changed meanwhile: copy again);
//   HANDOFF   DrainShard again (new writes of the slots route kTryAgain
//             now), AcceptHandoff on the target primary,
//             ClusterState::MarkHandedOff, ShardMapEditor::CompleteMigration
//             (the flip).
//
// A failed step is logged and retried from the map after a backoff (100 ms
// doubling to 2 s); a COPYING attempt copies again with a new session. A
// node that becomes the source primary (failover) finds the migration in
// its map and carries on the same way.
//
// Thread safety: thread-safe. The destructor stops the thread (it cancels
// an RPC in progress); call it before the store, the replicator and the
// editor go.

#ifndef KVSTORE_SERVER_CLUSTER_MIGRATION_MIGRATION_DRIVER_H_
#define KVSTORE_SERVER_CLUSTER_MIGRATION_MIGRATION_DRIVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/membership/shard_map_editor.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/replication/replicator.h"
#include "server/routing/cluster_state.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

struct MigrationDriverOptions {
  // How often the thread looks at the map without a map change; zero: no
  // thread (tests call Step()).
  absl::Duration poll_interval = absl::Milliseconds(25);
  absl::Duration min_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(2);
  // Upper bound of one ImportEntries batch's entries (a larger entry goes
  // alone).
  uint64_t batch_bytes = 1 << 20;
  // Deadline of each RPC to the target.
  absl::Duration rpc_timeout = absl::Seconds(10);
};

class MigrationDriver {
 public:
  // None owned; all must outlive the driver. `peers` makes the calls to
  // the target. Registers a listener with `state` (call before its first
  // Update()) and starts the thread.
  MigrationDriver(KvStore* store, ClusterState* state, Replicator* replicator,
                  ShardMapEditor* editor, PeerClient* peers, metrics::Registry* registry,
                  MigrationDriverOptions options);
  ~MigrationDriver();
  MigrationDriver(const MigrationDriver&) = delete;
  MigrationDriver& operator=(const MigrationDriver&) = delete;

  // One step for the running migration this node's map has it drive, on
  // the caller's thread: OK when there is none or the step succeeded; the
  // step's error otherwise.
  absl::Status Step();

 private:
  absl::Status Copy(const cluster::ClusterMapView& map, const v1::Migration& m,
                    const v1::ClusterNode& target);
  absl::Status Handoff(const cluster::ClusterMapView& map, const v1::Migration& m,
                       const v1::ClusterNode& target);
  // Sends one batch to `target`; counts what it carried.
  absl::Status SendBatch(const v1::ClusterNode& target, v1::ImportEntriesRequest& batch,
                         uint64_t* installed, uint64_t* skipped);
  // The deadline of one call to the target (MigrationDriverOptions).
  absl::Time CallDeadline() const;
  bool Stopping();
  void Loop();

  KvStore* const store_;
  ClusterState* const state_;
  Replicator* const replicator_;
  ShardMapEditor* const editor_;
  PeerClient* const peers_;
  const MigrationDriverOptions options_;
  // The calls to the target; the destructor cancels them.
  PeerCallGroup calls_;
  // Serialises Step() (the thread and tests).
  absl::Mutex step_mu_;

  // Shared with the map listener, which outlives the driver.
  struct Wake {
    absl::Mutex mu;
    bool stopping ABSL_GUARDED_BY(mu) = false;
    bool kicked ABSL_GUARDED_BY(mu) = false;  // a new map came
  };
  const std::shared_ptr<Wake> wake_;

  metrics::Counter* entries_copied_;
  metrics::Counter* bytes_copied_;
  metrics::Counter* handoffs_;
  metrics::Counter* failures_;
  metrics::Gauge* running_id_;
  metrics::Gauge* running_state_;
  std::thread thread_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MIGRATION_MIGRATION_DRIVER_H_
