// Copyright 2026 The kvstore Authors.
//
// PlanRebalance (controller_plan.h): the slot arithmetic of a rebalance,
// apart from the membership decisions of controller_plan.cc.

#include <algorithm>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_map.h"
#include "server/cluster/controller/controller_plan.h"

namespace kvstore {
namespace server {
namespace {

const v1::Shard* ShardWithId(const v1::ClusterMap& map, uint32_t shard_id) {
  for (const v1::Shard& shard : map.shards()) {
    if (shard.shard_id() == shard_id) return &shard;
  }
  return nullptr;
}

struct SlotPiece {
  uint32_t start, end;
  uint32_t source;
};

// The top `excess` slots of `shard`, as contiguous pieces in ascending
// order (one per slot range they cut).
std::vector<SlotPiece> TopSlots(const v1::Shard& shard, uint32_t excess) {
  std::vector<v1::SlotRange> ranges(shard.slots().begin(), shard.slots().end());
  std::sort(ranges.begin(), ranges.end(),
            [](const v1::SlotRange& a, const v1::SlotRange& b) { return a.start() > b.start(); });
  std::vector<SlotPiece> pieces;
  for (const v1::SlotRange& r : ranges) {
    if (excess == 0) break;
    const uint32_t take = std::min(excess, r.end() - r.start() + 1);
    pieces.push_back({r.end() - take + 1, r.end(), shard.shard_id()});
    excess -= take;
  }
  std::reverse(pieces.begin(), pieces.end());
  return pieces;
}

}  // namespace

absl::StatusOr<RebalancePlan> PlanRebalance(const v1::ClusterMap& current) {
  if (current.migrations_size() > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(current.migrations_size(),
                     " migration(s) are still queued or running; rebalance when they are done"));
  }
  const uint32_t n = current.shards_size();
  if (n == 0) return absl::FailedPreconditionError("the map has no shards");
  std::vector<const v1::Shard*> order;
  for (const v1::Shard& shard : current.shards()) {
    if (shard.replicas().empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", shard.shard_id(), " is down; rebalance when every shard is up"));
    }
    order.push_back(&shard);
  }
  // The shards holding the most slots keep the ceil targets: fewest moves.
  std::stable_sort(order.begin(), order.end(), [](const v1::Shard* a, const v1::Shard* b) {
    const uint32_t ca = cluster::SlotCountOf(*a), cb = cluster::SlotCountOf(*b);
    return ca != cb ? ca > cb : a->shard_id() < b->shard_id();
  });
  const uint32_t base = cluster::kSlotCount / n, extra = cluster::kSlotCount % n;
  std::map<uint32_t, uint32_t> excess, deficit;  // by shard id: ordered
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t target = base + (i < extra ? 1 : 0);
    const uint32_t have = cluster::SlotCountOf(*order[i]);
    if (have > target) excess[order[i]->shard_id()] = have - target;
    if (have < target) deficit[order[i]->shard_id()] = target - have;
  }
  std::vector<SlotPiece> pieces;
  for (const auto& [id, count] : excess) {
    std::vector<SlotPiece> top = TopSlots(*ShardWithId(current, id), count);
    pieces.insert(pieces.end(), top.begin(), top.end());
  }
  RebalancePlan plan{current, {}};
  uint32_t next_id = current.next_migration_id();
  auto to = deficit.begin();
  for (SlotPiece piece : pieces) {
    while (piece.start <= piece.end && to != deficit.end()) {
      const uint32_t give = std::min(to->second, piece.end - piece.start + 1);
      v1::Migration m;
      m.set_id(next_id++);
      m.mutable_slots()->set_start(piece.start);
      m.mutable_slots()->set_end(piece.start + give - 1);
      m.set_source_shard(piece.source);
      m.set_target_shard(to->first);
      m.set_state(v1::MIGRATION_PENDING);
      plan.planned.push_back(m);
      piece.start += give;
      to->second -= give;
      if (to->second == 0) ++to;
    }
  }
  if (plan.planned.empty()) return plan;
  for (const v1::Migration& m : plan.planned) *plan.map.add_migrations() = m;
  plan.map.set_next_migration_id(next_id);
  plan.map.set_epoch(current.epoch() + 1);
  return plan;
}

}  // namespace server
}  // namespace kvstore
