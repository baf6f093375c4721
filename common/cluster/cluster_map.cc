// Copyright 2026 The kvstore Authors.

#include "common/cluster/cluster_map.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvstore {
namespace cluster {

absl::StatusOr<std::shared_ptr<const ClusterMapView>> ClusterMapView::Build(v1::ClusterMap map) {
  std::shared_ptr<ClusterMapView> view(new ClusterMapView(std::move(map)));
  const v1::ClusterMap& m = view->map_;
  if (m.shards_size() > static_cast<int>(kSlotCount)) {
    return absl::InvalidArgumentError(absl::StrCat("cluster map: ", m.shards_size(), " shards"));
  }
  for (int i = 0; i < m.nodes_size(); ++i) {
    const std::string& id = m.nodes(i).node_id();
    if (id.empty()) return absl::InvalidArgumentError("cluster map: a node without a node_id");
    if (!view->node_index_.emplace(id, i).second) {
      return absl::InvalidArgumentError(absl::StrCat("cluster map: node ", id, " listed twice"));
    }
  }
  view->slot_to_shard_.fill(-1);
  absl::flat_hash_set<uint32_t> shard_ids;
  for (int s = 0; s < m.shards_size(); ++s) {
    const v1::Shard& shard = m.shards(s);
    if (!shard_ids.insert(shard.shard_id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster map: shard ", shard.shard_id(), " listed twice"));
    }
    absl::flat_hash_set<std::string> members;
    for (const auto* list : {&shard.replicas(), &shard.syncing()}) {
      for (const std::string& id : *list) {
        if (!view->node_index_.contains(id)) {
          return absl::InvalidArgumentError(
              absl::StrCat("cluster map: shard ", shard.shard_id(), " names unknown node ", id));
        }
        if (!members.insert(id).second) {
          return absl::InvalidArgumentError(
              absl::StrCat("cluster map: node ", id, " twice in shard ", shard.shard_id()));
        }
      }
    }
    for (const v1::SlotRange& r : shard.slots()) {
      if (r.start() > r.end() || r.end() >= kSlotCount) {
        return absl::InvalidArgumentError(absl::StrCat("cluster map: shard ", shard.shard_id(),
                                                       " has bad slot range ", r.start(), "-",
                                                       r.end()));
      }
      for (uint32_t slot = r.start(); slot <= r.end(); ++slot) {
        if (view->slot_to_shard_[slot] != -1) {
          return absl::InvalidArgumentError(
              absl::StrCat("cluster map: slot ", slot, " is in two shards"));
        }
        view->slot_to_shard_[slot] = static_cast<int16_t>(s);
      }
    }
  }
  for (uint32_t slot = 0; slot < kSlotCount; ++slot) {
    if (view->slot_to_shard_[slot] == -1) {
      return absl::InvalidArgumentError(absl::StrCat("cluster map: slot ", slot, " has no shard"));
    }
  }
  if (absl::Status s = view->IndexMigrations(); !s.ok()) return s;
  return std::shared_ptr<const ClusterMapView>(std::move(view));
}

absl::Status ClusterMapView::IndexMigrations() {
  active_migration_ = -1;
  std::vector<bool> migrating(kSlotCount, false);
  absl::flat_hash_set<uint32_t> ids;
  for (int i = 0; i < map_.migrations_size(); ++i) {
    const v1::Migration& m = map_.migrations(i);
    const std::string what = absl::StrCat("cluster map: migration ", m.id());
    if (!ids.insert(m.id()).second) return absl::InvalidArgumentError(what + " listed twice");
    if (m.state() != v1::MIGRATION_PENDING && m.state() != v1::MIGRATION_COPYING &&
        m.state() != v1::MIGRATION_HANDOFF) {
      return absl::InvalidArgumentError(what + " has no state");
    }
    const v1::Shard* source = ShardById(m.source_shard());
    if (source == nullptr || ShardById(m.target_shard()) == nullptr ||
        m.source_shard() == m.target_shard()) {
      return absl::InvalidArgumentError(what + " names a bad source or target shard");
    }
    if (m.slots().start() > m.slots().end() || m.slots().end() >= kSlotCount) {
      return absl::InvalidArgumentError(what + " has a bad slot range");
    }
    for (uint32_t slot = m.slots().start(); slot <= m.slots().end(); ++slot) {
      if (ShardForSlot(slot) != source) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": slot ", slot, " is not its source shard's"));
      }
      if (migrating[slot]) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": slot ", slot, " migrates twice"));
      }
      migrating[slot] = true;
    }
    if (m.state() != v1::MIGRATION_PENDING) {
      if (active_migration_ != -1) {
        return absl::InvalidArgumentError(what + ": two migrations are running");
      }
      active_migration_ = i;
    }
  }
  return absl::OkStatus();
}

const v1::Migration* ClusterMapView::ActiveMigrationForSlot(uint32_t slot) const {
  if (active_migration_ < 0) return nullptr;
  const v1::Migration& m = map_.migrations(active_migration_);
  return slot >= m.slots().start() && slot <= m.slots().end() ? &m : nullptr;
}

const v1::Migration* ClusterMapView::MigrationById(uint32_t id) const {
  for (const v1::Migration& m : map_.migrations()) {
    if (m.id() == id) return &m;
  }
  return nullptr;
}

const v1::Shard* ClusterMapView::ShardForSlot(uint32_t slot) const {
  if (slot >= kSlotCount || slot_to_shard_[slot] < 0) return nullptr;
  return &map_.shards(slot_to_shard_[slot]);
}

