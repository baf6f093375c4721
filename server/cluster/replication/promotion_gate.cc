// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/promotion_gate.h"

#include <utility>

namespace kvstore {
namespace server {

void PromotionGate::Enable() {
  absl::MutexLock lock(&mu_);
  enabled_ = true;
}

void PromotionGate::Observe(const cluster::ClusterMapView& map) {
  absl::MutexLock lock(&mu_);
  if (map.epoch() <= seen_epoch_) return;
  // The first map this process sees: it started empty (a process never
  // gets its memory back), so it leads only a shard that is new, and empty
  // everywhere, or that no in-sync replica survived (its copies join by a
  // full copy). Nothing to reconcile.
  const bool first = seen_epoch_ == 0;
  seen_epoch_ = map.epoch();
  absl::flat_hash_map<uint32_t, State> now;
  for (const v1::Shard* shard : map.ShardsLedBy(self_)) {
    auto it = leads_.find(shard->shard_id());
    if (it != leads_.end()) {
      now.emplace(shard->shard_id(), it->second);  // the same lead goes on
    } else {
      now.emplace(shard->shard_id(), State{map.epoch(), enabled_ && !first});
    }
  }
  leads_ = std::move(now);
  PublishLocked();
}

void PromotionGate::PublishLocked() {
  size_t waiting = 0;
  for (const auto& [id, state] : leads_) waiting += state.waiting ? 1 : 0;
  // The count first: a reader that sees the new epoch sees it too.
  waiting_.store(waiting, std::memory_order_release);
  seen_epoch_fast_.store(seen_epoch_, std::memory_order_release);
}

bool PromotionGate::ReadyLocked(uint32_t shard_id) const {
  auto it = leads_.find(shard_id);
  return it == leads_.end() || !it->second.waiting;
}

bool PromotionGate::Ready(const cluster::ClusterMapView& map, uint32_t shard_id) {
  // Nothing to observe and nothing waiting: the answer a lock would give at
  // this instant (a lead that starts waiting later is a later answer).
  if (map.epoch() <= seen_epoch_fast_.load(std::memory_order_acquire) &&
      waiting_.load(std::memory_order_acquire) == 0) {
    return true;
  }
  Observe(map);
  absl::MutexLock lock(&mu_);
  return ReadyLocked(shard_id);
}

bool PromotionGate::AwaitReady(const cluster::ClusterMapView& map, uint32_t shard_id,
                               absl::Time deadline) {
  Observe(map);
  struct Query {
    const PromotionGate* gate;
    uint32_t shard_id;
    static bool Ready(Query* q) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return q->gate->ReadyLocked(q->shard_id);
    }
  } query{this, shard_id};
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&Query::Ready, &query), deadline);
}

bool PromotionGate::AnyWaiting() const {
  for (const auto& [id, state] : leads_) {
    if (state.waiting) return true;
  }
  return false;
}

std::vector<PromotionGate::Lead> PromotionGate::AwaitWaiting(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &PromotionGate::AnyWaiting), timeout);
  std::vector<Lead> waiting;
  for (const auto& [id, state] : leads_) {
    if (state.waiting) waiting.push_back(Lead{id, state.since});
  }
  return waiting;
}

void PromotionGate::Reconciled(const Lead& lead) {
  absl::MutexLock lock(&mu_);
  auto it = leads_.find(lead.shard_id);
  if (it != leads_.end() && it->second.since == lead.since) it->second.waiting = false;
  PublishLocked();
}

}  // namespace server
}  // namespace kvstore
