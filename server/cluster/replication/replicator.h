// Copyright 2026 The kvstore Authors.
//
// Replicator: the primary's side of synchronous replication (architecture
// §19.3), as KvStore's WriteHook in cluster mode. For every client write:
//
//   1. route the key with ClusterState: not this node's slot -> a kMoved
//      refusal naming the primary (RouteRefusal, with its RESP address); no
//      primary, no map or fenced -> kClusterDown;
//   2. take the key's stripe lock (one of 65536) until the write is published,
//      so writes of one key reach every replica in one order;
//   3. take the shard's next seq and send the write to every in-sync backup
//      and every syncing replica in parallel, on the shard's replication
//      stream to each (replication_stream.h: writes of many clients share
//      one message under load) or by RDMA where a link is up (see
//      set_rdma_links), within replication_timeout (a
//      backup whose map is behind is retried until then; a backup whose map
//      is newer than the one the write was routed on makes the whole write
//      route again, with a new seq, until then);
//   4. drop every in-sync backup that failed from the in-sync set
//      (ShardMapEditor::RemoveReplica) — if that fails the write fails with
//      kClusterDown and nothing is published — and mark every syncing replica
//      that failed as broken (its ReportInSync is refused until it copies
//      again);
//   5. publish locally and return the store's status.
//
// Slot migration (architecture §19.9): a write of a slot whose migration is
// COPYING is also forwarded, in parallel with step 3, to the primary of the
// migration's target shard (ImportWrite, retried while its map is behind,
// within replication_timeout). If it fails the write fails with a kTryAgain
// refusal ("migration target ... unavailable: ...") and nothing is
// published.
// When this node leads the target shard too, the forward is a direct call
// of the local import (set_local_import) with the locks already held. On
// the target, ImportWrite() replicates an imported write to the target
// shard's replicas and installs it (no write hook).
//
// Effect (common/cluster/refusal.h). A write refused before step 3 sent it
// anywhere answers a refusal of Effect::kNone: the client may send it
// again. Once a backup, syncing replica or migration target may hold it
// (it answered OK, or failed without certainly refusing it: a timeout, a
// broken link), every error the write ends with — kClusterDown (fenced
// meanwhile, a failed backup that cannot be dropped), kTryAgain (the
// migration target failed), the store's own error as kNotPublished — is
// marked Effect::kUnknown: the write may surface there later although this
// node never published it, so it must not be sent again. ImportWrite()
// answers the source the same way. A target that refused with no effect
// does not hold it: a backup that could not store it (its pool full)
// answers kNotStored. A failed backup the floor needs is kept; if then no
// target may hold the write, it fails with a refusal of Effect::kNone
// (kNotStored naming that backup, else kClusterDown), nothing published
// and no key left unsettled. A backup the floor can spare is dropped as
// any failed backup, and the write goes on.
//
// Replicas that differ on writes nobody acknowledged are made equal again
// (replicator_settle.cc): a write of a shard this node has just come to
// lead waits (until its deadline, then a kTryAgain refusal of
// Effect::kNone) while ShardReconciler makes the other in-sync replicas
// equal to this node (PromotionGate); and a key whose write ended with an
// unknown outcome after a target may hold it is "unsettled": before the
// shard's next write is sent anywhere, this node sends its own state of
// that key (its entry, or a delete) in a round of its own, with a new seq;
// if that round fails the write is refused with kClusterDown, Effect::kNone
// (SettleIdle() does the same between writes). A key of a slot in a running
// migration is left alone: a replica of both shards holds the target's
// copy of it in the same store.
//
// It also gives the cluster service the primary's half of a joiner's sync:
// BeginSync() and PromoteSyncing() take the shard's barrier (a reader lock
// every write of the shard holds from routing to publishing), so that a
// sync starts only once no write routed on a map without the joiner is in
// flight, and a promotion cannot interleave with a write the joiner misses.
//
// Thread safety: thread-safe. Lock order: shard barrier (a migration's
// source shard before its target shard), then the settling lock, then
// stripe lock, then the send-order lock, then a stream's;
// ShardMapEditor calls are made holding them (the editor must not call back
// into the replicator).

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATOR_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster/refusal.h"
#include "common/metrics/registry.h"
#include "common/sync/deadline_timer.h"
#include "common/sync/handoff_mutex.h"
#include "common/sync/worker_pool.h"
#include "server/cluster/membership/shard_map_editor.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/replication/former_primaries.h"
#include "server/cluster/replication/promotion_gate.h"
#include "server/cluster/replication/rdma_replica_links.h"
#include "server/cluster/replication/replication_stream.h"
#include "server/cluster/replication/shard_seqs.h"
#include "server/routing/cluster_state.h"
#include "server/storage/kv_store.h"
#include "server/storage/write_hook.h"

