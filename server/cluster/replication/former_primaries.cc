// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/former_primaries.h"

#include <utility>

namespace kvstore {
namespace server {

FormerPrimaries::FormerPrimaries(std::string self, absl::Duration lease_ttl)
    : self_(std::move(self)), lease_ttl_(lease_ttl) {}

void FormerPrimaries::Observe(const cluster::ClusterMapView& map) {
  if (map.epoch() <= seen_epoch_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (map.epoch() <= seen_epoch_.load(std::memory_order_relaxed)) return;
  const bool first = seen_epoch_.load(std::memory_order_relaxed) == 0;
  std::map<uint32_t, v1::ClusterNode> primaries;
  for (const v1::Shard& shard : map.proto().shards()) {
    const v1::ClusterNode* primary = map.Primary(shard);
    if (primary == nullptr) continue;
    primaries[shard.shard_id()] = *primary;
    if (primary->node_id() != self_) {
      former_.erase(shard.shard_id());
      continue;
    }
    auto before = primaries_.find(shard.shard_id());
    if (first || before == primaries_.end() || before->second.node_id() == self_) continue;
    // This node took over the shard from a node that may still serve
    // one-sided readers of the older map.
    Former f;
    f.node_id = before->second.node_id();
    f.incarnation = before->second.incarnation();
    former_[shard.shard_id()] = std::move(f);
  }
  for (auto it = former_.begin(); it != former_.end();) {
    it = primaries.count(it->first) > 0 ? std::next(it) : former_.erase(it);
  }
  primaries_ = std::move(primaries);
  // Holds that are over cost every write a lock: stop looking at them.
  bool held = false;
  const absl::Time now = absl::Now();
  for (const auto& [id, f] : former_) held |= f.hold_until > now;
  any_hold_.store(held, std::memory_order_release);
  seen_epoch_.store(map.epoch(), std::memory_order_release);
}

void FormerPrimaries::Dropped(uint32_t shard_id, const v1::ClusterNode& node) {
  absl::MutexLock lock(&mu_);
  auto it = former_.find(shard_id);
  if (it == former_.end() || it->second.node_id != node.node_id() ||
      it->second.incarnation != node.incarnation()) {
    return;
  }
  if (it->second.hold_until == absl::InfinitePast()) {
    it->second.hold_until = absl::Now() + lease_ttl_;
    any_hold_.store(true, std::memory_order_release);
  }
}

absl::Time FormerPrimaries::HoldUntil(uint32_t shard_id) const {
  if (!any_hold_.load(std::memory_order_acquire)) return absl::InfinitePast();
  absl::MutexLock lock(&mu_);
  auto it = former_.find(shard_id);
  return it == former_.end() ? absl::InfinitePast() : it->second.hold_until;
}

}  // namespace server
}  // namespace kvstore
