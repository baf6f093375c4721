// Copyright 2026 The kvstore Authors.

#include "server/cluster/migration/migration_driver.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/failpoint/failpoint.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/cluster/migration/slot_scan.h"

namespace kvstore {
namespace server {
namespace {

// The target's map is older than the one the request names: it is about
// to install the newer one, so the call is repeated shortly.
bool MapBehind(const absl::Status& s) {
  return cluster::IsRefusal(s, cluster::RefusalKind::kMapBehind);
}

std::string Describe(const v1::Migration& m) {
  return absl::StrCat("migration ", m.id(), " (slots ", m.slots().start(), "-", m.slots().end(),
                      ", shard ", m.source_shard(), " -> ", m.target_shard(), ")");
}

}  // namespace

MigrationDriver::MigrationDriver(KvStore* store, ClusterState* state, Replicator* replicator,
                                 ShardMapEditor* editor, PeerClient* peers,
                                 metrics::Registry* registry, MigrationDriverOptions options)
    : store_(store),
      state_(state),
      replicator_(replicator),
      editor_(editor),
      peers_(peers),
      options_(std::move(options)),
      wake_(std::make_shared<Wake>()) {
  metrics::Registry& r = *registry;
  entries_copied_ = r.AddCounter("kvstore_migration_entries_copied_total",
                                 "Entries this source primary copied to a migration's target.");
  bytes_copied_ = r.AddCounter("kvstore_migration_bytes_copied_total",
                               "Bytes of entries copied to a migration's target.");
  handoffs_ = r.AddCounter("kvstore_migration_handoffs_total",
                           "Migrations this source primary handed off and flipped.");
  failures_ = r.AddCounter("kvstore_migration_failures_total",
                           "Migration steps that failed (retried with backoff).");
  running_id_ = r.AddGauge("kvstore_migration_running_id",
                           "Id of the migration this node drives as source primary; 0: none.");
  running_state_ = r.AddGauge("kvstore_migration_running_state",
                              "State of that migration (2 COPYING, 3 HANDOFF); 0: none.");
  std::shared_ptr<Wake> wake = wake_;
  state_->AddListener([wake](const cluster::ClusterMapView&) {
    absl::MutexLock lock(&wake->mu);
    wake->kicked = true;
  });
  if (options_.poll_interval > absl::ZeroDuration()) thread_ = std::thread([this] { Loop(); });
}

MigrationDriver::~MigrationDriver() {
  {
    absl::MutexLock lock(&wake_->mu);
    wake_->stopping = true;
  }
  calls_.CancelAll();  // a call in flight ends now, not at its deadline
  if (thread_.joinable()) thread_.join();
}

absl::Time MigrationDriver::CallDeadline() const { return absl::Now() + options_.rpc_timeout; }

bool MigrationDriver::Stopping() {
  absl::MutexLock lock(&wake_->mu);
  return wake_->stopping;
}

void MigrationDriver::Loop() {
  absl::Duration backoff = absl::ZeroDuration();
  absl::Time next_try = absl::InfinitePast();
  while (true) {
    {
      absl::MutexLock lock(&wake_->mu);
      auto woken = [](Wake* w)
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu) { return w->stopping || w->kicked; };
      wake_->mu.AwaitWithTimeout(absl::Condition(+woken, wake_.get()), options_.poll_interval);
      if (wake_->stopping) return;
      wake_->kicked = false;
    }
    if (absl::Now() < next_try) continue;
    absl::Status s = Step();
    if (s.ok()) {
      backoff = absl::ZeroDuration();
      continue;
    }
    failures_->Increment();
    backoff = std::clamp(backoff * 2, options_.min_backoff, options_.max_backoff);
    next_try = absl::Now() + backoff;
    LOG(WARNING) << "migration step failed (" << s << "); retrying from the map in " << backoff;
  }
}

absl::Status MigrationDriver::Step() {
  absl::MutexLock step(&step_mu_);
  auto map = state_->map();
  const v1::Migration* m = nullptr;
  if (map != nullptr && state_->Serving()) {
    for (const v1::Migration& mig : map->proto().migrations()) {
      if (mig.state() == v1::MIGRATION_COPYING || mig.state() == v1::MIGRATION_HANDOFF) m = &mig;
    }
  }
  const v1::Shard* source = m != nullptr ? map->ShardById(m->source_shard()) : nullptr;
  if (source == nullptr || source->replicas().empty() || source->replicas(0) != state_->self()) {
    running_id_->Set(0);
    running_state_->Set(0);
    return absl::OkStatus();  // nothing for this node to drive
  }
  running_id_->Set(m->id());
  running_state_->Set(m->state());
  const v1::Shard* target_shard = map->ShardById(m->target_shard());
  const v1::ClusterNode* target = target_shard != nullptr ? map->Primary(*target_shard) : nullptr;
  if (target == nullptr) {
    return absl::UnavailableError(absl::StrCat(Describe(*m), ": the target shard has no primary"));
  }
  if (m->state() == v1::MIGRATION_COPYING) return Copy(*map, *m, *target);
  return Handoff(*map, *m, *target);
}

absl::Status MigrationDriver::Copy(const cluster::ClusterMapView& map, const v1::Migration& m,
                                   const v1::ClusterNode& target) {
  const absl::Time start = absl::Now();
  const v1::Shard* target_shard = map.ShardById(m.target_shard());
  const uint64_t target_epoch = target_shard != nullptr ? target_shard->shard_epoch() : 0;
  // Writes routed on a map without the migration were not forwarded: the
  // copy must read after them.
  replicator_->DrainShard(m.source_shard());
  v1::BeginImportRequest begin;
  begin.set_migration_id(m.id());
  begin.set_map_epoch(map.epoch());
  begin.set_source_node_id(state_->self());
  if (const v1::ClusterNode* self = map.Node(state_->self())) {
    begin.set_source_incarnation(self->incarnation());
  }
  absl::StatusOr<v1::BeginImportResponse> session;
  const absl::Time give_up = absl::Now() + options_.rpc_timeout;
  do {
    if (MapBehind(session.status())) absl::SleepFor(absl::Milliseconds(5));
    session = peers_->BeginImport(target, begin, CallDeadline(), &calls_);
  } while (MapBehind(session.status()) && absl::Now() < give_up);
  if (!session.ok()) return session.status();
  LOG(INFO) << Describe(m) << ": copying to " << target.node_id() << " in session "
            << session->session();

  v1::ImportEntriesRequest batch;
  batch.set_migration_id(m.id());
  batch.set_session(session->session());
  uint64_t batch_bytes = 0, entries = 0, bytes = 0, installed = 0, skipped = 0;
  const absl::Status copied = ScanSlots(
      *store_, *replicator_, SlotsOf(m.slots()),
      [&](std::string entry) {
        if (batch_bytes > 0 && batch_bytes + entry.size() > options_.batch_bytes) {
          if (absl::Status s = SendBatch(target, batch, &installed, &skipped); !s.ok()) return s;
          batch_bytes = 0;
        }
        ++entries;
        bytes += entry.size();
        batch_bytes += entry.size();
        batch.add_entries(std::move(entry));
        return absl::OkStatus();
      },
      [&] { return Stopping(); });
  absl::Status s = copied;
  if (s.ok() && batch.entries_size() > 0) s = SendBatch(target, batch, &installed, &skipped);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(Describe(m), ": copy failed after ", entries,
                                               " entries, ", seconds, " s: ", s.message()));
  }
  LOG(INFO) << Describe(m) << ": copied " << entries << " entries, " << bytes << " bytes to "
            << target.node_id() << " in " << seconds << " s (" << installed << " installed, "
            << skipped << " skipped as newer there)";
  KV_RETURN_IF_ERROR(KV_FAILPOINT("migration/after-copy"));
  // Refused when the target's replica set changed since `map` (a node that
  // joined may lack the copy): this step fails and the next copies again.
  s = editor_->BeginHandoff(m.id(), target_epoch);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("BeginHandoff: ", s.message()));
  LOG(INFO) << Describe(m) << ": HANDOFF";
  return absl::OkStatus();
}