namespace kvstore {
namespace server {

struct ReplicatorOptions {
  // A backup that does not acknowledge a write within this is dropped from
  // the in-sync set (--replication_timeout); also the deadline of a
  // write's forwards (Replicate, ImportWrite).
  absl::Duration replication_timeout = absl::Seconds(1);
  // The member lease TTL (--member_ttl): how long writes of a shard are
  // held after its former primary is dropped (FormerPrimaries).
  absl::Duration lease_ttl = absl::Seconds(3);
  // The in-sync floor (--min_insync_replicas), capped by the map's
  // replication factor: a write of a shard with fewer in-sync replicas
  // (the primary counted) is refused before it goes anywhere, and a failed
  // backup is never dropped when that would leave fewer (see the file
  // comment). 1: no floor beyond the primary itself.
  uint32_t min_insync_replicas = 1;
};

class Replicator : public WriteHook {
 public:
  // Per-key write stripes, as many as the store's (key_locks.h): a write
  // whose stripe is held cannot start without waiting.
  static constexpr size_t kStripes = 65536;

  // None owned; all must outlive the replicator. `peers` makes every call
  // to another node. `registry` gets the kvstore_replication_* series.
  Replicator(ClusterState* state, ShardMapEditor* editor, ShardSeqs* seqs, PeerClient* peers,
             metrics::Registry* registry, ReplicatorOptions options);
  // Breaks every replication stream and waits until each write started by
  // StartWrite() has ended (a failed stream ends it at once).
  ~Replicator() override;
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  absl::Status Write(absl::string_view key, absl::string_view entry,
                     absl::FunctionRef<absl::Status()> publish) override;
  // Write() as a chain of callbacks (replicator_async.cc), for the common
  // case only: this node serves the key's shard, which has in-sync backups
  // and nothing else going on (no syncing replica, migration, reconcile,
  // unsettled key, former primary's hold, armed failpoint) and whose
  // barrier and key stripe are free. Then the seq is taken and the write
  // queued here on the shard's stream to each backup, or on the backup's
  // RDMA link where one is up (RdmaReplicaLink::Start), and the backups'
  // answers finish it: publish and `done` on the thread of the last answer
  // (the stream's reader, the link's sender) when every backup installed
  // it; anything else (a backup failed or is behind, a link failed, the
  // node was fenced meanwhile) on a worker of the replicator's, as Write()
  // would have gone on (a failed link is dropped and the write sent again
  // on the stream, marked resent). Otherwise false, nothing done: call
  // Write().
  bool StartWrite(absl::string_view key, const layout::KeyHash& key_hash, absl::string_view entry,
                  Publish publish, Done done) override;
  // True when this node serves writes of `key`'s slot under its current map.
  bool MayWrite(absl::string_view key) override;
  // True unless the key's shard has no backup, no syncing replica and no
  // migration under way (R=1), or the write would be refused at once.
  bool WaitsForPeers(absl::string_view key) override;

  // The stripe lock of `key`: SyncShard holds it while it copies the key's
  // entry, so the copy is never taken between a write's forward and its
  // publish.
  HandoffMutex& StripeOf(absl::string_view key);

