// Copyright 2026 The kvstore Authors.

#include "server/routing/cluster_state.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace kvstore {
namespace server {

bool ClusterState::Update(std::shared_ptr<const cluster::ClusterMapView> map) {
  std::vector<std::function<void(const cluster::ClusterMapView&)>> listeners;
  {
    absl::MutexLock lock(&mu_);
    if (map_ != nullptr && map->epoch() <= map_->epoch()) return false;
    HoldLeadsLocked(*map);  // before map_: no request routes on it unheld
    map_ = map;
    epoch_.store(map->epoch(), std::memory_order_release);
    // A mark outlives its migration only as garbage: ids are never reused.
    absl::erase_if(handed_off_, [&](uint32_t id) { return map->MigrationById(id) == nullptr; });
    absl::erase_if(accepted_, [&](uint32_t id) { return map->MigrationById(id) == nullptr; });
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

void ClusterState::HoldLeadsLocked(const cluster::ClusterMapView& map) {
  const bool first = map_ == nullptr;
  absl::flat_hash_set<uint32_t> led;
  absl::flat_hash_map<uint32_t, uint64_t> held;
  for (const v1::Shard* shard : map.ShardsLedBy(self_)) {
    const uint32_t id = shard->shard_id();
    led.insert(id);
    if (led_.contains(id)) {
      if (auto it = held_.find(id); it != held_.end()) held.insert(*it);  // the lead goes on
    } else if (hold_new_leads_ && !first) {
      held.emplace(id, map.epoch());
    }
  }
  led_ = std::move(led);
  held_ = std::move(held);
}

void ClusterState::HoldNewLeads() {
  absl::MutexLock lock(&mu_);
  hold_new_leads_ = true;
}

bool ClusterState::Held(uint32_t shard_id) const {
  absl::MutexLock lock(&mu_);
  return held_.contains(shard_id);
}

std::vector<ClusterState::HeldLead> ClusterState::HeldLeads() const {
  absl::MutexLock lock(&mu_);
  std::vector<HeldLead> leads;
  for (const auto& [id, since] : held_) leads.push_back(HeldLead{id, since});
  return leads;
}

void ClusterState::ReleaseHold(uint32_t shard_id, uint64_t reconciled_at) {
  std::vector<std::function<void()>> listeners;
  {
    absl::MutexLock lock(&mu_);
    auto it = held_.find(shard_id);
    if (it == held_.end() || it->second > reconciled_at) return;
    held_.erase(it);
    listeners = hold_listeners_;
  }
  for (const auto& listener : listeners) listener();
}

void ClusterState::AddHoldListener(std::function<void()> listener) {
  absl::MutexLock lock(&mu_);
  hold_listeners_.push_back(std::move(listener));
}

uint64_t ClusterState::FenceEpoch() const {
  absl::MutexLock lock(&mu_);
  if (map_ == nullptr || !held_.empty() || NamesEarlierSelf(*map_)) return 0;
  return map_->epoch();
}

bool ClusterState::NamesEarlierSelf(const cluster::ClusterMapView& map) const {
  return NamesEarlierSelf(map.Node(self_));
}

bool ClusterState::NamesEarlierSelf(const v1::ClusterNode* record) const {
  const uint64_t mine = incarnation();
  // Incarnation 0 in the map: not recorded (maps written by hand or by
  // tests), nothing to compare.
  return mine != 0 && record != nullptr && record->incarnation() != 0 &&
         record->incarnation() != mine;
}

void ClusterState::set_process_id(std::string process_id) {
  absl::MutexLock lock(&mu_);
  process_id_ = std::move(process_id);
}

std::string ClusterState::process_id() const {
  absl::MutexLock lock(&mu_);
  return process_id_;
}

bool ClusterState::NamesOtherProcess(const cluster::ClusterMapView& map) const {
  return NamesOtherProcess(map.Node(self_));
}

bool ClusterState::NamesOtherProcess(const v1::ClusterNode* record) const {
  if (!NamesEarlierSelf(record)) return false;
  const std::string mine = process_id();
  return mine.empty() || record->process_id() != mine;
}

bool ClusterState::Serving() const {
  if (fenced()) return false;
  const int64_t now = absl::ToInt64Nanoseconds(clock_.Steady());
  return now < deadline_ns_.load(std::memory_order_acquire);
}

void ClusterState::MarkHandedOff(uint32_t migration_id) {
  absl::MutexLock lock(&mu_);
  handed_off_.insert(migration_id);
}

void ClusterState::AcceptHandoff(uint32_t migration_id) {
  absl::MutexLock lock(&mu_);
  accepted_.insert(migration_id);
}

bool ClusterState::HandedOff(uint32_t migration_id) const {
  absl::MutexLock lock(&mu_);
  return handed_off_.contains(migration_id);
}

bool ClusterState::HandoffAccepted(uint32_t migration_id) const {
  absl::MutexLock lock(&mu_);
  return accepted_.contains(migration_id);
}

bool ClusterState::RouteHandoff(Route* route) const {
  const v1::Migration& m = *route->migration;
  const v1::Shard* target = route->map->ShardById(m.target_shard());
  if (target == nullptr || target->replicas().empty()) {
    // The target may have accepted the handoff and acknowledged writes of
    // the slot that the source never saw: nobody serves it (not even a
    // replica read) until the target shard has a primary again.
    route->kind = Route::Kind::kDown;
    return true;
  }
  const bool source_primary = route->shard->replicas(0) == self_;
  const bool target_primary = target->replicas(0) == self_;
  // A node leading both shards serves the slot as the target once handed
  // off (its own forwarding made the target complete).
  if (target_primary && HandoffAccepted(m.id())) {
    route->kind = Route::Kind::kServe;
    route->shard = target;
    return true;
  }
  if (!source_primary) return false;  // kMoved to the source, as any slot
  if (!HandedOff(m.id())) {
    route->kind = Route::Kind::kTryAgain;
    return true;
  }
  route->node = route->map->Primary(*target);
  route->kind = route->node == nullptr ? Route::Kind::kTryAgain : Route::Kind::kAsk;
  return true;
}

Route ClusterState::RouteKey(absl::string_view key, bool replica_ok) const {
  return RouteSlot(cluster::KeySlot(key), replica_ok);
}

Route ClusterState::RouteSlot(uint32_t slot, bool replica_ok) const {
  Route route = RouteUnheld(slot, replica_ok);
  // Held() reads the holds of a map at least as new as route.map, and a
  // hold is set in the same step that installs its map.
  if (route.kind == Route::Kind::kServe && route.shard->replicas(0) == self_ &&
      Held(route.shard->shard_id())) {
    route.kind = Route::Kind::kReconciling;
  }
  return route;
}

Route ClusterState::RouteUnheld(uint32_t slot, bool replica_ok) const {
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
  route.migration = route.map->ActiveMigrationForSlot(slot);
  if (route.migration != nullptr && route.migration->state() == v1::MIGRATION_HANDOFF) {
    if (RouteHandoff(&route)) return route;
  }
  if (replicas[0] == self_) {
    if (NamesEarlierSelf(*route.map)) return route;  // kNotReady
    route.kind = Route::Kind::kServe;
    return route;
  }
  if (replica_ok) {
    for (const std::string& id : replicas) {
      if (id == self_) {
        if (NamesEarlierSelf(*route.map)) return route;  // kNotReady
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

cluster::Refusal RouteRefusal(const Route& route, RefusalAddress address) {
  using cluster::Refusal;
  switch (route.kind) {
    case Route::Kind::kMoved:
    case Route::Kind::kAsk: {
      const v1::ClusterNode& n = *route.node;
      std::string where = address == RefusalAddress::kResp ? n.resp_address() : n.control_address();
      return route.kind == Route::Kind::kMoved
                 ? Refusal::Moved(route.slot, n.node_id(), std::move(where))
                 : Refusal::Ask(route.slot, n.node_id(), std::move(where));
    }
    case Route::Kind::kTryAgain:
      return Refusal::TryAgain(route.slot, "is being handed to another shard; retry shortly");
    case Route::Kind::kReconciling:
      return Refusal::TryAgain(route.slot,
                               "has a new primary still making its replicas equal; retry shortly");
    case Route::Kind::kDown:
      return Refusal::ClusterDown(route.slot, "not served: its shard has no primary");
    case Route::Kind::kServe:
    case Route::Kind::kNotReady:
      break;
  }
  return Refusal::ClusterDown(
      "The cluster is down: this node has no cluster map yet, or is fenced (its lease may have "
      "lapsed)");
}

absl::Status RouteStatus(const Route& route, RefusalAddress address) {
  if (route.kind == Route::Kind::kServe) return absl::OkStatus();
  return cluster::ToStatus(RouteRefusal(route, address));
}

}  // namespace server
}  // namespace kvstore
