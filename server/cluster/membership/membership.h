// Copyright 2026 The kvstore Authors.
//
// Membership: this kvserver's presence in the cluster (architecture §19.2,
// §19.5) and its view of the cluster map.
//
//  * Registers /kvstore/<cluster>/members/<node_id> (a ClusterNode in JSON)
//    under a fresh etcd lease of `ttl`; the lease id is the incarnation.
//    Only where no key is: while an earlier incarnation's key is there
//    (its process may still be alive), Start() waits for it to go, up to
//    3 x ttl, then fails with kFailedPrecondition.
//  * A keepalive thread renews the lease every ttl/3, and tries again
//    after 200 ms when etcd did not answer (the client has moved on to its
//    next endpoint). It notes the steady
//    clock (MembershipOptions::clock) just before each KeepAliveOnce. After
//    the keepalive it proves, in one etcd txn, that the member key is still
//    under its lease and reads the map; a map newer than the applied one is
//    installed from that read. Only then does the renewal move the lease
//    deadline to the noted moment + ttl - fence_margin (ClusterState) and
//    the fence page's valid_until with it, and unfence a fenced node. A
//    node whose key is gone or held by another lease, or that cannot apply
//    the newest map, fences at once: a lease alone proves that nobody
//    replaced the node by expiry, not that no map deposed it.
//  * valid_until is wall time (readers compare it with their clocks), but
//    reckoned from the previous renewal's wall time plus the steady time
//    elapsed: a step of this host's wall clock forward never lengthens it.
//  * A watchdog fences the node when the deadline passes without renewal:
//    ClusterState::set_fenced(true), FencePage::Fence(), then on_fence.
//  * A renewal answered "not found" means the lease expired: the node has
//    been or will be replaced. It fences, logs one line and calls
//    on_lease_lost (default: _exit(3)); the keepalive then stops. Any other
//    etcd call made under the lease that etcd answers "lease not found"
//    (the controller's campaign, a republish) reports the same through
//    LeaseGone(): the keepalive may be the last to hear (its calls stuck on
//    an etcd member that is down), and the controller counts a node dead
//    one TTL after its key went, registered again or not. Either way
//    on_lease_lost runs once per Membership. A
//    kvserver (ClusterNode) does not exit: it keeps its memory, shuts this
//    Membership down and starts a new one for the same process, which
//    registers under a new lease (a new incarnation) with the shard copies
//    it still holds (§19.6).
//  * Registering: a new Membership starts fenced if the ClusterState is
//    (a lease lapse fenced it) and unfences once its lease is granted; if
//    the installed map names an earlier incarnation of this node, the fence
//    page gets epoch 0 first, so one-sided readers refuse this process's
//    data until a map gives it a role again.
//  * A map thread reads the map key and watches it; each newer valid map is
//    installed with ClusterState::Update. The watch carries etcd's
//    require-leader flag; the thread asks it for a progress notice every
//    ttl/6 and watches again (after a fresh read) when it stays silent for
//    ttl/3 or when the etcd client moved to another endpoint. After any
//    installed map (from here or from MapStore) the fence page gets its
//    epoch and the member key is rewritten with applied_map_epoch by the
//    keepalive thread (never over another incarnation's key).
//  * Shutdown() fences, stops the threads and revokes the lease, so etcd
//    deletes the member key at once (the controller still waits one TTL
//    before it replaces the node: departures.h).
//
// Every timed wait (keepalive period, watchdog deadline, retry delay) is on
// MembershipOptions::clock, so a test's ManualClock decides when each fires.
//
// Thread safety: Start/Shutdown from one thread; the accessors from any.
// Callbacks run on Membership's threads and must not call Shutdown().

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_MEMBERSHIP_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/routing/cluster_state.h"
#include "server/routing/fence_page.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {

struct MembershipOptions {
  std::string cluster_name = "kvstore";
  // node_id, addresses and process_id; incarnation, applied_map_epoch and
  // copies are filled in.
  v1::ClusterNode self;
  // The shard copies this process holds, published in the member key when
  // it registers (ClusterNode::Start: none; after a lease lapse: the
  // shards it was in sync for). Empty: none.
  std::function<std::vector<v1::ShardCopy>()> copies;
  absl::Duration ttl = absl::Seconds(3);
  absl::Duration fence_margin = absl::Milliseconds(500);
  // After the node fenced itself (the RDMA service moves client queue pairs
  // to the error state). May be empty.
  std::function<void()> on_fence;
  // After a renewal ended a fence (the RDMA service accepts queue pairs
  // again). May be empty.
  std::function<void()> on_unfence;
  // After a keepalive answered "lease not found". Empty: log and _exit(3).
  std::function<void()> on_lease_lost;
  // The clock of every deadline and wait; nullptr: the real one. Must be
  // the ClusterState's (its Serving() reads the deadline set here) and
  // outlive the Membership.
  const Clock* clock = nullptr;
};