  // The primary's checks before streaming shard `shard_id` to `node_id`:
  // this node is the shard's primary (and this process the incarnation the
  // map names: a restarted one holds none of the shard, kClusterDown; so
  // for PromoteSyncing), its map lists `node_id` as syncing,
  // and `shard_epoch` is the map's (older: a kStaleShardEpoch refusal;
  // newer: kMapBehind). Waits out the writes in flight, forgets the
  // node's broken mark (the copy about to start is newer than the write it
  // missed) and returns the shard's seq as the snapshot seq.
  absl::StatusOr<uint64_t> BeginSync(uint32_t shard_id, absl::string_view node_id,
                                     uint64_t shard_epoch);
  // ReportInSync on the primary: kFailedPrecondition unless `node_id` (of
  // `incarnation`, 0: any) is syncing in this node's map of the shard it
  // leads and missed no write since its copy began (at `shard_epoch`);
  // then ShardMapEditor::MarkInSync, with the shard's writes paused, which
  // checks incarnation and epoch again on the newest map.
  absl::Status PromoteSyncing(uint32_t shard_id, absl::string_view node_id, uint64_t incarnation,
                              uint64_t shard_epoch);

  // Waits until no write of shard `shard_id` routed before this call is in
  // flight (takes the shard's barrier exclusively, once). The migration
  // driver calls it before copying (writes routed on a map without the
  // migration were not forwarded) and before the handoff.
  void DrainShard(uint32_t shard_id);

  // The target primary's half of an imported write (SlotImporter): under
  // the shard barrier (reader) and the key's stripe lock — both already
  // held when `locks_held` (the same-node forward) — checks this node leads
  // `target_shard` (else kFailedPrecondition), waits for the promotion gate
  // (until its deadline, then kTryAgain), runs `admit` (an error fails
  // the call; false: skip the key, return OK), takes the target shard's
  // seq, replicates the write (`entry` empty: a delete) to the shard's
  // in-sync backups and syncing replicas as Write() does, then runs
  // `install`. A replica whose map is newer: a kMapBehind refusal. Errors
  // after a replica may hold the write have Effect::kUnknown.
  absl::Status ImportWrite(uint32_t target_shard, absl::string_view key, absl::string_view entry,
                           absl::FunctionRef<absl::StatusOr<bool>()> admit,
                           absl::FunctionRef<absl::Status()> install, bool locks_held);

  // The same-node forward: called with the write's ImportWriteRequest while
  // the source holds the target shard's barrier and the key's stripe lock.
  // Set once, before the node joins a cluster (not synchronised).
  using LocalImport = std::function<absl::Status(const v1::ImportWriteRequest&)>;
  void set_local_import(LocalImport fn) { local_import_ = std::move(fn); }

  // RDMA links to backups (null, the default: every Replicate goes by
  // gRPC). Where a link is up, step 3 sends the write to that backup as an
  // RDMA WRITE + replica commit instead, on the writing thread while the
  // gRPC calls to the other targets are in flight; a link that fails is
  // dropped and the write goes to that backup by gRPC within the same
  // deadline. Not owned; outlives the replicator. Set once, before the
  // node joins a cluster (not synchronised).
  void set_rdma_links(RdmaReplicaLinks* links) { rdma_links_ = links; }

  // The store this replicator is the write hook of, which unsettled keys
  // are read from (null, the default: no key is ever repaired). Set once,
  // before the node joins a cluster (not synchronised).
  void set_store(const KvStore* store) {
    store_ = store;
    streams_.set_store(store);
  }

  // The event loops that read the replication streams' replies
  // (ReplicationStreams::set_reply_watcher); null before `watcher` goes.
  void set_reply_watcher(net::FdWatcher* watcher) { streams_.set_reply_watcher(watcher); }

  // Which shards wait for their backups to be reconciled (see the file
  // comment); ShardReconciler enables and releases it.
  PromotionGate& promotion_gate() { return gate_; }

  // Repairs the unsettled keys of every shard this node leads and serves,
  // as the shard's next write would (see the file comment), so that the
  // replicas converge without one; forgets those of shards it no longer
  // leads (their new primary reconciles). ShardReconciler calls it between
  // writes. A repair that fails is tried again on the next call.
  void SettleIdle();

  // ShardReconciler could not reconcile in-sync backup `node` of shard
  // `shard_id`: drops it from the in-sync set as a backup that failed a
  // write would be. kFailedPrecondition unless this node leads the shard;
  // kClusterDown when the in-sync set may not shrink below the floor; the
  // editor's errors.
  absl::Status DropUnreconciled(uint32_t shard_id, const v1::ClusterNode& node);

