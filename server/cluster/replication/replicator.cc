// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replicator.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"
#include "common/failpoint/failpoint.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/net/batch_scope.h"

namespace kvstore {
namespace server {
namespace {

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& ids, absl::string_view id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// The in-sync floor on `map`: the configured one, capped by R.
int Floor(const cluster::ClusterMapView& map, uint32_t configured) {
  return static_cast<int>(std::min(configured, std::max(1u, map.proto().replication_factor())));
}

// Below the floor nothing may be acknowledged, and nothing was sent yet.
absl::Status BelowFloor(const cluster::ClusterMapView& map, const v1::Shard& shard, uint32_t slot,
                        uint32_t configured) {
  if (shard.replicas_size() >= Floor(map, configured)) return absl::OkStatus();
  return cluster::ToStatus(cluster::Refusal::ClusterDown(
      slot, absl::StrCat(
                "shard ", shard.shard_id(), " has ", shard.replicas_size(),
                " in-sync replicas, fewer than --min_insync_replicas=", Floor(map, configured))));
}

}  // namespace

// A backup whose map is older than the primary's answers kMapBehind; the
// primary retries until its timeout (the backup is about to install the
// new map). A backup whose map is newer answers kStaleShardEpoch.
bool Replicator::MapBehind(const absl::Status& s) {
  return cluster::IsRefusal(s, cluster::RefusalKind::kMapBehind);
}

Replicator::Replicator(ClusterState* state, ShardMapEditor* editor, ShardSeqs* seqs,
                       PeerClient* peers, metrics::Registry* registry, ReplicatorOptions options)
    : state_(state),
      editor_(editor),
      seqs_(seqs),
      peers_(peers),
      options_(std::move(options)),
      stripes_(new HandoffMutex[kStripes]),
      send_order_(new absl::Mutex[kSendOrderLocks]),
      streams_(peers, registry, state->self()),
      former_(state->self(), options_.lease_ttl),
      gate_(state->self()) {
  // Maps this node installs as a backup count too: a backup promoted by a
  // manual failover must know whom it replaced before its first write.
  state_->AddListener([this](const cluster::ClusterMapView& view) {
    former_.Observe(view);
    gate_.Observe(view);
    // A stream to a replica that left the shard (or of a shard this node
    // no longer leads) would otherwise stay open, idle, for good.
    streams_.Retain([&](uint32_t shard_id, const std::string& node_id) {
      const v1::Shard* shard = view.ShardById(shard_id);
      if (shard == nullptr || shard->replicas().empty() || shard->replicas(0) != state_->self()) {
        return false;
      }
      return Contains(shard->replicas(), node_id) || Contains(shard->syncing(), node_id);
    });
  });
  metrics::Registry& r = *registry;
  writes_ = r.AddCounter("kvstore_replication_writes_total",
                         "Writes this node published as primary after replicating them.");
  started_writes_ = r.AddCounter("kvstore_replication_started_writes_total",
                                 "Writes started without a thread waiting for their round "
                                 "(StartWrite: the RESP loop's SETs in the common case).");
  slow_ended_ = r.AddCounter("kvstore_replication_started_slow_ends_total",
                             "Started writes whose round did not simply succeed, finished on a "
                             "worker as a waiting write would have gone on.");
  backup_failures_ = r.AddCounter("kvstore_replication_backup_failures_total",
                                  "Replicate calls to a backup or syncing replica that failed or "
                                  "timed out.");
  isr_shrinks_ = r.AddCounter("kvstore_replication_isr_shrinks_total",
                              "Failed in-sync backups this primary dropped from the in-sync set.");
  syncing_broken_ = r.AddCounter("kvstore_replication_syncing_broken_total",
                                 "Syncing replicas marked broken for missing a write.");
  refused_ = r.AddCounter("kvstore_replication_refused_total",
                          "Writes refused (routed elsewhere, cluster down, migration target "
                          "failed), or failed because a "
                          "failed backup could not be dropped.");
  latency_ = r.AddHistogram("kvstore_replication_latency_seconds",
                            "Time from forwarding a write to its backups to the last answer.");
  forwarded_ = r.AddCounter("kvstore_migration_forwarded_writes_total",
                            "Writes of migrating slots this source primary forwarded to the "
                            "migration's target primary (ImportWrite).");
  forward_failures_ = r.AddCounter("kvstore_migration_forward_failures_total",
                                   "Writes that failed because the migration's target primary "
                                   "did not take them.");
  former_primary_holds_ =
      r.AddCounter("kvstore_replication_former_primary_holds_total",
                   "Writes held after dropping a demoted former primary, until its lease "
                   "(and so its fence page) must have expired.");
  repairs_ = r.AddCounter("kvstore_replication_unsettled_repairs_total",
                          "Keys whose write ended unknown that this primary sent its own state "
                          "of again before the shard's next write.");
  imported_ = r.AddCounter("kvstore_migration_imported_writes_total",
                           "Imported writes and copied entries this target primary replicated "
                           "and installed.");
}

HandoffMutex& Replicator::StripeOf(absl::string_view key) {
  return stripes_[absl::Hash<absl::string_view>{}(key) % kStripes];
}

absl::Mutex& Replicator::SendOrder(uint32_t shard_id) {
  return send_order_[shard_id % kSendOrderLocks];
}

HandoffSharedMutex& Replicator::ShardBarrier(uint32_t shard_id) {
  absl::MutexLock lock(&barriers_mu_);
  std::unique_ptr<HandoffSharedMutex>& mu = barriers_[shard_id];
  if (mu == nullptr) mu = std::make_unique<HandoffSharedMutex>();
  return *mu;  // never erased: the reference stays valid
}

int Replicator::FloorOf(const cluster::ClusterMapView& map) const {
  return Floor(map, options_.min_insync_replicas);
}

bool Replicator::Broken(uint32_t shard_id, absl::string_view node_id) {
  absl::MutexLock lock(&broken_mu_);
  return broken_.contains(std::make_pair(shard_id, std::string(node_id)));
}

absl::Status Replicator::Write(absl::string_view key, absl::string_view entry,
                               absl::FunctionRef<absl::Status()> publish) {
  return WriteFrom(key, entry, publish, absl::Now() + options_.replication_timeout, 0, false);
}

absl::Status Replicator::WriteFrom(absl::string_view key, absl::string_view entry,
                                   absl::FunctionRef<absl::Status()> publish, absl::Time deadline,
                                   int first_attempt, bool sent_on) {
  // A RESP loop runs this inside its iteration's batch scope: the writes
  // it holds back go first, since this one may wait (Admit's gate, a
  // former primary's hold) on a round among them (batch_scope.h).
  net::BatchScope::RunDeferred();
  // sent_on is set once an attempt sent the write to a backup, syncing
  // replica or migration target that did not certainly refuse it: from then
  // on the write may surface there (after a failover, say) although this
  // node did not publish it, so any error it ends with leaves its outcome
  // unknown.
  for (int attempt = first_attempt;; ++attempt) {
    bool again = false;
    bool published = false;
    absl::Status s = TryWrite(key, entry, publish, deadline, attempt, &again, &sent_on, &published);
    if (again) {
      // A backup holds a newer map than the one this write was routed on
      // (maps reach nodes at different moments): route it again on ours once
      // ours has caught up, with a new seq; nothing was published.
      absl::SleepFor(absl::Milliseconds(1));
      continue;
    }
    return WriteOutcome(s, sent_on, published);
  }
}

absl::Status Replicator::WriteOutcome(absl::Status s, bool sent_on, bool published) {
  // A delete's kNotFound from the store is its answer (the key was absent,
  // everywhere alike). Any other error, once a target may hold the write,
  // leaves its outcome unknown: the store failing to publish it (its index
  // full) too.
  if (!sent_on || s.ok() || (published && absl::IsNotFound(s))) return s;
  return cluster::OutcomeUnknown(s);
}

bool Replicator::MayWrite(absl::string_view key) {
  return state_->RouteKey(key).kind == Route::Kind::kServe;
}

bool Replicator::WaitsForPeers(absl::string_view key) {
  const Route route = state_->RouteKey(key);
  if (route.kind == Route::Kind::kReconciling) return true;
  if (route.kind != Route::Kind::kServe) return false;  // refused without a round
  return route.shard->replicas_size() > 1 || route.shard->syncing_size() > 0 ||
         route.migration != nullptr;
}

absl::Status Replicator::TryWrite(absl::string_view key, absl::string_view entry,
                                  absl::FunctionRef<absl::Status()> publish, absl::Time deadline,
                                  int attempt, bool* again, bool* sent_on, bool* published) {
  // A held lead (kReconciling) is served here: Admit() waits for the
  // reconcile, as the gate of a write of the shard.
  Route first = state_->RouteKey(key);
  if (first.kind != Route::Kind::kServe && first.kind != Route::Kind::kReconciling) {
    refused_->Increment();
    return RouteStatus(first, RefusalAddress::kResp);
  }
  const uint32_t shard_id = first.shard->shard_id();
  // Routed again inside the barrier: BeginSync/PromoteSyncing wait for
  // every write routed on a map older than the one they checked.
  HandoffReaderLock barrier(&ShardBarrier(shard_id));
  Route route = state_->RouteKey(key);
  if (route.kind != Route::Kind::kServe && route.kind != Route::Kind::kReconciling) {
    refused_->Increment();
    return RouteStatus(route, RefusalAddress::kResp);
  }
  if (route.shard->shard_id() != shard_id) {
    *again = attempt < 3;  // the slot changed shards meanwhile
    return cluster::ToStatus(
        cluster::Refusal::ClusterDown(route.slot, "the key's slot keeps changing shards; retry"));
  }
  const v1::Shard& shard = *route.shard;
  const cluster::ClusterMapView& map = *route.map;
  if (absl::Status floor = BelowFloor(map, shard, route.slot, options_.min_insync_replicas);
      !floor.ok()) {
    refused_->Increment();
    return floor;
  }
  KV_RETURN_IF_ERROR(Admit(map, shard, route.slot, deadline));
  // A write of a COPYING slot goes to the migration's target primary too.
  const v1::Migration* migration = route.migration;
  if (migration != nullptr &&
      (migration->state() != v1::MIGRATION_COPYING || migration->source_shard() != shard_id)) {
    migration = nullptr;
  }
  const v1::ClusterNode* target = nullptr;
  std::optional<HandoffReaderLock> target_barrier;
  if (migration != nullptr) {
    const v1::Shard* t = map.ShardById(migration->target_shard());
    target = t != nullptr ? map.Primary(*t) : nullptr;
    if (target == nullptr) {
      refused_->Increment();
      return cluster::ToStatus(cluster::Refusal::TryAgain(
          route.slot,
          absl::StrCat("migration target shard ", migration->target_shard(), " has no primary")));
    }
    // Leading both shards: the local import runs under our locks, so take
    // the target's barrier now, in the lock order (source, target, stripe).
    if (target->node_id() == state_->self()) {
      target_barrier.emplace(&ShardBarrier(migration->target_shard()));
    }
  }
  HandoffLock stripe(&StripeOf(key));
  KV_RETURN_IF_ERROR(KV_FAILPOINT("replicator/before-round"));
  Round r;
  auto round = [&] {
    r.replicated = ReplicateRound(map, shard, key, entry, deadline, &r.stale, &r.held);
  };
  if (migration == nullptr) {
    round();
  } else {
    r.imported = ForwardToTarget(map, *migration, *target, key, entry, deadline, round);
    // The target may hold it unless it certainly refused it.
    r.held = r.held || !cluster::CertainlyNoEffect(r.imported);
  }
  if (r.held) *sent_on = true;
  absl::Status s = Conclude(route, target, r, deadline, again, publish, published);
  NoteOutcome(shard_id, key, r.held, *published, s);
  return s;
}

absl::Status Replicator::Conclude(const Route& route, const v1::ClusterNode* target, const Round& r,
                                  absl::Time deadline, bool* again,
                                  absl::FunctionRef<absl::Status()> publish, bool* published) {
  if (r.stale && absl::Now() < deadline) {
    *again = true;
    return r.replicated;
  }
  if (r.stale) {
    // A peer's kind is not for clients: to them the shard is not serving.
    refused_->Increment();
    return cluster::ToStatus(cluster::Refusal::ClusterDown(
        route.slot, absl::StrCat("a replica of shard ", route.shard->shard_id(),
                                 " holds a newer map (", r.replicated.message(), "); retry")));
  }
  if (!r.replicated.ok()) {
    refused_->Increment();
    return r.replicated;
  }
  if (!r.imported.ok()) {
    forward_failures_->Increment();
    refused_->Increment();
    if (MapBehind(r.imported) && absl::Now() < deadline) {
      *again = true;  // the target's side is about to catch up
    }
    return cluster::ToStatus(cluster::Refusal::TryAgain(
        route.slot, absl::StrCat("migration target ", target->node_id(),
                                 " unavailable: ", r.imported.message())));
  }
  KV_RETURN_IF_ERROR(KV_FAILPOINT("replicator/after-backups-installed"));
  // The replication round may have outlasted the lease deadline: a node
  // that may have been replaced must not publish (§19.5).
  if (!state_->Serving()) {
    refused_->Increment();
    return RouteStatus(Route(), RefusalAddress::kResp);
  }
  writes_->Increment();
  *published = true;
  return publish();
}

absl::Status Replicator::ReplicateRound(const cluster::ClusterMapView& map, const v1::Shard& shard,
                                        absl::string_view key, absl::string_view entry,
                                        absl::Time deadline, bool* stale, bool* held, bool repair) {
  const uint32_t shard_id = shard.shard_id();
  former_.Observe(map);
  Targets targets = TargetsOf(map, shard);
  if (targets.empty()) {
    seqs_->Next(shard_id);  // keeps this node's applied_seq moving
    HoldForFormerPrimary(shard_id);
    return absl::OkStatus();
  }
  v1::ReplicateRequest req = MakeRequest(map, shard, key, entry, repair);
  const absl::Time start = absl::Now();
  Forward(req, targets, deadline);
  latency_->Observe(absl::Now() - start);
  return AfterForward(map, shard, targets, stale, held);
}

Replicator::Targets Replicator::TargetsOf(const cluster::ClusterMapView& map,
                                          const v1::Shard& shard) {
  Targets targets;
  for (int i = 1; i < shard.replicas_size(); ++i) {
    targets.push_back(Target{map.Node(shard.replicas(i)), true, absl::OkStatus()});
  }
  for (const std::string& id : shard.syncing()) {
    targets.push_back(Target{map.Node(id), false, absl::OkStatus()});
  }
  return targets;
}

v1::ReplicateRequest Replicator::MakeRequest(const cluster::ClusterMapView& map,
                                             const v1::Shard& shard, absl::string_view key,
                                             absl::string_view entry, bool repair) {
  // Its seq: Forward() takes it.
  return RequestOf(WriteOf(map, shard, key, entry, repair));
}

ReplicateWrite Replicator::WriteOf(const cluster::ClusterMapView& map, const v1::Shard& shard,
                                   absl::string_view key, absl::string_view entry,
                                   bool repair) const {
  const v1::ClusterNode* self = map.Node(state_->self());
  return WriteOf(shard, self != nullptr ? self->incarnation() : 0, key, entry, repair);
}

ReplicateWrite Replicator::WriteOf(const v1::Shard& shard, uint64_t self_incarnation,
                                   absl::string_view key, absl::string_view entry,
                                   bool repair) const {
  ReplicateWrite w;
  w.commit.shard_id = shard.shard_id();
  w.commit.shard_epoch = shard.shard_epoch();
  w.op = entry.empty() ? v1::REPLICA_OP_DELETE : v1::REPLICA_OP_PUT;
  w.commit.is_delete = entry.empty();
  w.commit.key = key;
  w.commit.entry = entry;
  w.commit.primary_node_id = state_->self();
  w.commit.primary_incarnation = self_incarnation;
  w.resent_after_rdma = repair;
  return w;
}

absl::Status Replicator::AfterForward(const cluster::ClusterMapView& map, const v1::Shard& shard,
                                      const Targets& targets, bool* stale, bool* held) {
  for (const Target& t : targets) *held = *held || t.MayHold();
  for (const Target& t : targets) {
    if (cluster::IsRefusal(t.status, cluster::RefusalKind::kStaleShardEpoch)) {
      *stale = true;
      return t.status;
    }
  }
  absl::Status failures = HandleFailures(shard, targets, Floor(map, options_.min_insync_replicas));
  if (!failures.ok()) return failures;
  HoldForFormerPrimary(shard.shard_id());
  return absl::OkStatus();
}

void Replicator::HoldForFormerPrimary(uint32_t shard_id) {
  if (former_.AwaitHold(shard_id)) former_primary_holds_->Increment();
}

absl::Status Replicator::ForwardToTarget(const cluster::ClusterMapView& map,
                                         const v1::Migration& migration,
                                         const v1::ClusterNode& target, absl::string_view key,
                                         absl::string_view entry, absl::Time deadline,
                                         absl::FunctionRef<void()> meanwhile) {
  v1::ImportWriteRequest req;
  req.set_migration_id(migration.id());
  req.set_map_epoch(map.epoch());
  req.set_source_node_id(state_->self());
  if (const v1::ClusterNode* self = map.Node(state_->self())) {
    req.set_source_incarnation(self->incarnation());
  }
  req.set_op(entry.empty() ? v1::REPLICA_OP_DELETE : v1::REPLICA_OP_PUT);
  req.set_key(key.data(), key.size());
  req.set_entry(entry.data(), entry.size());
  forwarded_->Increment();
  if (target.node_id() != state_->self()) return ForwardImport(req, target, deadline, meanwhile);
  absl::Status s = local_import_
                       ? local_import_(req)
                       : cluster::ToStatus(cluster::Refusal::ClusterDown(
                             "this node cannot import (no importer)"));  // nothing was sent
  meanwhile();
  return s;
}

absl::Status Replicator::ForwardImport(const v1::ImportWriteRequest& req,
                                       const v1::ClusterNode& node, absl::Time deadline,
                                       absl::FunctionRef<void()> meanwhile) {
  // Shared with the callback, which may run after a waiter has woken.
  struct Call {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  for (bool first = true;; first = false) {
    auto call = std::make_shared<Call>();
    peers_->StartImportWrite(node, req, deadline, [call](absl::Status s) {
      absl::MutexLock lock(&call->mu);
      call->status = std::move(s);
      call->done = true;
    });
    if (first) meanwhile();  // the Replicate round runs while this is in flight
    absl::Status s;
    {
      absl::MutexLock lock(&call->mu);
      call->mu.Await(absl::Condition(&call->done));
      s = call->status;
    }
    if (!MapBehind(s) || absl::Now() + absl::Milliseconds(2) >= deadline) return s;
    absl::SleepFor(absl::Milliseconds(2));
  }
}

void Replicator::DrainShard(uint32_t shard_id) {
  HandoffWriterLock barrier(&ShardBarrier(shard_id));
}

absl::Status Replicator::ImportWrite(uint32_t target_shard, absl::string_view key,
                                     absl::string_view entry,
                                     absl::FunctionRef<absl::StatusOr<bool>()> admit,
                                     absl::FunctionRef<absl::Status()> install, bool locks_held) {
  const absl::Time deadline = absl::Now() + options_.replication_timeout;
  std::optional<HandoffReaderLock> barrier;
  std::optional<HandoffLock> stripe;
  if (!locks_held) {
    barrier.emplace(&ShardBarrier(target_shard));
    stripe.emplace(&StripeOf(key));
  }
  auto map = state_->map();
  const v1::Shard* shard = map != nullptr ? map->ShardById(target_shard) : nullptr;
  if (shard == nullptr || shard->replicas().empty() || shard->replicas(0) != state_->self()) {
    return absl::FailedPreconditionError(absl::StrCat("not the primary of shard ", target_shard,
                                                      " in map epoch ", state_->map_epoch()));
  }
  if (absl::Status floor =
          BelowFloor(*map, *shard, cluster::KeySlot(key), options_.min_insync_replicas);
      !floor.ok()) {
    return floor;
  }
  if (!gate_.AwaitReady(*map, target_shard, deadline)) {
    return cluster::ToStatus(cluster::Refusal::TryAgain(
        cluster::KeySlot(key),
        absl::StrCat("shard ", target_shard, " is reconciling its replicas after a new primary")));
  }
  absl::StatusOr<bool> go = admit();
  if (!go.ok()) return go.status();
  if (!*go) return absl::OkStatus();
  bool stale = false;
  bool held = false;
  absl::Status s = ReplicateRound(*map, *shard, key, entry, deadline, &stale, &held);
  if (stale) {
    s = cluster::ToStatus(cluster::Refusal::MapBehind(
        absl::StrCat("a replica of shard ", target_shard, " has a newer map (", s.message(), ")")));
  } else if (s.ok() && !state_->Serving()) {
    s = RouteStatus(Route(), RefusalAddress::kResp);
  } else if (s.ok()) {
    imported_->Increment();
    s = install();
  }
  // The source passes this on to its client: honestly, as Write() does.
  return held ? cluster::OutcomeUnknown(s) : s;
}

absl::Status Replicator::HandleFailures(const v1::Shard& shard, const Targets& targets, int floor) {
  int failed = 0;
  for (const Target& t : targets) failed += t.in_sync && !t.status.ok() ? 1 : 0;
  // Dropping them all would leave fewer in-sync copies than the floor: keep
  // every one (the write is not acknowledged; the controller replaces a
  // backup that is dead, a live one answers again once the fault heals).
  const bool keep = shard.replicas_size() - failed < floor;
  for (const Target& t : targets) {
    if (t.status.ok()) continue;
    backup_failures_->Increment();
    const std::string id = t.node != nullptr ? t.node->node_id() : std::string("?");
    if (!t.in_sync) {
      // It does not gate acknowledgements, but it no longer holds the
      // shard: its ReportInSync is refused until it copies again.
      {
        absl::MutexLock lock(&broken_mu_);
        broken_.insert(std::make_pair(shard.shard_id(), id));
      }
      syncing_broken_->Increment();
      LOG(WARNING) << "syncing replica " << id << " of shard " << shard.shard_id()
                   << " missed a write (" << t.status << "); it must copy again";
      continue;
    }
    if (keep) continue;
    LOG(WARNING) << "backup " << id << " of shard " << shard.shard_id() << " failed a write ("
                 << t.status << "); dropping it from the in-sync set";
    absl::Status s = editor_->RemoveReplica(shard.shard_id(), id);
    if (s.ok()) {
      isr_shrinks_->Increment();
      if (t.node != nullptr) former_.Dropped(shard.shard_id(), *t.node);
      continue;
    }
    // A concurrent write may have dropped it already: fine as long as this
    // node still leads the shard and the backup is out of the in-sync set.
    auto map = state_->map();
    const v1::Shard* now = map != nullptr ? map->ShardById(shard.shard_id()) : nullptr;
    const bool dropped = now != nullptr && !now->replicas().empty() &&
                         now->replicas(0) == state_->self() && !Contains(now->replicas(), id);
    if (!dropped) {
      return cluster::ToStatus(cluster::Refusal::ClusterDown(absl::StrCat(
          "cannot drop failed backup ", id, " of shard ", shard.shard_id(), ": ", s.message())));
    }
    if (t.node != nullptr) former_.Dropped(shard.shard_id(), *t.node);
  }
  if (!keep) return absl::OkStatus();
  if (std::none_of(targets.begin(), targets.end(), [](const Target& t) { return t.MayHold(); })) {
    return NothingStored(shard, targets, floor);
  }
  // The first failure's status: why, for whoever reads the log.
  absl::Status why;
  for (const Target& t : targets) {
    if (t.in_sync && !t.status.ok()) {
      why = t.status;
      break;
    }
  }
  LOG_EVERY_N(WARNING, 100) << failed << " in-sync backup(s) of shard " << shard.shard_id()
                            << " failed a write (" << why
                            << "); dropping them would go below --min_insync_replicas=" << floor
                            << ": the shard acknowledges no write until they answer";
  return cluster::OutcomeUnknown(cluster::ToStatus(cluster::Refusal::ClusterDown(
      absl::StrCat("shard ", shard.shard_id(),
                   ": a backup failed and the in-sync set may not shrink below ", floor))));
}

}  // namespace server
}  // namespace kvstore
