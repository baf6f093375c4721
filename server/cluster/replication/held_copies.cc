// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/held_copies.h"

#include <algorithm>

namespace kvstore {
namespace server {

std::vector<v1::ShardCopy> HeldCopies(const ClusterState& state, const ShardSeqs& seqs) {
  std::vector<v1::ShardCopy> out;
  auto map = state.map();
  if (map == nullptr) return out;
  const int r = std::max<int>(1, map->proto().replication_factor());
  for (const v1::Shard& shard : map->proto().shards()) {
    bool held = std::find(shard.replicas().begin(), shard.replicas().end(), state.self()) !=
                shard.replicas().end();
    for (const v1::ClusterNode& last : shard.last_in_sync()) {
      held = held || last.node_id() == state.self();
    }
    // A candidate copy: this process applied writes of the shard, and the
    // slot janitor keeps them while the shard is below R.
    held = held || (!shard.replicas().empty() && shard.replicas_size() < r &&
                    seqs.Last(shard.shard_id()) > 0);
    if (!held) continue;
    v1::ShardCopy copy;
    copy.set_shard_id(shard.shard_id());
    copy.set_shard_epoch(shard.shard_epoch());
    copy.set_applied_seq(seqs.Last(shard.shard_id()));
    out.push_back(copy);
  }
  return out;
}

}  // namespace server
}  // namespace kvstore
