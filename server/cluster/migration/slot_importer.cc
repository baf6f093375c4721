// Copyright 2026 The kvstore Authors.

#include "server/cluster/migration/slot_importer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"
#include "common/failpoint/failpoint.h"
#include "common/protocol/layout.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {
namespace {

bool InRange(const v1::SlotRange& r, absl::string_view key) {
  const uint32_t slot = cluster::KeySlot(key);
  return slot >= r.start() && slot <= r.end();
}

}  // namespace

SlotImporter::SlotImporter(KvStore* store, ClusterState* state, Replicator* replicator,
                           metrics::Registry* registry)
    : store_(store),
      state_(state),
      replicator_(replicator),
      next_session_(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))) {
  metrics::Registry& r = *registry;
  writes_ = r.AddCounter("kvstore_import_writes_total",
                         "Forwarded writes of migrating slots this target primary installed.");
  entries_ = r.AddCounter("kvstore_import_entries_total",
                          "Copied entries of migrating slots this target primary installed.");
  skipped_ = r.AddCounter("kvstore_import_skipped_total",
                          "Copied entries skipped because a forwarded write of the key came "
                          "first in the session.");
  sessions_begun_ = r.AddCounter("kvstore_import_sessions_total",
                                 "Copy sessions begun on this node (BeginImport).");
  refused_ = r.AddCounter("kvstore_import_refused_total",
                          "Import calls refused (map, role, session or entry mismatch).");
  replicator_->set_local_import(
      [this](const v1::ImportWriteRequest& req) { return Import(req, true); });
}

SlotImporter::~SlotImporter() { replicator_->set_local_import(nullptr); }

absl::StatusOr<const v1::Migration*> SlotImporter::Check(
    uint32_t migration_id, uint64_t map_epoch, absl::string_view source_node_id,
    uint64_t source_incarnation, std::shared_ptr<const cluster::ClusterMapView>* out) const {
  auto map = state_->map();
  if (map == nullptr || map->epoch() < map_epoch) {
    return cluster::ToStatus(cluster::Refusal::MapBehind(
        absl::StrCat("epoch ", map ? map->epoch() : 0, " here, ", map_epoch, " sent")));
  }
  if (!state_->Serving()) return RouteStatus(Route(), RefusalAddress::kControl);
  const v1::Migration* m = map->MigrationById(migration_id);
  if (m == nullptr ||
      (m->state() != v1::MIGRATION_COPYING && m->state() != v1::MIGRATION_HANDOFF)) {
    return absl::FailedPreconditionError(
        absl::StrCat("migration ", migration_id, " is not running in map epoch ", map->epoch()));
  }
  const v1::Shard* target = map->ShardById(m->target_shard());
  if (target == nullptr || target->replicas().empty() || target->replicas(0) != state_->self()) {
    return absl::FailedPreconditionError(absl::StrCat(state_->self(), " does not lead shard ",
                                                      m->target_shard(), " in map epoch ",
                                                      map->epoch()));
  }
  const v1::Shard* source = map->ShardById(m->source_shard());
  const v1::ClusterNode* sender = map->Node(source_node_id);
  if (source == nullptr || source->replicas().empty() || source->replicas(0) != source_node_id ||
      sender == nullptr || sender->incarnation() != source_incarnation) {
    return absl::FailedPreconditionError(
        absl::StrCat(source_node_id, " (incarnation ", source_incarnation, ") does not lead shard ",
                     m->source_shard(), " in map epoch ", map->epoch()));
  }
  *out = std::move(map);
  return m;
}

std::shared_ptr<SlotImporter::Session> SlotImporter::Current(uint32_t migration_id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(migration_id);
  return it == sessions_.end() ? nullptr : it->second;
}

absl::Status SlotImporter::Install(absl::string_view key, absl::string_view entry) {
  return entry.empty() ? store_->DeleteReplica(key) : store_->InstallReplica(entry);
}

absl::Status SlotImporter::Import(const v1::ImportWriteRequest& req, bool locks_held) {
  std::shared_ptr<const cluster::ClusterMapView> map;
  auto m = Check(req.migration_id(), req.map_epoch(), req.source_node_id(),
                 req.source_incarnation(), &map);
  absl::Status s = m.status();
  if (s.ok() && !InRange((*m)->slots(), req.key())) {
    s = absl::InvalidArgumentError("the key is not in the migration's slots");
  }
  const bool put = req.op() == v1::REPLICA_OP_PUT;
  if (s.ok() && !put && req.op() != v1::REPLICA_OP_DELETE) {
    s = absl::InvalidArgumentError("unknown replica op");
  }
  if (s.ok() && put) {
    auto view = layout::ParseEntryHeader(req.entry());
    if (!view.ok()) {
      s = view.status();
    } else if (view->key != req.key()) {
      s = absl::InvalidArgumentError("imported entry holds another key");
    }
  }
  if (!s.ok()) {
    refused_->Increment();
    return s;
  }
  const absl::string_view entry = put ? absl::string_view(req.entry()) : absl::string_view();
  s = replicator_->ImportWrite(
      (*m)->target_shard(), req.key(), entry, [] { return absl::StatusOr<bool>(true); },
      [&]() -> absl::Status {
        if (absl::Status s = Install(req.key(), entry); !s.ok()) return s;
        // Under the stripe lock: a copied entry of this key installed after
        // this point is skipped, one installed before was overwritten here.
        if (std::shared_ptr<Session> session = Current(req.migration_id())) {
          absl::MutexLock lock(&session->mu);
          session->touched.insert(req.key());
        }
        return absl::OkStatus();
      },
      locks_held);
  if (s.ok()) {
    writes_->Increment();
  } else {
    refused_->Increment();
  }
  return s;
}

