// Copyright 2026 The kvstore Authors.
//
// Departures: the controller's rule for when a node counts as dead. A node
// the map names is dead for planning only one full member lease TTL after
// the controller first saw its member key gone, or held by another
// incarnation. Until then PlanNext sees it as alive, so no backup is
// promoted in its place and nothing is taken from it.
//
// Why: the node's own serving deadline comes from a renewal whose txn saw
// its key present, so that renewal was sent before the controller saw the
// key go, and the deadline is at most TTL - fence_margin after it. One TTL
// after the controller saw the key go, the node's deadline has passed
// whatever etcd did: an etcd that revoked the lease early (a stale leader
// revoking a lease a newer leader renewed), or a duplicate process of the
// node registered while the old one still runs. The lease is then the
// failure detector, and the wait the safety timer. It costs one TTL of
// failover time.
//
// A member key of a new incarnation of the same process (IsRejoin: it
// registered again after its lease lapsed, memory intact) is no departure:
// the node is not dead, PlanNext moves its roles to the new incarnation.
// A timer is bound to the incarnation it was started for and ends when the
// map's record of the node changes.
//
// Thread safety: thread-safe.

#ifndef KVSTORE_SERVER_CLUSTER_CONTROLLER_DEPARTURES_H_
#define KVSTORE_SERVER_CLUSTER_CONTROLLER_DEPARTURES_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/controller/controller_plan.h"

namespace kvstore {
namespace server {

class Departures {
 public:
  // `ttl`: the member lease TTL (--member_ttl).
  explicit Departures(absl::Duration ttl);

  // `members` for planning on `map` at `now` (a moment on a steady clock):
  // every node the map names that is not alive in it (IsAliveIn) and whose
  // departure was first seen less than one TTL before `now` is put back
  // with the map's record of it. Remembers when each departure was first
  // seen, and forgets it once the node is alive in the map again or no
  // longer named.
  MemberSet Settle(const v1::ClusterMap& map, const MemberSet& members, absl::Duration now);

  // When the earliest departure still held back at `now` becomes due
  // (InfiniteDuration when none): the controller looks again by then.
  absl::Duration NextDue(absl::Duration now) const;

 private:
  struct Seen {
    uint64_t incarnation = 0;  // the map's record of the departed node
    absl::Duration at;
  };

  const absl::Duration ttl_;
  mutable absl::Mutex mu_;
  std::map<std::string, Seen> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_CONTROLLER_DEPARTURES_H_
