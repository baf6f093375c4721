// Copyright 2026 The kvstore Authors.
//
// ReplicaInstaller: the backup's side of replication (architecture §19.3,
// §19.4).
//
// A write forwarded by a shard's primary arrives as a Replicate RPC
// (Replicate(): the entry is copied into the pool) or, when both nodes have
// RDMA, as a replica commit on an RDMA connection of the primary's
// (ApplyReplicaCommit(), the ReplicaCommitSink the RdmaService calls: the
// entry was WRITTEN into a lease and is published in place). Either way it
// is refused unless this
// node's map has the shard at the request's shard_epoch (this map older: a
// kMapBehind refusal, which the primary retries briefly; newer:
// kStaleShardEpoch), the sender is the shard's primary (and of the
// incarnation the map names), this node is one of its in-sync backups
// or syncing replicas, and the map does not name an earlier incarnation of
// this node that was another process (ClusterState::NamesOtherProcess: a
// restart lost that copy; the same process back from a lease lapse holds
// it and goes on acknowledging). Installed with KvStore::InstallReplica (the entry's
// checksum is verified: kDataLoss) or DeleteReplica; the shard's applied
// seq is then recorded (ReplicaStatus). A write the store cannot take (its
// pool or index full: nothing is stored) is refused with a kNotStored
// refusal of Effect::kNone, by RPC and in the RDMA commit ack alike.
//
// Sync: when this node's map lists it in a shard's `syncing`, a background
// thread calls SyncShard on the primary with its digest of each slot of the
// shard it still holds (a delta resync: a node back from a lease lapse, or
// dropped and placed again, keeps its copy). The primary streams only the
// slots whose digests differ and lists them first; this node drops what it
// holds of those slots (it may hold keys deleted since), installs the
// streamed entries — except for keys a Replicate wrote since this copy
// began, which are at least as new — and keeps its equal slots as they
// are; then it calls ReportInSync on the primary. A failed attempt
// is retried with backoff (100 ms doubling to 2 s). While a shard syncs,
// a Replicate of a key older (lower seq) than one already applied to that
// key is ignored, so a delayed forward cannot undo a newer one. On an
// in-sync shard, a replica commit arriving by RDMA whose seq the primary
// already sent again by gRPC after that link failed is dropped
// (ResentSeqs), so a commit left queued by a failed link cannot undo a
// later write.
//
// Reconciliation (replica_installer_reconcile.cc): a new primary asks an
// in-sync backup for its per-slot digests (ShardDigest) and sends its own
// entries of the slots that differ (ReconcileSlots: installed, then the
// backup's other keys of those slots deleted, key by key), before it
// acknowledges any write. Both are refused as a Replicate from that
// primary at that shard epoch would be, and by a syncing replica (it
// copies instead).
//
// Thread safety: thread-safe. The destructor stops the sync thread (it
// cancels a stream in progress).

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_INSTALLER_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_INSTALLER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_map.h"
#include "common/metrics/registry.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/replication/replicate_batch_view.h"
#include "server/cluster/replication/resent_seqs.h"
#include "server/cluster/replication/shard_seqs.h"
#include "server/cluster/replication/slot_digest.h"
#include "server/rdma/replica_commit_sink.h"
#include "server/routing/cluster_state.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

struct ReplicaInstallerOptions {
  // How often the sync thread looks at the map for shards to copy; zero:
  // no sync thread (tests drive SyncShardNow()).
  absl::Duration sync_poll_interval = absl::Milliseconds(20);
  absl::Duration min_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(2);
};

// The highest seq a backup accepts: far above what any primary reaches
// (2^62 writes), far below wrapping.
inline constexpr uint64_t kMaxReplicaSeq = uint64_t{1} << 62;

class ReplicaInstaller : public ReplicaCommitSink {
 public:
  // None owned; all must outlive the installer. `peers` makes the calls to
  // the primary (SyncShard, without a deadline; ReportInSync, by the peer
  // client's default deadline). Starts the sync thread.
  ReplicaInstaller(KvStore* store, ClusterState* state, ShardSeqs* seqs, PeerClient* peers,
                   metrics::Registry* registry, ReplicaInstallerOptions options);
  ~ReplicaInstaller() override;
  ReplicaInstaller(const ReplicaInstaller&) = delete;
  ReplicaInstaller& operator=(const ReplicaInstaller&) = delete;

  // The Replicate RPC (see the file comment for the errors). A request
  // whose `deadline` (the caller's) has passed is refused with
  // kDeadlineExceeded and not installed: its primary has counted it failed
  // and may have sent the key's state again since (a repair, or the next
  // write), which installing it late would undo.
  absl::StatusOr<v1::ReplicateResponse> Replicate(const v1::ReplicateRequest& req,
                                                  absl::Time deadline = absl::InfiniteFuture());
  // The same for a write read in place from a replication stream's batch
  // (replicate_batch_view.h): the entry is copied from the frame into the
  // pool, the one copy on the backup.
  absl::Status Replicate(const ReplicateWrite& write, absl::Time deadline);
  // The same checks and application for a write in wire form (the RDMA
  // service's replica commits; Replicate() converts to it). `install`
  // publishes a put's entry. The refusals listed above.
  absl::Status ApplyReplicaCommit(const ReplicaCommit& commit,
                                  absl::FunctionRef<absl::Status()> install) override {
    return Apply(commit, install, Via::kRdma);
  }
  // The ShardDigest and ReconcileSlots RPCs (see the file comment and
  // proto/kv_cluster.proto).
  absl::StatusOr<v1::ShardDigestResponse> ShardDigest(const v1::ShardDigestRequest& req);
  absl::StatusOr<v1::ReconcileSlotsResponse> ReconcileSlots(const v1::ReconcileSlotsRequest& req);
  // The highest seq of `shard_id` applied here (a Replicate's answer).
  uint64_t AppliedSeq(uint32_t shard_id) const { return seqs_->Last(shard_id); }
  // The ReplicaStatus RPC: the shard's applied seq, its epoch in this
  // node's map (0 when absent), the map epoch and whether it is fenced.
  v1::ReplicaStatusResponse Status(uint32_t shard_id) const;

