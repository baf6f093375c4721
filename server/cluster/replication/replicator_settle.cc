// Copyright 2026 The kvstore Authors.
//
// Replicator: making replicas that differ on unacknowledged writes equal
// again (see replicator.h), apart from the write path in replicator.cc.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"
#include "glog/logging.h"
#include "server/cluster/replication/replicator.h"

namespace kvstore {
namespace server {

absl::Status Replicator::Admit(const cluster::ClusterMapView& map, const v1::Shard& shard,
                               uint32_t slot, absl::Time deadline) {
  if (!gate_.AwaitReady(map, shard.shard_id(), deadline)) {
    refused_->Increment();
    return cluster::ToStatus(cluster::Refusal::TryAgain(
        slot, absl::StrCat("shard ", shard.shard_id(),
                           " has a new primary still reconciling its replicas; retry")));
  }
  if (unsettled_count_.load(std::memory_order_acquire) == 0) return absl::OkStatus();
  absl::Status s = SettleKeys(map, shard, deadline);
  if (s.ok()) return s;
  refused_->Increment();
  // The write itself went nowhere: the client may send it again.
  return cluster::ToStatus(cluster::Refusal::ClusterDown(
      slot, absl::StrCat("shard ", shard.shard_id(),
                         ": a key whose write ended unknown could not be repaired on the "
                         "replicas (",
                         s.message(), "); retry")));
}

absl::Status Replicator::SettleKeys(const cluster::ClusterMapView& map, const v1::Shard& shard,
                                    absl::Time deadline) {
  absl::MutexLock settling(&settle_mu_);
  std::vector<std::string> keys;
  {
    absl::MutexLock lock(&unsettled_mu_);
    auto it = unsettled_.find(shard.shard_id());
    if (it == unsettled_.end()) return absl::OkStatus();
    keys.assign(it->second.begin(), it->second.end());
  }
  for (const std::string& key : keys) {
    absl::Status s;
    const v1::Shard* owner = map.ShardForKey(key);
    if (store_ != nullptr && owner != nullptr && owner->shard_id() == shard.shard_id() &&
        map.ActiveMigrationForSlot(cluster::KeySlot(key)) == nullptr) {
      // Under the key's stripe lock no write of it runs: the entry read is
      // the one every replica must end with.
      HandoffLock stripe(&StripeOf(key));
      absl::StatusOr<std::string> entry = store_->CopyEntry(key);
      if (entry.ok() || absl::IsNotFound(entry.status())) {
        bool stale = false, held = false;
        s = ReplicateRound(map, shard, key, entry.ok() ? *entry : std::string(), deadline, &stale,
                           &held, /*repair=*/true);
      } else {
        s = entry.status();
      }
    }
    // (A key the shard no longer owns went with its slot, and one of a
    // running migration is the migration's: nothing to do.)
    if (!s.ok()) {
      LOG(WARNING) << "could not repair key of shard " << shard.shard_id()
                   << " whose write ended unknown: " << s;
      return s;
    }
    repairs_->Increment();
    absl::MutexLock lock(&unsettled_mu_);
    auto it = unsettled_.find(shard.shard_id());
    if (it != unsettled_.end() && it->second.erase(key) > 0) {
      unsettled_count_.fetch_sub(1, std::memory_order_release);
      if (it->second.empty()) unsettled_.erase(it);
    }
  }
  return absl::OkStatus();
}

void Replicator::SettleIdle() {
  if (unsettled_count_.load(std::memory_order_acquire) == 0) return;
  std::vector<uint32_t> shards;
  {
    absl::MutexLock lock(&unsettled_mu_);
    for (const auto& [id, keys] : unsettled_) shards.push_back(id);
  }
  for (uint32_t id : shards) {
    // Under the shard's barrier, routed as a write is: no write of the shard
    // is then between its routing and its publish.
    HandoffReaderLock barrier(&ShardBarrier(id));
    auto map = state_->map();
    const v1::Shard* shard = map != nullptr ? map->ShardById(id) : nullptr;
    if (shard == nullptr || shard->replicas().empty() || shard->replicas(0) != state_->self()) {
      absl::MutexLock lock(&unsettled_mu_);
      auto it = unsettled_.find(id);
      if (it != unsettled_.end()) {
        unsettled_count_.fetch_sub(it->second.size(), std::memory_order_release);
        unsettled_.erase(it);
      }
      continue;
    }
    const int floor = static_cast<int>(
        std::min(options_.min_insync_replicas, std::max(1u, map->proto().replication_factor())));
    if (!state_->Serving() || !gate_.Ready(*map, id) || shard->replicas_size() < floor) continue;
    (void)SettleKeys(*map, *shard, absl::Now() + options_.replication_timeout);
  }
}

void Replicator::NoteOutcome(uint32_t shard_id, absl::string_view key, bool held, bool published,
                             const absl::Status& status) {
  if (!held) return;
  // A delete's kNotFound: the key was absent here, and is on every replica.
  const bool everywhere = published && (status.ok() || absl::IsNotFound(status));
  absl::MutexLock lock(&unsettled_mu_);
  if (everywhere) {
    if (unsettled_count_.load(std::memory_order_relaxed) == 0) return;
    auto it = unsettled_.find(shard_id);
    if (it != unsettled_.end() && it->second.erase(std::string(key)) > 0) {
      unsettled_count_.fetch_sub(1, std::memory_order_release);
      if (it->second.empty()) unsettled_.erase(it);
    }
    return;
  }
  if (unsettled_[shard_id].insert(std::string(key)).second) {
    unsettled_count_.fetch_add(1, std::memory_order_release);
  }
}

absl::Status Replicator::DropUnreconciled(uint32_t shard_id, const v1::ClusterNode& node) {
  auto map = state_->map();
  const v1::Shard* shard = map != nullptr ? map->ShardById(shard_id) : nullptr;
  if (shard == nullptr || shard->replicas().empty() || shard->replicas(0) != state_->self()) {
    return absl::FailedPreconditionError(absl::StrCat("not the primary of shard ", shard_id));
  }
  const int floor = static_cast<int>(
      std::min(options_.min_insync_replicas, std::max(1u, map->proto().replication_factor())));
  if (shard->replicas_size() - 1 < floor) {
    return cluster::ToStatus(cluster::Refusal::ClusterDown(
        absl::StrCat("shard ", shard_id, ": ", node.node_id(),
                     " could not be reconciled and the in-sync set may not shrink below ", floor)));
  }
  LOG(WARNING) << "backup " << node.node_id() << " of shard " << shard_id
               << " could not be reconciled with its new primary; dropping it from the in-sync "
                  "set";
  absl::Status s = editor_->RemoveReplica(shard_id, node.node_id());
  if (!s.ok()) return s;
  isr_shrinks_->Increment();
  former_.Dropped(shard_id, node);
  return absl::OkStatus();
}

}  // namespace server
}  // namespace kvstore