 private:
  // One backup or syncing replica a round sends the write to.
  struct Target {
    const v1::ClusterNode* node = nullptr;
    bool in_sync = false;  // an in-sync backup (else a syncing replica)
    absl::Status status;
    // Its RDMA link failed with this write: sent again marked resent_after_rdma.
    bool rdma_failed = false;
    // Whether this target may hold the write: it was sent to it, and its
    // answer is not a refusal that certainly had no effect (OK, a timeout or
    // a broken connection all may). After a failed RDMA link the answer is
    // the gRPC resend's, but the link's commit may have been installed
    // anyway (only its ack was lost).
    bool MayHold() const {
      return node != nullptr && (rdma_failed || !cluster::CertainlyNoEffect(status));
    }
  };
  // A write's targets: inline for up to two (R=3), so a replicated write's
  // round allocates no vector for them.
  using Targets = absl::InlinedVector<Target, 2>;
  // What one attempt's replication round and migration forward came to.
  struct Round {
    absl::Status replicated;
    bool stale = false;  // a replica answered kStaleShardEpoch
    // A backup, syncing replica or the migration target may hold the write.
    bool held = false;
    absl::Status imported;  // the migration forward's (OK without one)
  };
  // Steps 3-4 for one write of `shard`: takes its next seq, forwards to its
  // backups and syncing replicas, drops the failed ones. *stale: a replica
  // answered kStaleShardEpoch (returned as the status, nothing handled).
  // *held: some target may hold the write (Target::MayHold); only set.
  // `repair`: the round re-sends this node's state of an unsettled key,
  // marked so that backups drop any older delivery of the key arriving
  // after it (ReplicateRequest.resent_after_rdma).
  absl::Status ReplicateRound(const cluster::ClusterMapView& map, const v1::Shard& shard,
                              absl::string_view key, absl::string_view entry, absl::Time deadline,
                              bool* stale, bool* held, bool repair = false);
  // ImportWrite `req` to `node`, started before `meanwhile` runs and
  // awaited after it; a kMapBehind answer is retried until `deadline`.
  absl::Status ForwardImport(const v1::ImportWriteRequest& req, const v1::ClusterNode& node,
                             absl::Time deadline, absl::FunctionRef<void()> meanwhile);
  // The forward of a write of a COPYING slot; see the file comment.
  absl::Status ForwardToTarget(const cluster::ClusterMapView& map, const v1::Migration& migration,
                               const v1::ClusterNode& target, absl::string_view key,
                               absl::string_view entry, absl::Time deadline,
                               absl::FunctionRef<void()> meanwhile);
  // Write() from attempt `first_attempt`, `sent_on` as an earlier attempt
  // left it (a started write that must route again).
  absl::Status WriteFrom(absl::string_view key, absl::string_view entry,
                         absl::FunctionRef<absl::Status()> publish, absl::Time deadline,
                         int first_attempt, bool sent_on);
  // What a write that ended with `s` answers its client (see Effect in the
  // file comment).
  static absl::Status WriteOutcome(absl::Status s, bool sent_on, bool published);
  static bool MapBehind(const absl::Status& s);
  // The in-sync floor on `map`: the configured one, capped by R.
  int FloorOf(const cluster::ClusterMapView& map) const;
  // The in-sync backups, then the syncing replicas, of `shard`.
  static Targets TargetsOf(const cluster::ClusterMapView& map, const v1::Shard& shard);
  // The Replicate of a write of `shard` (seq unset: Forward() takes it).
  v1::ReplicateRequest MakeRequest(const cluster::ClusterMapView& map, const v1::Shard& shard,
                                   absl::string_view key, absl::string_view entry, bool repair);
  // MakeRequest() as views (of `key`, `entry` and this node's id), for
  // ReplicationStream::SendWrite; seq unset.
  ReplicateWrite WriteOf(const cluster::ClusterMapView& map, const v1::Shard& shard,
                         absl::string_view key, absl::string_view entry, bool repair) const;
  // The same with this node's incarnation in the map given (0 if absent).
  ReplicateWrite WriteOf(const v1::Shard& shard, uint64_t self_incarnation, absl::string_view key,
                         absl::string_view entry, bool repair) const;
  // TargetsOf(*map, shard) and this node's incarnation in *map, as
  // StartWrite() needs them for every write: remembered per thread for the
  // last (map, shard) asked, since looking nodes up by id cost about 600
  // instructions each. The memo holds `map`, so an equal pointer is the
  // same (immutable) map, and a new map is looked up afresh. *remembered:
  // the memo's ReplicationStreams::GetRemembered() places, one per target,
  // valid until this thread's next call.
  static const Targets& TargetsAndSelf(const std::shared_ptr<const cluster::ClusterMapView>& map,
                                       const v1::Shard& shard, absl::string_view self,
                                       uint64_t* self_incarnation,
                                       ReplicationStreams::Remembered** remembered);
  // Step 4 once every target answered: ReplicateRound()'s end.
  absl::Status AfterForward(const cluster::ClusterMapView& map, const v1::Shard& shard,
                            const Targets& targets, bool* stale, bool* held);
  // A write StartWrite() started (replicator_async.cc).
  struct AsyncRound;
  // A target of `round` answered; the last one finishes it.
  void RoundAnswered(AsyncRound* round);
  // Every target answered: publishes and answers on this thread when all
  // installed it, else hands the round to ConcludeSlow() on a worker.
  void FinishAsync(const std::shared_ptr<AsyncRound>& round);
  // The rest of Write() for a round that did not simply succeed.
  void ConcludeSlow(const std::shared_ptr<AsyncRound>& round);
  // Deadlines of StartWrite()'s writes: one watch per stream, not a timer
  // per write (a lock round trip and a map node each, on the RESP loop).
  // Arms `stream`'s watch at `deadline` unless one is armed already.
  void WatchStream(const std::shared_ptr<ReplicationStream>& stream, absl::Time deadline);
  // The watch fired: breaks the stream if its oldest unanswered write is
  // past its deadline (its round then ends the slow way), else re-arms at
  // that write's deadline, or stands down when nothing is pending.
  void StreamWatchFired(const std::weak_ptr<ReplicationStream>& weak);
  // Releases the round's locks, answers it and counts it ended.
  void EndRound(const std::shared_ptr<AsyncRound>& round, absl::Status status);
  // One routing and replication round of Write(); sets *again when a backup
  // answered kStaleShardEpoch (its map is newer) before `deadline`,
  // *sent_on when a target may hold the write (only ever sets it), and
  // *published when it called `publish` (the status is then the store's).
  absl::Status TryWrite(absl::string_view key, absl::string_view entry,
                        absl::FunctionRef<absl::Status()> publish, absl::Time deadline, int attempt,
                        bool* again, bool* sent_on, bool* published);
  // The end of a TryWrite() whose round `r` ran: again, refused, or
  // published (*published set).
  absl::Status Conclude(const Route& route, const v1::ClusterNode* target, const Round& r,
                        absl::Time deadline, bool* again, absl::FunctionRef<absl::Status()> publish,
                        bool* published);
  // Takes the write's seq (see SendOrder) and sends `req` to every target
  // in parallel: on the shard's replication stream to it, or by RDMA where
  // a link is up; retries a kMapBehind refusal until `deadline`. Fills each
  // target's status.
  void Forward(v1::ReplicateRequest& req, Targets& targets, absl::Time deadline);
  // Forward()'s rounds: the first takes the seq and sends to `pending`
  // (target indices); later ones resend to the targets still to retry
  // (`resent` to those whose RDMA link failed), until none is left.
  void ForwardRounds(v1::ReplicateRequest& req, v1::ReplicateRequest& resent, Targets& targets,
                     absl::Time deadline, std::vector<size_t> pending, bool first);
  // Forward()'s sends to the targets whose RDMA link is up (`links`: target
  // index and link); fills their status and appends to *retry the ones to
  // send again (kMapBehind, or a failed link: by gRPC then).
  void SendOverRdma(const v1::ReplicateRequest& req,
                    const std::vector<std::pair<size_t, std::shared_ptr<RdmaReplicaLink>>>& links,
                    Targets& targets, absl::Time deadline, std::vector<size_t>* retry);
  // Step 4 for the failed targets; an error fails the write. No in-sync
  // backup is dropped when the in-sync set would go below `floor`.
  absl::Status HandleFailures(const v1::Shard& shard, const Targets& targets, int floor);
  // HandleFailures' answer when the floor keeps a failed backup but no
  // target may hold the write: a refusal of no effect (kNotStored naming
  // the replica that could not store it, else kClusterDown).
  absl::Status NothingStored(const v1::Shard& shard, const Targets& targets, int floor);
  // What a write of `shard` (slot `slot`, routed on `map`) waits for before
  // it is sent anywhere: the promotion gate (until `deadline`), then the
  // repair of the shard's unsettled keys. A refusal of Effect::kNone.
  absl::Status Admit(const cluster::ClusterMapView& map, const v1::Shard& shard, uint32_t slot,
                     absl::Time deadline);
  // Sends this node's state of every unsettled key of `shard`; puts back
  // the ones not repaired and returns the round's error.
  absl::Status SettleKeys(const cluster::ClusterMapView& map, const v1::Shard& shard,
                          absl::Time deadline);
  // Records how a write of `key` ended: unsettled when a target may hold it
  // (`held`) and this node did not publish it, settled when it did.
  void NoteOutcome(uint32_t shard_id, absl::string_view key, bool held, bool published,
                   const absl::Status& status);
  // Sleeps until FormerPrimaries lets writes of `shard_id` be acknowledged.
  void HoldForFormerPrimary(uint32_t shard_id);
  HandoffSharedMutex& ShardBarrier(uint32_t shard_id);
  // Held while a write's seq is taken and the write queued on its streams,
  // so that every stream carries its shard's writes in seq order. One lock
  // serves several shards (only the order within a shard matters).
  absl::Mutex& SendOrder(uint32_t shard_id);
  bool Broken(uint32_t shard_id, absl::string_view node_id);

