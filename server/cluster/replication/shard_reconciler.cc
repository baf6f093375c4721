// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/shard_reconciler.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/failpoint/failpoint.h"
#include "common/status_macros.h"
#include "common/sync/thread_name.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {
namespace {

// Calls `call` until it answers anything but kMapBehind (the backup is
// about to install the map that names this node its primary) or `until`.
template <typename Call>
auto UntilMapCaughtUp(absl::Time until, Call call) -> decltype(call()) {
  while (true) {
    auto result = call();
    if (result.ok() || !cluster::IsRefusal(result.status(), cluster::RefusalKind::kMapBehind) ||
        absl::Now() + absl::Milliseconds(5) >= until) {
      return result;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

// Whether a failed reconcile of a backup says the backup failed (so it may
// be dropped like one that failed a write) rather than that the two maps
// disagree: a newer shard epoch or other roles there mean this node's map
// is behind, and it tries again once its map caught up.
bool BackupFailed(const absl::Status& s) {
  return !cluster::IsRefusal(s, cluster::RefusalKind::kStaleShardEpoch) &&
         s.code() != absl::StatusCode::kFailedPrecondition;
}

}  // namespace

ShardReconciler::ShardReconciler(KvStore* store, ClusterState* state, Replicator* replicator,
                                 ShardSeqs* seqs, PeerClient* peers, metrics::Registry* registry,
                                 ShardReconcilerOptions options)
    : store_(store),
      state_(state),
      replicator_(replicator),
      seqs_(seqs),
      peers_(peers),
      options_(std::move(options)) {
  metrics::Registry& r = *registry;
  reconciles_ = r.AddCounter("kvstore_reconcile_shards_total",
                             "Shards whose in-sync backups this node, as their new primary, made "
                             "equal to itself before acknowledging writes.");
  failures_ = r.AddCounter("kvstore_reconcile_failures_total",
                           "Reconcile attempts that failed (a backup neither reconciled nor "
                           "dropped); tried again with backoff.");
  slots_ = r.AddCounter("kvstore_reconcile_slots_total",
                        "Slots whose digests differed on a backup and were sent to it.");
  entries_ =
      r.AddCounter("kvstore_reconcile_entries_total", "Entries sent to backups by reconciliation.");
  seconds_ = r.AddHistogram("kvstore_reconcile_seconds",
                            "Time from the start of a shard's reconcile to its end.");
  replicator_->promotion_gate().Enable();
  state_->HoldNewLeads();
  if (options_.poll_interval > absl::ZeroDuration()) {
    thread_ = std::thread([this] {
      NameThread("kv-reconciler");
      Loop();
    });
  }
}

ShardReconciler::~ShardReconciler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void ShardReconciler::Loop() {
  absl::flat_hash_map<uint32_t, absl::Time> next_try;
  absl::flat_hash_map<uint32_t, absl::Duration> backoff;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    std::vector<PromotionGate::Lead> waiting =
        replicator_->promotion_gate().AwaitWaiting(options_.poll_interval);
    // A lead the state holds is reconciled even when the gate saw it begin
    // earlier (it may have missed a map): a reconcile more is harmless.
    for (const ClusterState::HeldLead& held : state_->HeldLeads()) {
      if (std::none_of(waiting.begin(), waiting.end(),
                       [&](const PromotionGate::Lead& l) { return l.shard_id == held.shard_id; })) {
        waiting.push_back(PromotionGate::Lead{held.shard_id, held.since});
      }
    }
    if (options_.settle_idle) replicator_->SettleIdle();
    for (const PromotionGate::Lead& lead : waiting) {
      if (absl::Now() < next_try[lead.shard_id]) continue;
      absl::Status s = ReconcileNow(lead);
      absl::Duration& b = backoff[lead.shard_id];
      if (s.ok()) {
        b = absl::ZeroDuration();
        next_try.erase(lead.shard_id);
        continue;
      }
      failures_->Increment();
      // This node's map behind a backup's is caught up within moments: ask
      // again soon. A backup that failed and could not be dropped: back off.
      b = BackupFailed(s) ? std::clamp(b * 2, options_.min_backoff, options_.max_backoff)
                          : options_.min_backoff;
      next_try[lead.shard_id] = absl::Now() + b;
      LOG(WARNING) << "reconcile of shard " << lead.shard_id << " failed (" << s
                   << "); its writes wait; retrying in " << b;
    }
  }
}

absl::Status ShardReconciler::ReconcileNow(const PromotionGate::Lead& lead) {
  auto map = state_->map();
  const v1::Shard* shard = map != nullptr ? map->ShardById(lead.shard_id) : nullptr;
  if (shard == nullptr || shard->replicas().empty() || shard->replicas(0) != state_->self()) {
    return absl::OkStatus();  // no longer ours: the gate forgot the lead
  }
  if (!state_->Serving()) return absl::UnavailableError("this node is not serving");
  KV_RETURN_IF_ERROR(KV_FAILPOINT("reconciler/before-reconcile"));
  const absl::Time start = absl::Now();
  const SlotBits slots = ReconcilableSlots(*map, *shard);
  const absl::flat_hash_map<uint32_t, uint64_t> mine = DigestSlots(*store_, slots);
  Stats stats;
  for (int i = 1; i < shard->replicas_size(); ++i) {
    const v1::ClusterNode* backup = map->Node(shard->replicas(i));
    if (backup == nullptr) continue;
    absl::Status s = ReconcileBackup(*map, *shard, *backup, slots, mine, &stats);
    if (s.ok()) continue;
    LOG(WARNING) << "could not reconcile backup " << backup->node_id() << " of shard "
                 << lead.shard_id << ": " << s;
    if (!BackupFailed(s)) return s;
    absl::Status dropped = replicator_->DropUnreconciled(lead.shard_id, *backup);
    if (!dropped.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat(s.message(), "; not dropped: ", dropped.message()));
    }
  }
  reconciles_->Increment();
  const absl::Duration took = absl::Now() - start;
  seconds_->Observe(took);
  // A backup added meanwhile copied this node's state (SyncShard): equal.
  // (Counted first: whoever sees a write acknowledged sees the count.)
  replicator_->promotion_gate().Reconciled(lead);
  state_->ReleaseHold(lead.shard_id, map->epoch());
  LOG(INFO) << "shard " << lead.shard_id << ": reconciled " << shard->replicas_size() - 1
            << " backup(s) over " << mine.size() << " slot(s) with entries in " << took << ": "
            << stats.differing_slots << " slot(s) differed, " << stats.entries_sent
            << " entries sent";
  return absl::OkStatus();
}

absl::Status ShardReconciler::ReconcileBackup(const cluster::ClusterMapView& map,
                                              const v1::Shard& shard, const v1::ClusterNode& backup,
                                              const SlotBits& slots,
                                              const absl::flat_hash_map<uint32_t, uint64_t>& mine,
                                              Stats* stats) {
  v1::ShardDigestRequest req;
  req.set_shard_id(shard.shard_id());
  req.set_shard_epoch(shard.shard_epoch());
  req.set_primary_node_id(state_->self());
  if (const v1::ClusterNode* self = map.Node(state_->self())) {
    req.set_primary_incarnation(self->incarnation());
  }
  AddRanges(slots, req.mutable_slots());
  const absl::Time until = absl::Now() + options_.attempt_timeout;
  absl::StatusOr<v1::ShardDigestResponse> theirs =
      UntilMapCaughtUp(until, [&] { return peers_->ShardDigest(backup, req, until); });
  if (!theirs.ok()) return theirs.status();
  if (theirs->slots_size() != theirs->digests_size()) {
    return absl::InternalError("ShardDigest answered slots and digests of different counts");
  }
  // The next writes of the shard must be ordered after whatever the backup
  // applied (its seqs guard against reordered deliveries).
  seqs_->Applied(shard.shard_id(), theirs->applied_seq());
  SlotBits differing;
  absl::flat_hash_map<uint32_t, uint64_t> remote;
  for (int i = 0; i < theirs->slots_size(); ++i) remote[theirs->slots(i)] = theirs->digests(i);
  for (const auto& [slot, digest] : mine) {
    auto it = remote.find(slot);
    if (it == remote.end() || it->second != digest) differing.set(slot);
  }
  for (const auto& [slot, digest] : remote) {
    if (slot < cluster::kSlotCount && slots[slot] && !mine.contains(slot)) differing.set(slot);
  }
  if (differing.none()) return absl::OkStatus();
  v1::ReconcileSlotsRequest head;
  head.set_shard_id(shard.shard_id());
  head.set_shard_epoch(shard.shard_epoch());
  head.set_primary_node_id(req.primary_node_id());
  head.set_primary_incarnation(req.primary_incarnation());
  return SendSlots(head, backup, differing, stats);
}

absl::Status ShardReconciler::SendSlots(const v1::ReconcileSlotsRequest& head,
                                        const v1::ClusterNode& backup, const SlotBits& differing,
                                        Stats* stats) {
  // No write of the shard runs here (the gate holds them), so the entries
  // read now are this node's state until the reconcile ends.
  std::map<uint32_t, std::vector<std::string>> by_slot;
  for (uint32_t s = 0; s < cluster::kSlotCount; ++s) {
    if (differing[s]) by_slot[s];
  }
  ForEachKeyIn(*store_, differing, [&](const std::string& key) {
    absl::StatusOr<std::string> entry = store_->CopyEntry(key);
    if (entry.ok()) by_slot[cluster::KeySlot(key)].push_back(*std::move(entry));
  });
  auto it = by_slot.begin();
  while (it != by_slot.end()) {
    v1::ReconcileSlotsRequest req = head;
    uint64_t bytes = 0;
    for (; it != by_slot.end() && (req.slots_size() == 0 || bytes < options_.chunk_bytes); ++it) {
      req.add_slots(it->first);
      for (std::string& entry : it->second) {
        bytes += entry.size();
        req.add_entries(std::move(entry));
      }
    }
    const absl::Time until = absl::Now() + options_.attempt_timeout;
    absl::StatusOr<v1::ReconcileSlotsResponse> resp = UntilMapCaughtUp(
        until, [&] { return peers_->ReconcileSlots(backup, req, peers_->DefaultDeadline()); });
    if (!resp.ok()) return resp.status();
    stats->differing_slots += req.slots_size();
    stats->entries_sent += req.entries_size();
    slots_->Increment(req.slots_size());
    entries_->Increment(req.entries_size());
  }
  return absl::OkStatus();
}

}  // namespace server
}  // namespace kvstore
