// Copyright 2026 The kvstore Authors.
//
// Controller: the one kvserver (elected through etcd) that writes the
// cluster map's membership changes (architecture §19.2, §19.4): the first
// map, failing over a dead primary, removing dead nodes, filling shards
// below R from live nodes (new, restarted or already serving), manual
// failovers and draining a node (remove-node). Every kvserver in cluster mode runs
// one; all but the elected one only wait for the `controller` key to go.
//
// Election: a txn `create_revision(controller) == 0` -> put our node id
// under our member lease. The key's create_revision is our fencing token:
// every map write is a txn comparing `mod_revision(map)` with the revision
// read AND `create_revision(controller)` with the token, so a controller
// that was deposed (its lease expired, someone else elected) writes nothing.
// Followers campaign again when the key is deleted (lease expiry or a
// resigning controller).
//
// The decisions themselves are controller_plan.h. The controller is
// level-triggered: it re-reads the whole cluster prefix (one consistent
// read) on every watch event and every poll_interval, and writes at most one
// map change per step, so missed or broken watches cost latency, never
// correctness (after a watch error the read is the truth, and the watch
// restarts from its revision).
//
// Manual failover (Failover()) and the old primary: the map write makes the
// target replicas[0] and bumps the shard epoch. The old primary refuses
// writes for that shard as soon as it installs the new map, and a write
// already in flight on it fails when the new primary refuses its Replicate
// (stale shard epoch, not the primary in its map) — so the old primary
// cannot acknowledge it, and no acknowledged write is lost. The replicator
// (replicator.h) enforces that, not this class.
//
// Slot migrations (§19.9): Rebalance() queues them; starting the next one
// (PENDING -> COPYING) is an ordinary PlanNext step of the loop, and the
// source primary, not the controller, moves it on (HANDOFF, the flip).
//
// Thread safety: thread-safe. Start() runs one background thread; Failover(),
// RemoveNode(), AddNode() and Rebalance() may be called from any thread (the gRPC service). The
// AppliedSeqFn is called from the background thread and from Failover()'s caller.

#ifndef KVSTORE_SERVER_CLUSTER_CONTROLLER_CONTROLLER_H_
#define KVSTORE_SERVER_CLUSTER_CONTROLLER_CONTROLLER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/controller/controller_plan.h"
#include "server/cluster/controller/departures.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/cluster/peer/peer_client.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {

struct ControllerOptions {
  std::string cluster_name = "kvstore";
  std::string node_id;  // this kvserver's --node_id; the controller key's value
  // This kvserver's member lease (its incarnation): the controller key is
  // put under it, so the controller role dies with the node.
  int64_t lease = 0;
  uint32_t replicas = 2;   // R, for the first map
  uint32_t min_nodes = 2;  // members needed before the first map
  // Re-read etcd this often even without a watch event.
  absl::Duration poll_interval = absl::Seconds(1);
  // Try again this soon after an error (etcd unreachable, a lost campaign
  // with an expired lease); at most poll_interval.
  absl::Duration retry_interval = absl::Milliseconds(250);
  // Asks a node which cluster map epoch it has applied (production:
  // MakeGrpcMapEpochFn). RemoveNode() takes a demoted primary out of its
  // shards only once it answers with the demoting map's epoch or later.
  // Empty: RemoveNode() stops after the demotion (the node stays a backup).
  MapEpochFn map_epoch;
  // How long RemoveNode() waits for that answer before giving up (the node
  // then stays a backup, marked draining; remove-node again finishes it).
  absl::Duration demote_confirm_timeout = absl::Seconds(5);
  // The member lease TTL (--member_ttl). A node counts as dead only this
  // long after the controller saw its member key go (Departures).
  absl::Duration member_ttl = absl::Seconds(3);
  // Called (on the controller's thread) when etcd answers a call made
  // under `lease` "lease not found": the lease is gone, and the node may
  // hear it here before its keepalive does (Membership::LeaseGone). Must
  // not stop this controller. May be empty.
  std::function<void()> on_lease_gone;
  // The clock of the poll, the retry and the demote wait; nullptr: the real
  // one. Tests pass a ManualClock. Must outlive the controller.
  const Clock* clock = nullptr;
};

class Controller {
 public:
  // `etcd` must outlive the controller. `applied_seq` asks a node for its
  // applied seq of a shard (production: MakeGrpcAppliedSeqFn below).
  Controller(etcd::EtcdClient* etcd, ControllerOptions options, AppliedSeqFn applied_seq);
  // Stop()s.
  ~Controller();

  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the background thread (campaign, then reconcile). Once only.
  void Start();
  // Stops the thread and resigns: deletes the controller key if it still is
  // ours (by txn on the token). Idempotent.
  void Stop();

  // One synchronous round without the thread: read, campaign if there is
  // no controller, and as the controller write map changes until the map
  // needs none (at most a few). For tests and tools that want determinism;
  // do not mix with Start(). Errors: etcd's.
  absl::Status RunOnce();

  // Whether this node held the controller key at its last look.
  bool IsLeader() const { return is_leader_.load(); }
  // The controller's node id at the last look ("" when none).
  std::string ControllerId() const;

  // Manual failover of `shard_id` to `target` (empty: the alive in-sync
  // backup with the highest applied seq); returns the map written.
  // Errors: kFailedPrecondition "not the controller; the controller is <id>"
  // on any other node (the gRPC layer forwards there), and those of
  // PlanFailover(); kUnavailable when there is no controller or etcd does not
  // answer; kAborted when the map kept changing under us.
  absl::StatusOr<v1::ClusterMap> Failover(uint32_t shard_id, const std::string& target);