  ClusterState* const state_;
  ShardMapEditor* const editor_;
  ShardSeqs* const seqs_;
  PeerClient* const peers_;
  const ReplicatorOptions options_;
  std::unique_ptr<HandoffMutex[]> stripes_;
  static constexpr uint32_t kSendOrderLocks = 64;
  std::unique_ptr<absl::Mutex[]> send_order_;
  ReplicationStreams streams_;

  absl::Mutex barriers_mu_;
  absl::flat_hash_map<uint32_t, std::unique_ptr<HandoffSharedMutex>> barriers_
      ABSL_GUARDED_BY(barriers_mu_);
  absl::Mutex broken_mu_;
  absl::flat_hash_set<std::pair<uint32_t, std::string>> broken_ ABSL_GUARDED_BY(broken_mu_);
  LocalImport local_import_;
  RdmaReplicaLinks* rdma_links_ = nullptr;
  FormerPrimaries former_;
  PromotionGate gate_;
  const KvStore* store_ = nullptr;
  // Held across the repair of unsettled keys, so that no write of the shard
  // is acknowledged before an earlier write's repair ends.
  absl::Mutex settle_mu_ ABSL_ACQUIRED_BEFORE(unsettled_mu_);
  absl::Mutex unsettled_mu_;
  absl::flat_hash_map<uint32_t, absl::flat_hash_set<std::string>> unsettled_
      ABSL_GUARDED_BY(unsettled_mu_);
  std::atomic<size_t> unsettled_count_{0};  // keys in unsettled_: the fast path

  // StartWrite()'s: rounds not yet ended, their deadlines, and the workers
  // of their slow ends. The destructor's body ends every round first.
  // An atomic, not a count under rounds_mu_: two lock round trips per
  // write on the RESP loop otherwise. Only the destructor waits for zero
  // (under rounds_mu_); EndRound() takes the mutex only to count out the
  // last round, so the destructor sees zero once it has let go of it.
  absl::Mutex rounds_mu_;
  std::atomic<size_t> rounds_in_flight_{0};
  WorkerPool slow_ends_{64};
  DeadlineTimer deadlines_;

  metrics::Counter* writes_;
  metrics::Counter* started_writes_;
  metrics::Counter* slow_ended_;
  metrics::Counter* backup_failures_;
  metrics::Counter* isr_shrinks_;
  metrics::Counter* syncing_broken_;
  metrics::Counter* refused_;
  metrics::Histogram* latency_;
  metrics::Counter* forwarded_;
  metrics::Counter* forward_failures_;
  metrics::Counter* imported_;
  metrics::Counter* former_primary_holds_;
  metrics::Counter* repairs_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICATOR_H_