absl::Status MigrationDriver::SendBatch(const v1::ClusterNode& target,
                                        v1::ImportEntriesRequest& batch, uint64_t* installed,
                                        uint64_t* skipped) {
  uint64_t bytes = 0;
  for (const std::string& e : batch.entries()) bytes += e.size();
  absl::StatusOr<v1::ImportEntriesResponse> resp =
      peers_->ImportEntries(target, batch, CallDeadline(), &calls_);
  if (!resp.ok()) return resp.status();
  entries_copied_->Increment(batch.entries_size());
  bytes_copied_->Increment(bytes);
  *installed += resp->installed();
  *skipped += resp->skipped();
  batch.clear_entries();
  return absl::OkStatus();
}

absl::Status MigrationDriver::Handoff(const cluster::ClusterMapView& map, const v1::Migration& m,
                                      const v1::ClusterNode& target) {
  const absl::Time start = absl::Now();
  // This map refuses writes of the slots here (kTryAgain); once the writes routed on the
  // COPYING map are done, the target holds every acknowledged write.
  replicator_->DrainShard(m.source_shard());
  v1::AcceptHandoffRequest req;
  req.set_migration_id(m.id());
  req.set_map_epoch(map.epoch());
  req.set_source_node_id(state_->self());
  if (const v1::ClusterNode* self = map.Node(state_->self())) {
    req.set_source_incarnation(self->incarnation());
  }
  absl::Status s;
  const absl::Time give_up = absl::Now() + options_.rpc_timeout;
  do {
    if (MapBehind(s)) absl::SleepFor(absl::Milliseconds(5));
    s = peers_->AcceptHandoff(target, req, CallDeadline(), &calls_).status();
  } while (MapBehind(s) && absl::Now() < give_up);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(Describe(m), ": ", s.message()));
  KV_RETURN_IF_ERROR(KV_FAILPOINT("migration/after-accept-handoff"));
  state_->MarkHandedOff(m.id());
  s = editor_->CompleteMigration(m.id());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(Describe(m), ": CompleteMigration: ", s.message()));
  }
  handoffs_->Increment();
  running_id_->Set(0);
  running_state_->Set(0);
  LOG(INFO) << Describe(m) << ": handed off to " << target.node_id() << " and flipped in "
            << absl::ToDoubleSeconds(absl::Now() - start) << " s";
  return absl::OkStatus();
}

}  // namespace server
}  // namespace kvstore