class Membership {
 public:
  // Grants the lease, writes the member key, reads the map (installing it
  // when there is one) and starts the threads. kUnavailable when etcd does
  // not answer; kInvalidArgument for a ttl under 1s or a margin >= ttl.
  // `etcd`, `state` and `fence` must outlive the Membership.
  static absl::StatusOr<std::unique_ptr<Membership>> Start(etcd::EtcdClient* etcd,
                                                           ClusterState* state, FencePage* fence,
                                                           MembershipOptions options);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Fences, stops the threads and revokes the lease (an error revoking is
  // logged: the lease then expires after its TTL). Idempotent.
  void Shutdown();

  // etcd answered `who`'s call made under this lease "lease not found":
  // the lease expired or was revoked. Fences and calls on_lease_lost, as a
  // keepalive answered so would, unless that already happened or Shutdown()
  // began. Any thread but one Shutdown() joins while it waits (the
  // callback runs on the caller's thread).
  void LeaseGone(absl::string_view who);

  // The lease id = incarnation.
  int64_t lease() const { return lease_; }
  const std::string& node_id() const { return options_.self.node_id(); }
  const std::string& member_key() const { return member_key_; }
  // Keepalives that succeeded so far (for tests and metrics).
  uint64_t renewals() const;

 private:
  Membership(etcd::EtcdClient* etcd, ClusterState* state, FencePage* fence,
             MembershipOptions options);
  absl::Status Register();
  // The keepalive loop, the fence watchdog and the map watch loop.
  void KeepAliveLoop();
  void WatchdogLoop();
  void MapLoop(int64_t revision);
  // Waits while `watch` works: until it breaks, stays silent for ttl/3
  // (asking it for progress every ttl/6), or etcd calls moved to another
  // endpoint than the `endpoint`th (EtcdClient::endpoint_changes()), or
  // Shutdown().
  void AwaitWatchEnd(etcd::WatchHandle* watch, uint64_t endpoint);
  // ClusterState listener: the fence page's epoch, and a republish.
  void MapInstalled(const cluster::ClusterMapView& view);
  // One renewal: etcd answered (the lease is alive), did not answer, or
  // the lease is lost (the loop must end).
  enum class Renewal { kAnswered, kNoAnswer, kLost };
  Renewal RenewOnce();
  // Renewed up to `sent` (on clock_.Steady()): deadline, fence page, unfence.
  void Renewed(absl::Duration sent, absl::Duration granted);
  void FenceNow(const char* why);
  // Rewrites the member key with the current applied_map_epoch, by a txn
  // that never overwrites another incarnation's key (it may create the key
  // again under our lease when it is gone).
  void Republish();
  // After a keepalive: a txn that checks our member key is still under our
  // lease and reads the map; a newer map than ours is installed from it.
  // OK: we hold the newest map. kNotFound: our key is gone;
  // kFailedPrecondition: another lease holds it, or the newest map cannot
  // be applied; kUnavailable: etcd did not answer.
  absl::Status ProveMapCurrent();
  // The fence page's valid_until for a lease deadline on the steady clock:
  // the wall time of the previous renewal carried forward by the steady
  // time since, or the wall clock when it is behind that.
  uint64_t ValidUntilMs(absl::Duration deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the map key; installs a newer map; sets *revision for the watch.
  absl::Status ReadMap(int64_t* revision);
  void InstallMapJson(const std::string& json);
  // Sleeps up to `d` unless stopping; returns false when stopping.
  bool Sleep(absl::Duration d);

  etcd::EtcdClient* const etcd_;
  ClusterState* const state_;
  FencePage* const fence_;
  MembershipOptions options_;
  const Clock& clock_;
  const std::string member_key_;
  const std::string map_key_;
  int64_t lease_ = 0;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;
  bool lease_lost_ ABSL_GUARDED_BY(mu_) = false;
  bool republish_ ABSL_GUARDED_BY(mu_) = false;
  bool watch_broken_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration deadline_ ABSL_GUARDED_BY(mu_);  // on clock_.Steady()
  // The fence page's wall reckoning: a wall time and the steady time it
  // was taken at (ValidUntilMs()).
  absl::Time wall_anchor_ ABSL_GUARDED_BY(mu_);
  absl::Duration steady_anchor_ ABSL_GUARDED_BY(mu_);
  // The map watch delivered something (events or a progress notice).
  bool heard_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t renewals_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t applied_epoch_ ABSL_GUARDED_BY(mu_) = 0;

  // The ClusterState listener reaches us through this link, cut in
  // Shutdown(): the state outlives the Membership.
  struct ListenerLink {
    absl::Mutex mu;
    Membership* target ABSL_GUARDED_BY(mu) = nullptr;
  };
  const std::shared_ptr<ListenerLink> listener_;

  std::thread keepalive_;
  std::thread watchdog_;
  std::thread map_thread_;
  bool shut_down_ = false;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_MEMBERSHIP_H_