absl::StatusOr<v1::BeginImportResponse> SlotImporter::BeginImport(
    const v1::BeginImportRequest& req) {
  std::shared_ptr<const cluster::ClusterMapView> map;
  auto m = Check(req.migration_id(), req.map_epoch(), req.source_node_id(),
                 req.source_incarnation(), &map);
  if (!m.ok()) {
    refused_->Increment();
    return m.status();
  }
  auto session = std::make_shared<Session>();
  {
    absl::MutexLock lock(&mu_);
    session->id = ++next_session_;
    // Sessions of migrations no longer running are of no use.
    absl::erase_if(sessions_,
                   [&](const auto& kv) { return map->MigrationById(kv.first) == nullptr; });
    sessions_[req.migration_id()] = session;
  }
  sessions_begun_->Increment();
  LOG(INFO) << "import session " << session->id << " of migration " << req.migration_id()
            << " (slots " << (*m)->slots().start() << "-" << (*m)->slots().end() << " from "
            << req.source_node_id() << ") begun";
  v1::BeginImportResponse resp;
  resp.set_session(session->id);
  return resp;
}

absl::StatusOr<v1::ImportEntriesResponse> SlotImporter::ImportEntries(
    const v1::ImportEntriesRequest& req) {
  auto refuse = [this](absl::Status s) {
    refused_->Increment();
    return s;
  };
  std::shared_ptr<Session> session = Current(req.migration_id());
  if (session == nullptr || session->id != req.session()) {
    return refuse(absl::NotFoundError(
        absl::StrCat("no import session ", req.session(), " of migration ", req.migration_id())));
  }
  auto map = state_->map();
  const v1::Migration* m = map != nullptr ? map->MigrationById(req.migration_id()) : nullptr;
  if (m == nullptr ||
      (m->state() != v1::MIGRATION_COPYING && m->state() != v1::MIGRATION_HANDOFF)) {
    return refuse(absl::FailedPreconditionError(
        absl::StrCat("migration ", req.migration_id(), " is not running here")));
  }
  v1::ImportEntriesResponse resp;
  for (const std::string& entry : req.entries()) {
    auto view = layout::ParseEntryHeader(entry);
    if (!view.ok()) return refuse(view.status());
    const absl::string_view key = view->key;
    if (!InRange(m->slots(), key)) {
      return refuse(absl::InvalidArgumentError("a copied key is not in the migration's slots"));
    }
    bool skipped = false;
    absl::Status s = replicator_->ImportWrite(
        m->target_shard(), key, entry,
        [&]() -> absl::StatusOr<bool> {
          if (Current(req.migration_id()) != session) {
            return absl::NotFoundError(
                absl::StrCat("no import session ", req.session(), " (a newer one began)"));
          }
          absl::MutexLock lock(&session->mu);
          skipped = session->touched.contains(key);
          return !skipped;
        },
        [&] { return store_->InstallReplica(entry); }, /*locks_held=*/false);
    if (!s.ok()) return refuse(s);
    if (skipped) {
      resp.set_skipped(resp.skipped() + 1);
      skipped_->Increment();
    } else {
      resp.set_installed(resp.installed() + 1);
      entries_->Increment();
    }
  }
  return resp;
}

absl::Status SlotImporter::AcceptHandoff(const v1::AcceptHandoffRequest& req) {
  KV_RETURN_IF_ERROR(KV_FAILPOINT("slot-importer/before-accept-handoff"));
  std::shared_ptr<const cluster::ClusterMapView> map;
  auto m = Check(req.migration_id(), req.map_epoch(), req.source_node_id(),
                 req.source_incarnation(), &map);
  if (m.ok() && (*m)->state() != v1::MIGRATION_HANDOFF) {
    m = absl::FailedPreconditionError(
        absl::StrCat("migration ", req.migration_id(), " is not in HANDOFF here"));
  }
  if (!m.ok()) {
    refused_->Increment();
    return m.status();
  }
  if (!state_->HandoffAccepted(req.migration_id())) {
    state_->AcceptHandoff(req.migration_id());
    LOG(INFO) << "accepted the handoff of migration " << req.migration_id() << " (slots "
              << (*m)->slots().start() << "-" << (*m)->slots().end() << ") from "
              << req.source_node_id();
  }
  return absl::OkStatus();
}

}  // namespace server
}  // namespace kvstore