const v1::Shard* ClusterMapView::ShardById(uint32_t shard_id) const {
  for (const v1::Shard& shard : map_.shards()) {
    if (shard.shard_id() == shard_id) return &shard;
  }
  return nullptr;
}

const v1::ClusterNode* ClusterMapView::Node(absl::string_view node_id) const {
  auto it = node_index_.find(node_id);
  return it == node_index_.end() ? nullptr : &map_.nodes(it->second);
}

const v1::ClusterNode* ClusterMapView::Primary(const v1::Shard& shard) const {
  return shard.replicas().empty() ? nullptr : Node(shard.replicas(0));
}

std::vector<const v1::Shard*> ClusterMapView::ShardsLedBy(absl::string_view node_id) const {
  std::vector<const v1::Shard*> out;
  for (const v1::Shard& shard : map_.shards()) {
    if (!shard.replicas().empty() && shard.replicas(0) == node_id) out.push_back(&shard);
  }
  return out;
}

std::vector<const v1::Shard*> ClusterMapView::ShardsBackedBy(absl::string_view node_id) const {
  std::vector<const v1::Shard*> out;
  for (const v1::Shard& shard : map_.shards()) {
    for (int i = 1; i < shard.replicas_size(); ++i) {
      if (shard.replicas(i) == node_id) out.push_back(&shard);
    }
  }
  return out;
}

std::vector<const v1::Shard*> ClusterMapView::ShardsSyncingOn(absl::string_view node_id) const {
  std::vector<const v1::Shard*> out;
  for (const v1::Shard& shard : map_.shards()) {
    for (const std::string& id : shard.syncing()) {
      if (id == node_id) out.push_back(&shard);
    }
  }
  return out;
}

std::vector<v1::SlotRange> EvenSlotRanges(uint32_t shards) {
  // Shard i ends at round((i + 1) * 16384 / shards) - 1, the last at 16383:
  // the same split redis-cli --cluster create makes, so a cluster of N
  // shards has the slot ranges a Redis user expects.
  std::vector<v1::SlotRange> out;
  const double per_shard = static_cast<double>(kSlotCount) / shards;
  uint32_t start = 0;
  for (uint32_t i = 0; i < shards; ++i) {
    uint32_t end = static_cast<uint32_t>(std::lround(per_shard * (i + 1) - 1));
    if (i + 1 == shards || end >= kSlotCount) end = kSlotCount - 1;
    v1::SlotRange r;
    r.set_start(start);
    r.set_end(end);
    out.push_back(r);
    start = end + 1;
  }
  return out;
}

std::string FormatSlotRanges(const v1::Shard& shard) {
  return absl::StrJoin(shard.slots(), ",", [](std::string* out, const v1::SlotRange& r) {
    if (r.start() == r.end()) {
      absl::StrAppend(out, r.start());
    } else {
      absl::StrAppend(out, r.start(), "-", r.end());
    }
  });
}

void StampSyncingSince(v1::Shard* shard) {
  DropStaleSyncingSince(shard);
  auto* since = shard->mutable_syncing_since();
  for (const std::string& id : shard->syncing()) {
    if (since->count(id) == 0) (*since)[id] = shard->shard_epoch();
  }
}

void DropStaleSyncingSince(v1::Shard* shard) {
  auto* since = shard->mutable_syncing_since();
  for (auto it = since->begin(); it != since->end();) {
    if (std::find(shard->syncing().begin(), shard->syncing().end(), it->first) ==
        shard->syncing().end()) {
      it = since->erase(it);
    } else {
      ++it;
    }
  }
}

namespace {

// `ranges` as one sorted, merged list.
void Normalize(google::protobuf::RepeatedPtrField<v1::SlotRange>* ranges) {
  std::sort(ranges->begin(), ranges->end(),
            [](const v1::SlotRange& a, const v1::SlotRange& b) { return a.start() < b.start(); });
  google::protobuf::RepeatedPtrField<v1::SlotRange> merged;
  for (const v1::SlotRange& r : *ranges) {
    if (!merged.empty() && r.start() <= merged.rbegin()->end() + 1) {
      v1::SlotRange& last = *merged.rbegin();
      last.set_end(std::max(last.end(), r.end()));
    } else {
      *merged.Add() = r;
    }
  }
  ranges->Swap(&merged);
}

}  // namespace

void MoveSlots(const v1::SlotRange& range, v1::Shard* from, v1::Shard* to) {
  google::protobuf::RepeatedPtrField<v1::SlotRange> kept;
  for (const v1::SlotRange& r : from->slots()) {
    if (r.end() < range.start() || r.start() > range.end()) {
      *kept.Add() = r;
      continue;
    }
    if (r.start() < range.start()) {
      v1::SlotRange* left = kept.Add();
      left->set_start(r.start());
      left->set_end(range.start() - 1);
    }
    if (r.end() > range.end()) {
      v1::SlotRange* right = kept.Add();
      right->set_start(range.end() + 1);
      right->set_end(r.end());
    }
  }
  from->mutable_slots()->Swap(&kept);
  Normalize(from->mutable_slots());
  *to->add_slots() = range;
  Normalize(to->mutable_slots());
}

uint32_t SlotCountOf(const v1::Shard& shard) {
  uint32_t n = 0;
  for (const v1::SlotRange& r : shard.slots()) n += r.end() - r.start() + 1;
  return n;
}

}  // namespace cluster
}  // namespace kvstore
