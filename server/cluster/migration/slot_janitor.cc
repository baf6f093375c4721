// Copyright 2026 The kvstore Authors.

#include "server/cluster/migration/slot_janitor.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "common/cluster/slots.h"
#include "common/failpoint/failpoint.h"
#include "common/protocol/layout.h"
#include "common/sync/thread_name.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {
namespace {

bool Names(const google::protobuf::RepeatedPtrField<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

bool InShard(const v1::Shard& shard, const std::string& node_id) {
  if (Names(shard.replicas(), node_id) || Names(shard.syncing(), node_id)) return true;
  // A DOWN shard waits for its last in-sync copies: this one may be it.
  for (const v1::ClusterNode& last : shard.last_in_sync()) {
    if (last.node_id() == node_id) return true;
  }
  return false;
}

void Mark(uint32_t start, uint32_t end, std::vector<bool>* roles) {
  for (uint32_t s = start; s <= end && s < cluster::kSlotCount; ++s) (*roles)[s] = true;
}

// Whether every slot of `old_roles` is also in `roles`.
bool Covers(const std::vector<bool>& roles, const std::vector<bool>& old_roles) {
  for (size_t s = 0; s < old_roles.size(); ++s) {
    if (old_roles[s] && !roles[s]) return false;
  }
  return true;
}

// A shard that has a primary but fewer in-sync replicas than the
// replication factor: a copy this node still holds of it (it was dropped
// from the in-sync set) is the one the controller may place back and a
// delta resync start from. Not a draining node's: it is leaving.
bool WantsCopies(const v1::ClusterMap& map, const v1::Shard& shard, const std::string& node_id) {
  if (shard.replicas().empty() ||
      shard.replicas_size() >= static_cast<int>(map.replication_factor())) {
    return false;
  }
  for (const v1::ClusterNode& d : map.draining()) {
    if (d.node_id() == node_id) return false;
  }
  return true;
}

}  // namespace

std::vector<bool> SlotRoles(const cluster::ClusterMapView& map, const std::string& node_id) {
  std::vector<bool> roles(cluster::kSlotCount, false);
  for (const v1::Shard& shard : map.proto().shards()) {
    if (!InShard(shard, node_id) && !WantsCopies(map.proto(), shard, node_id)) continue;
    for (const v1::SlotRange& r : shard.slots()) Mark(r.start(), r.end(), &roles);
  }
  for (const v1::Migration& m : map.proto().migrations()) {
    if (m.state() != v1::MIGRATION_COPYING && m.state() != v1::MIGRATION_HANDOFF) continue;
    const v1::Shard* target = map.ShardById(m.target_shard());
    if (target != nullptr && InShard(*target, node_id)) {
      Mark(m.slots().start(), m.slots().end(), &roles);
    }
  }
  return roles;
}

SlotJanitor::SlotJanitor(KvStore* store, ClusterState* state, SlotJanitorOptions options)
    : store_(store), state_(state), options_(std::move(options)) {
  metrics::Registry* registry = options_.registry != nullptr ? options_.registry : &own_registry_;
  deleted_ = registry->AddCounter(
      "kvstore_slot_janitor_deleted_total",
      "Entries of slots this node no longer has a role for, deleted locally by the slot janitor.");
  // The listener only wakes the thread: it runs on the map installer's.
  state_->AddListener([this](const cluster::ClusterMapView&) { Kick(); });
  thread_ = std::thread([this] {
    NameThread("kv-slot-janitor");
    Run();
  });
}

SlotJanitor::~SlotJanitor() { Stop(); }

void SlotJanitor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_.exchange(true)) return;
  }
  if (thread_.joinable()) thread_.join();
}

void SlotJanitor::Kick() {
  absl::MutexLock lock(&mu_);
  wanted_ = true;
}

bool SlotJanitor::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !wanted_ && !running_; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

uint64_t SlotJanitor::deleted() const { return deleted_->Value(); }

void SlotJanitor::Run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return wanted_ || stop_.load(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_.load()) return;
      // Maps installed from now on ask for another pass.
      wanted_ = false;
      running_ = true;
    }
    const bool done = Pass();
    absl::MutexLock lock(&mu_);
    running_ = false;
    if (!done) return;
  }
}

bool SlotJanitor::Pass() {
  std::shared_ptr<const cluster::ClusterMapView> map = state_->map();
  if (map == nullptr) return true;
  uint64_t epoch = map->epoch();
  std::vector<bool> roles = SlotRoles(*map, state_->self());
  // No slot lost since the last pass: no key can have been orphaned.
  if (!last_roles_.empty() && Covers(roles, last_roles_)) {
    last_roles_ = std::move(roles);
    return true;
  }
  std::vector<bool> used = roles;  // the union of the roles decided by
  const absl::Time start = absl::Now();
  uint64_t scanned = 0, deleted = 0;
  std::vector<bool> slots_cleaned(cluster::kSlotCount, false);
  std::vector<std::string> keys;
  uint64_t cursor = 0;
  do {
    keys.clear();
    cursor = store_->Scan(cursor, options_.page_keys, "", &keys);
    for (const std::string& key : keys) {
      if (stop_.load(std::memory_order_relaxed)) return false;
      ++scanned;
      const uint32_t slot = cluster::KeySlot(key);
      if (roles[slot]) continue;
      // The entry the decision is about, taken before the map is looked at
      // again: whatever writes the key under a role given by a newer map
      // publishes another entry, which the conditional delete leaves alone.
      const std::optional<layout::Slot> seen = store_->Locate(key);
      if (!seen.has_value()) continue;
      // Decide again on the newest map right before the delete.
      if (state_->map_epoch() != epoch) {
        map = state_->map();
        epoch = map->epoch();
        roles = SlotRoles(*map, state_->self());
        for (size_t s = 0; s < roles.size(); ++s) used[s] = used[s] || roles[s];
        if (roles[slot]) continue;
      }
      if (!KV_FAILPOINT("slot-janitor/before-delete").ok()) continue;
      if (!store_->DeleteReplicaIf(key, *seen)) continue;  // written (or moved) since
      ++deleted;
      slots_cleaned[slot] = true;
      deleted_->Increment();
    }
  } while (cursor != 0);
  last_roles_ = std::move(used);
  if (deleted > 0) {
    LOG(INFO) << "slot janitor: map epoch " << epoch << ": deleted " << deleted << " entries of "
              << std::count(slots_cleaned.begin(), slots_cleaned.end(), true)
              << " slot(s) this node has no role for (" << scanned << " keys scanned, "
              << absl::FormatDuration(absl::Now() - start) << ")";
  }
  return true;
}

}  // namespace server
}  // namespace kvstore
