// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/former_primaries.h"

#include <algorithm>
#include <utility>

namespace kvstore {
namespace server {

FormerPrimaries::FormerPrimaries(std::string self, absl::Duration lease_ttl, const Clock* clock)
    : self_(std::move(self)),
      lease_ttl_(lease_ttl),
      clock_(clock != nullptr ? *clock : Clock::Real()) {}

void FormerPrimaries::Observe(const cluster::ClusterMapView& map) {
  if (map.epoch() <= seen_epoch_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (map.epoch() <= seen_epoch_.load(std::memory_order_relaxed)) return;
  const bool first = seen_epoch_.load(std::memory_order_relaxed) == 0;
  const absl::Duration now = clock_.Steady();
  std::map<uint32_t, v1::ClusterNode> primaries;
  std::map<uint32_t, std::vector<Former>> former;
  for (const v1::Shard& shard : map.proto().shards()) {
    const uint32_t id = shard.shard_id();
    const v1::ClusterNode* primary = map.Primary(shard);
    if (primary != nullptr) primaries[id] = *primary;
    std::vector<Former> kept;
    if (auto it = former_.find(id); it != former_.end()) kept = std::move(it->second);
    // Forget those replaced more than a lease ago and no longer holding.
    kept.erase(std::remove_if(kept.begin(), kept.end(),
                              [&](const Former& f) {
                                return f.replaced_at + lease_ttl_ <= now && f.hold_until <= now;
                              }),
               kept.end());
    auto before = primaries_.find(id);
    const bool replaced = !first && before != primaries_.end() &&
                          (primary == nullptr || before->second.node_id() != primary->node_id() ||
                           before->second.incarnation() != primary->incarnation());
    if (replaced && before->second.node_id() != self_) {
      // It may still serve one-sided readers of an older map until its
      // lease deadline, at most one TTL from now.
      Former f;
      f.node_id = before->second.node_id();
      f.incarnation = before->second.incarnation();
      f.replaced_at = now;
      kept.push_back(std::move(f));
    }
    if (!kept.empty()) former[id] = std::move(kept);
  }
  former_ = std::move(former);
  primaries_ = std::move(primaries);
  // Holds that are over cost every write a lock: stop looking at them.
  bool held = false;
  for (const auto& [id, list] : former_) {
    for (const Former& f : list) held |= f.hold_until > now;
  }
  any_hold_.store(held, std::memory_order_release);
  seen_epoch_.store(map.epoch(), std::memory_order_release);
}

void FormerPrimaries::Dropped(uint32_t shard_id, const v1::ClusterNode& node) {
  absl::MutexLock lock(&mu_);
  auto primary = primaries_.find(shard_id);
  if (primary == primaries_.end() || primary->second.node_id() != self_) return;
  auto it = former_.find(shard_id);
  if (it == former_.end()) return;
  const absl::Duration now = clock_.Steady();
  for (Former& f : it->second) {
    if (f.node_id != node.node_id() || f.incarnation != node.incarnation()) continue;
    if (f.replaced_at + lease_ttl_ <= now) continue;  // its lease deadline has passed
    if (f.hold_until == -absl::InfiniteDuration()) {
      f.hold_until = now + lease_ttl_;
      any_hold_.store(true, std::memory_order_release);
    }
  }
}

absl::Duration FormerPrimaries::HoldUntil(uint32_t shard_id) const {
  if (!any_hold_.load(std::memory_order_acquire)) return -absl::InfiniteDuration();
  absl::MutexLock lock(&mu_);
  auto it = former_.find(shard_id);
  absl::Duration until = -absl::InfiniteDuration();
  if (it == former_.end()) return until;
  for (const Former& f : it->second) until = std::max(until, f.hold_until);
  return until;
}

bool FormerPrimaries::Holds(uint32_t shard_id) const {
  // No hold at all (the usual case, asked twice per replicated write): no
  // clock read either.
  const absl::Duration until = HoldUntil(shard_id);
  return until != -absl::InfiniteDuration() && until > clock_.Steady();
}

bool FormerPrimaries::AwaitHold(uint32_t shard_id) const {
  const absl::Duration until = HoldUntil(shard_id);
  const absl::Duration left = until - clock_.Steady();
  if (left <= absl::ZeroDuration()) return false;
  clock_.Sleep(left);
  return true;
}

}  // namespace server
}  // namespace kvstore