  // One sync of shard `shard_id`, on the caller's thread: copy from the
  // primary, then ReportInSync. kFailedPrecondition when this node is not
  // syncing it; the errors of the two RPCs otherwise.
  absl::Status SyncShardNow(uint32_t shard_id);

 private:
  // A shard this node is syncing. touched: keys Replicate wrote since the
  // current copy began (cleared at each attempt); key_seq: the highest seq
  // applied per key while syncing. `mu` is held across each install, so a
  // streamed entry and a Replicate of one key never interleave.
  struct SyncState {
    absl::Mutex mu;
    absl::flat_hash_set<std::string> touched ABSL_GUARDED_BY(mu);
    absl::flat_hash_map<std::string, uint64_t> key_seq ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<SyncState> GetSyncState(uint32_t shard_id);
  // How a replicated write arrived: a replica commit on an RDMA connection,
  // a Replicate RPC, or one marked resent_after_rdma.
  enum class Via { kRdma, kRpc, kRpcResent };
  // ApplyReplicaCommit, for a write that arrived `via`.
  absl::Status Apply(const ReplicaCommit& commit, absl::FunctionRef<absl::Status()> install,
                     Via via);
  // Check() of a reconciliation call from `primary` (of `incarnation`) at
  // `shard_epoch`, which a syncing replica refuses too.
  absl::Status CheckReconcile(uint32_t shard_id, uint64_t shard_epoch, absl::string_view primary,
                              uint64_t incarnation);
  // The map checks of a replicated write; `syncing`: this node is a
  // syncing (not yet in-sync) replica of the shard in that map; `used`
  // (when not null): that map.
  // The map checks are remembered per thread for the last write that passed
  // them (the writes of a batch share them): a later write of the same
  // shard, epoch and primary against the same map skips them.
  absl::Status Check(const ReplicaCommit& commit, bool* syncing,
                     std::shared_ptr<const cluster::ClusterMapView>* used = nullptr) const;
  // Check()'s refusal when the map names an earlier life of this node.
  absl::Status NamesEarlierLife() const;
  // The checks of the write itself, against the map Check() used: its seq
  // is one a primary can have taken (not 0, not near wrapping), and its key
  // belongs to the shard (its slots, or those of a COPYING / HANDOFF
  // migration into it). Counted in kvstore_replica_check_refusals_total.
  absl::Status CheckWrite(const cluster::ClusterMapView& map, const ReplicaCommit& commit,
                          absl::string_view key) const;
  // The slots of `shard` whose keys this node's copy of it holds: the
  // shard's own, except those of an active migration out of it into a
  // shard this node is in (they are that shard's import, not this copy).
  SlotBits OwnCopySlots(const cluster::ClusterMapView& map, const v1::Shard& shard) const;
  // Deletes this node's entries of `slots` (of shard `shard_id`), except
  // keys a Replicate wrote since the copy began: a node that held the shard
  // before may hold keys the primary deleted since, and a copy only adds.
  absl::Status DropStale(const SlotBits& slots, uint32_t shard_id, SyncState& sync);
  // What one copy streamed and what it skipped.
  struct CopyCounts {
    uint64_t entries = 0;
    uint64_t bytes = 0;
    uint64_t snapshot_seq = 0;
    uint64_t slots_resynced = 0;
    uint64_t slots_equal = 0;
  };
  // Streams the slots of the shard that differ from `own` (this node's
  // slots of its copy, `digests` theirs) from `primary` into the store,
  // dropping this node's keys of those slots first.
  absl::Status Copy(const v1::Shard& shard, const v1::ClusterNode& primary, const SlotBits& own,
                    const absl::flat_hash_map<uint32_t, uint64_t>& digests, SyncState& sync,
                    CopyCounts* counts);
  void SyncLoop();

  KvStore* const store_;
  ClusterState* const state_;
  ShardSeqs* const seqs_;
  PeerClient* const peers_;
  const ReplicaInstallerOptions options_;
  // The copy in progress; the destructor cancels it.
  PeerCallGroup calls_;

  ResentSeqs resent_;
  absl::Mutex sync_mu_;
  absl::flat_hash_map<uint32_t, std::shared_ptr<SyncState>> syncing_ ABSL_GUARDED_BY(sync_mu_);
  bool stopping_ ABSL_GUARDED_BY(sync_mu_) = false;

  metrics::Counter* installs_;
  metrics::Counter* deletes_;
  metrics::Counter* refused_;
  metrics::Counter* refused_slot_;
  metrics::Counter* refused_seq_;
  metrics::Counter* refused_incarnation_;
  metrics::Counter* stale_skipped_;
  metrics::Counter* sync_entries_;
  metrics::Counter* sync_bytes_;
  metrics::Counter* syncs_done_;
  metrics::Counter* sync_failures_;
  metrics::Counter* sync_slots_equal_;
  std::thread sync_thread_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_INSTALLER_H_