  // Drains `node_id` before an operator stops it (PlanRemoveNode): the
  // shards it leads move to their newest in-sync backup while it stays
  // their last backup and is marked draining (first map write); once it
  // reports, through options.map_epoch, that it applied that map (so its
  // fence page sends one-sided readers of the older map away), it leaves
  // every shard (second write). Returns the last map written. The
  // background loop then refills the shards it left (separate map changes;
  // with RunOnce() the next RunOnce()). Errors: as Failover(), and those of
  // PlanRemoveNode() (kFailedPrecondition when a shard would be left
  // without an in-sync replica; nothing is written then); kDeadlineExceeded
  // when the node did not confirm within demote_confirm_timeout (the first
  // write stands: it is a draining backup; remove-node again finishes).
  absl::StatusOr<v1::ClusterMap> RemoveNode(const std::string& node_id);

  // add-node (PlanAddNode): a new, empty shard led by `node_id`; returns
  // the map written and the new shard's id. Errors: as Failover(), and
  // those of PlanAddNode() (kNotFound, kFailedPrecondition).
  absl::StatusOr<v1::AddNodeResponse> AddNode(const std::string& node_id);

  // rebalance (PlanRebalance): appends the planned migrations as PENDING
  // in one map write and returns that map and the plan; the background
  // loop then starts them one at a time (PlanNext). `dry_run`, or nothing
  // to move: nothing is written and the map returned is the current one.
  // Errors: as Failover(), and those of PlanRebalance()
  // (kFailedPrecondition while migrations are queued or running, or a
  // shard is down).
  absl::StatusOr<v1::RebalanceResponse> Rebalance(bool dry_run);

  // accept-loss (PlanAcceptLoss): down shard `shard_id` gets an empty
  // primary; returns the map written and that primary. Errors: as
  // Failover(), and those of PlanAcceptLoss() (kNotFound,
  // kFailedPrecondition when the shard is not down).
  absl::StatusOr<v1::AcceptLossResponse> AcceptLoss(uint32_t shard_id);

 private:
  struct Snapshot {
    int64_t revision = 0;
    std::optional<etcd::KeyValue> controller;
    std::optional<etcd::KeyValue> map;
    MemberSet members;
  };

  void Loop();
  // One step: read, campaign or reconcile. Sets *wrote when it wrote
  // something (the caller steps again at once). `watch`: (re)start the
  // watch from the read's revision.
  absl::Status Step(bool* wrote, bool watch);
  absl::StatusOr<Snapshot> Read();
  // Updates is_leader_/token_ from the snapshot's controller key.
  void Observe(const Snapshot& snap);
  absl::StatusOr<bool> Campaign();
  // As the controller: one map change if the map needs one.
  absl::Status Reconcile(const Snapshot& snap, bool* wrote);
  // The fenced map write. kFailedPrecondition when we are no longer the
  // controller (is_leader_ cleared), kAborted when the map changed since
  // `read_revision`.
  absl::Status WriteMap(v1::ClusterMap map, int64_t read_revision);
  absl::Status EnsureWatch(int64_t revision);
  void Resign();
  void Wake();
  absl::Status NotControllerError();
  // Waits until `node_id` answers options_.map_epoch with map.epoch() or
  // later, or its member key is gone; kDeadlineExceeded after
  // demote_confirm_timeout, kFailedPrecondition when it cannot be asked.
  absl::Status AwaitMapApplied(const v1::ClusterMap& map, const std::string& node_id);
  // Failover()/RemoveNode(): read, plan, fenced write, retried when the map
  // changed under us. A plan returning the current epoch writes nothing.
  absl::StatusOr<v1::ClusterMap> WritePlanned(
      const std::string& what,
      const std::function<absl::StatusOr<v1::ClusterMap>(const v1::ClusterMap&, const MemberSet&)>&
          plan);

  etcd::EtcdClient* const etcd_;
  const ControllerOptions options_;
  const Clock& clock_;
  const AppliedSeqFn applied_seq_;
  const std::string controller_key_;
  const std::string map_key_;

  // When each departed node may be planned as dead.
  Departures departures_;

  std::atomic<bool> is_leader_{false};
  std::atomic<int64_t> token_{0};  // create_revision of our controller key
  // Serialises map writes of the loop and Failover() in this process
  // (etcd's compares already keep them correct; this saves aborted txns).
  absl::Mutex write_mu_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool watch_broken_ ABSL_GUARDED_BY(mu_) = false;
  std::string controller_id_ ABSL_GUARDED_BY(mu_);

  // Owned by the loop thread (and Stop() after joining it).
  std::unique_ptr<etcd::WatchHandle> watch_;
  std::thread thread_;
  bool started_ = false;
};

// The production AppliedSeqFn: kvstore.v1.KvCluster/ReplicaStatus on the
// node, through `peers` (its channels, credentials and token), with
// `deadline`. A node that reports itself fenced is an error (kUnavailable):
// it may be about to lose its lease. Thread-safe.
struct GrpcAppliedSeqOptions {
  absl::Duration deadline = absl::Milliseconds(500);
  PeerClient* peers = nullptr;  // required; not owned, outlives the function
};
AppliedSeqFn MakeGrpcAppliedSeqFn(GrpcAppliedSeqOptions options);

// The production MapEpochFn: ReplicaStatus like MakeGrpcAppliedSeqFn (the
// same options), answering its map_epoch; a fenced node answers too (its
// fence page already refuses readers). Thread-safe.
MapEpochFn MakeGrpcMapEpochFn(GrpcAppliedSeqOptions options);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_CONTROLLER_CONTROLLER_H_
