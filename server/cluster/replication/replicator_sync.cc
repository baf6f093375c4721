// Copyright 2026 The kvstore Authors.
//
// Replicator: the primary's half of a joiner's sync (BeginSync,
// PromoteSyncing), apart from the write path in replicator.cc.

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cluster/refusal.h"
#include "glog/logging.h"
#include "server/cluster/replication/replicator.h"

namespace kvstore {
namespace server {
namespace {

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& ids, absl::string_view id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

absl::Status NoMapYet() {
  return cluster::ToStatus(cluster::Refusal::MapBehind("this node has no map yet"));
}

// A process restarted within its earlier life's lease installs a map that
// still makes that life the primary; it holds none of the shard, so a
// joiner copying from it would be marked in sync holding nothing (and be
// promoted empty once the controller drops that life). The shard has lost
// that copy: it has no primary until the controller says so.
absl::Status EarlierLife(const ClusterState& state, uint32_t shard_id) {
  return cluster::ToStatus(cluster::Refusal::ClusterDown(absl::StrCat(
      "the map names an earlier incarnation of ", state.self(), " as primary of shard ", shard_id,
      "; this process restarted and holds none of it")));
}

}  // namespace

absl::StatusOr<uint64_t> Replicator::BeginSync(uint32_t shard_id, absl::string_view node_id,
                                               uint64_t shard_epoch) {
  auto map = state_->map();
  if (map == nullptr) return NoMapYet();
  const v1::Shard* shard = map->ShardById(shard_id);
  if (shard == nullptr || shard->replicas().empty() || shard->replicas(0) != state_->self()) {
    return absl::FailedPreconditionError(
        absl::StrCat("not the primary of shard ", shard_id, " in map epoch ", map->epoch()));
  }
  if (state_->NamesEarlierSelf(*map)) return EarlierLife(*state_, shard_id);
  if (shard_epoch < shard->shard_epoch()) {
    return cluster::ToStatus(cluster::Refusal::StaleShardEpoch(
        absl::StrCat(shard_epoch, " < ", shard->shard_epoch(), "; refresh the map")));
  }
  if (shard_epoch > shard->shard_epoch()) {
    return cluster::ToStatus(cluster::Refusal::MapBehind(
        absl::StrCat("shard epoch ", shard->shard_epoch(), " here, ", shard_epoch, " asked")));
  }
  if (!Contains(shard->syncing(), node_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat(node_id, " is not syncing shard ", shard_id, " in map epoch ", map->epoch()));
  }
  // Every write routed before this point (on a map that may not list the
  // joiner) is published once the barrier is ours; every later one is
  // forwarded to the joiner.
  HandoffWriterLock barrier(&ShardBarrier(shard_id));
  {
    absl::MutexLock lock(&broken_mu_);
    broken_.erase(std::make_pair(shard_id, std::string(node_id)));
  }
  return seqs_->Last(shard_id);
}

absl::Status Replicator::PromoteSyncing(uint32_t shard_id, absl::string_view node_id,
                                        uint64_t incarnation, uint64_t shard_epoch) {
  auto map = state_->map();
  if (map == nullptr) return NoMapYet();
  const v1::Shard* shard = map->ShardById(shard_id);
  if (shard == nullptr || shard->replicas().empty() || shard->replicas(0) != state_->self()) {
    return absl::FailedPreconditionError(
        absl::StrCat("not the primary of shard ", shard_id, " in map epoch ", map->epoch()));
  }
  if (state_->NamesEarlierSelf(*map)) return EarlierLife(*state_, shard_id);
  if (!Contains(shard->syncing(), node_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat(node_id, " is not syncing shard ", shard_id, " in map epoch ", map->epoch()));
  }
  const v1::ClusterNode* node = map->Node(node_id);
  if (incarnation != 0 && node != nullptr && node->incarnation() != incarnation) {
    return absl::FailedPreconditionError(absl::StrCat(node_id, " incarnation ", incarnation,
                                                      " is not the map's ", node->incarnation()));
  }
  // Writes of the shard pause while the map changes, so none can miss the
  // joiner between this check and the new map.
  HandoffWriterLock barrier(&ShardBarrier(shard_id));
  if (Broken(shard_id, node_id)) {
    return absl::FailedPreconditionError(absl::StrCat(
        node_id, " missed a write of shard ", shard_id, " since its copy began; copy again"));
  }
  // The check above was on this node's map, which may lag behind etcd: the
  // editor checks the incarnation and the copy's shard epoch again on the
  // newest map, inside the edit.
  absl::Status s = editor_->MarkInSync(shard_id, node_id, incarnation, shard_epoch);
  if (s.ok()) LOG(INFO) << node_id << " is in sync for shard " << shard_id;
  return s;
}

}  // namespace server
}  // namespace kvstore
