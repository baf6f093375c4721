// Copyright 2026 The kvstore Authors.

#include "server/cluster/cluster_state.h"

#include <utility>

namespace kvstore {
namespace server {

bool ClusterState::Update(std::shared_ptr<const cluster::ClusterMapView> map) {
  std::vector<std::function<void(const cluster::ClusterMapView&)>> listeners;
  {
    absl::MutexLock lock(&mu_);
    if (map_ != nullptr && map->epoch() <= map_->epoch()) return false;
    map_ = map;
    epoch_.store(map->epoch(), std::memory_order_release);
    listeners = listeners_;
  }
  // Outside the lock: a listener may call map() or RouteKey().
  for (const auto& listener : listeners) listener(*map);
  return true;
}

std::shared_ptr<const cluster::ClusterMapView> ClusterState::map() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

void ClusterState::AddListener(std::function<void(const cluster::ClusterMapView&)> listener) {
  absl::MutexLock lock(&mu_);
  listeners_.push_back(std::move(listener));
}

bool ClusterState::Serving() const {
  if (fenced()) return false;
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  return now < deadline_ns_.load(std::memory_order_acquire);
}

Route ClusterState::RouteKey(absl::string_view key, bool replica_ok) const {
  return RouteSlot(cluster::KeySlot(key), replica_ok);
}

Route ClusterState::RouteSlot(uint32_t slot, bool replica_ok) const {
  Route route;
  route.slot = slot;
  route.map = map();
  if (route.map == nullptr || !Serving()) return route;  // kNotReady
  route.shard = route.map->ShardForSlot(slot);
  if (route.shard == nullptr || route.shard->replicas().empty()) {
    route.kind = Route::Kind::kDown;
    return route;
  }
  const auto& replicas = route.shard->replicas();
  if (replicas[0] == self_) {
    route.kind = Route::Kind::kServe;
    return route;
  }
  if (replica_ok) {
    for (const std::string& id : replicas) {
      if (id == self_) {
        route.kind = Route::Kind::kServe;
        return route;
      }
    }
  }
  route.kind = Route::Kind::kMoved;
  route.node = route.map->Primary(*route.shard);
  if (route.node == nullptr) route.kind = Route::Kind::kDown;
  return route;
}

}  // namespace server
}  // namespace kvstore
