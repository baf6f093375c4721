// Copyright 2026 The kvstore Authors.
//
// FormerPrimaries: the primary's memory of who led each of its shards
// before it (architecture §19.7, "a demoted primary that freezes").
//
// A manual failover or remove-node keeps the old primary P as an in-sync
// backup. Until P applies the new map its fence page names the old epoch,
// so one-sided readers that still hold the old map accept P's data; that
// is safe while P receives every acknowledged write. If P freezes before
// applying the map, the new primary drops it after a replication timeout,
// and from then on acknowledges writes P does not have, while P's fence
// page still says "valid" until the end of its lease (at most one lease
// TTL after P's last renewal, which came before the drop). So once P is
// dropped, writes of that shard are held for one lease TTL: after that,
// P's fence page has expired (or P applied the new map) and no reader can
// accept P's data any more. A primary that failed over because its lease
// expired never reaches this: it is not in the new map at all.
//
// Every primary of the last lease TTL counts, not only the previous one:
// after two failovers within one TTL (P -> Q -> R), P may be the one frozen
// with the oldest map. Times are on the steady clock (Clock::Steady()), so a
// step of the wall clock neither shortens nor lengthens a hold.
//
// Thread safety: thread-safe. Observe() and AwaitHold() are one atomic
// load when nothing changed / nothing is held.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_FORMER_PRIMARIES_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_FORMER_PRIMARIES_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster/cluster_map.h"
#include "proto/kv_cluster.pb.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {

class FormerPrimaries {
 public:
  // `self`: this node's id. `lease_ttl`: the member lease TTL (--member_ttl),
  // the longest a fence page can stay valid after its node's last renewal.
  // `clock` (nullptr: the real one) must outlive this.
  FormerPrimaries(std::string self, absl::Duration lease_ttl, const Clock* clock = nullptr);

  // Every write calls it with the map it routes on; maps older than or
  // equal to the newest seen are ignored. For each shard whose primary
  // changed since the previously seen map, remembers the one replaced (id
  // and incarnation) for one lease TTL from now; forgets shards gone from
  // the map.
  void Observe(const cluster::ClusterMapView& map);

  // `node` was just dropped from shard `shard_id`'s in-sync set by this
  // node. When this node leads the shard and `node` (same incarnation) led
  // it within the last lease TTL, writes of the shard are held until now +
  // lease TTL (the first drop of that node sets it).
  void Dropped(uint32_t shard_id, const v1::ClusterNode& node);

  // The moment on the clock's Steady() before which writes of `shard_id`
  // must not be acknowledged (-InfiniteDuration when nothing is held).
  absl::Duration HoldUntil(uint32_t shard_id) const;
  // Waits (on the clock) until HoldUntil(shard_id); returns whether it
  // waited at all.
  bool AwaitHold(uint32_t shard_id) const;
  // Whether AwaitHold(shard_id) would wait now; never waits.
  bool Holds(uint32_t shard_id) const;

 private:
  struct Former {
    std::string node_id;
    uint64_t incarnation = 0;
    absl::Duration replaced_at;  // when this node saw it replaced
    absl::Duration hold_until = -absl::InfiniteDuration();
  };

  const std::string self_;
  const absl::Duration lease_ttl_;
  const Clock& clock_;
  std::atomic<uint64_t> seen_epoch_{0};
  std::atomic<bool> any_hold_{false};
  mutable absl::Mutex mu_;
  // Primary id and incarnation of every shard in the newest map seen.
  std::map<uint32_t, v1::ClusterNode> primaries_ ABSL_GUARDED_BY(mu_);
  // Per shard, the primaries replaced within the last lease TTL (or still
  // holding writes).
  std::map<uint32_t, std::vector<Former>> former_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_FORMER_PRIMARIES_H_
