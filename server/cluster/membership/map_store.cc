// Copyright 2026 The kvstore Authors.

#include "server/cluster/membership/map_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_map.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/cluster/membership/etcd_keys.h"

namespace kvstore {
namespace server {
namespace {

// Removes `id` from `list`; true when it was there.
bool Erase(google::protobuf::RepeatedPtrField<std::string>* list, absl::string_view id) {
  auto it = std::find(list->begin(), list->end(), id);
  if (it == list->end()) return false;
  list->erase(it);
  return true;
}

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& list, absl::string_view id) {
  return std::find(list.begin(), list.end(), id) != list.end();
}

// The last check before a migration leaves COPYING. The copy reached the
// target's replicas by replication, so a node that was in the target shard
// (in sync or syncing) for the whole copy holds it or, having missed a
// write, must copy the shard again before it is in sync; a node that joined
// during the copy may not hold it. Every change of the target's replica
// set bumps its shard_epoch, so an unchanged epoch proves there was no such
// node; a changed one costs a second copy (the source's driver copies
// again), which is rare and safe. This is the last point where a copy can
// be repeated: once the target accepted the handoff it holds writes the
// source never saw. A node that joins the target later (during HANDOFF,
// or syncing when HANDOFF began) receives the migrating slots with its own
// copy of the shard (SyncShard streams them), so the flip needs no check.
absl::Status CheckTargetUnchanged(const v1::ClusterMap& map, const v1::Migration& m,
                                  uint64_t target_shard_epoch) {
  for (const v1::Shard& s : map.shards()) {
    if (s.shard_id() != m.target_shard()) continue;
    if (s.shard_epoch() == target_shard_epoch) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("migration ", m.id(), ": the replicas of target shard ", s.shard_id(),
                     " changed during the copy (shard epoch ", target_shard_epoch, " then, ",
                     s.shard_epoch(), " now); copy again"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("migration ", m.id(), ": target shard ", m.target_shard(), " is gone"));
}

}  // namespace

MapStore::MapStore(etcd::EtcdClient* etcd, ClusterState* state, MapStoreOptions options)
    : etcd_(etcd),
      state_(state),
      options_(std::move(options)),
      map_key_(etcd_keys::MapKey(options_.cluster_name)),
      member_key_(etcd_keys::MemberKey(options_.cluster_name, options_.node_id)) {}

absl::StatusOr<std::optional<StoredMap>> MapStore::Read() const {
  KV_ASSIGN_OR_RETURN(std::optional<etcd::KeyValue> kv, etcd_->Get(map_key_));
  if (!kv.has_value()) return std::optional<StoredMap>();
  KV_ASSIGN_OR_RETURN(v1::ClusterMap map, etcd_keys::DecodeMap(kv->value));
  return std::optional<StoredMap>(StoredMap{std::move(map), kv->mod_revision});
}

absl::Status MapStore::Install(const v1::ClusterMap& map) {
  KV_ASSIGN_OR_RETURN(std::shared_ptr<const cluster::ClusterMapView> view,
                      cluster::ClusterMapView::Build(map));
  state_->Update(std::move(view));
  return absl::OkStatus();
}

absl::Status MapStore::RemoveReplica(uint32_t shard_id, absl::string_view node_id) {
  const std::string id(node_id);
  return Edit(shard_id, "remove replica", [this, id](v1::Shard* shard, bool* changed) {
    if (id == options_.node_id) {
      return absl::FailedPreconditionError(
          absl::StrCat("the primary ", id, " cannot remove itself from shard ", shard->shard_id()));
    }
    // Already gone (another writer removed it): nothing to do.
    *changed = Erase(shard->mutable_replicas(), id) || Erase(shard->mutable_syncing(), id);
    return absl::OkStatus();
  });
}

absl::Status MapStore::MarkInSync(uint32_t shard_id, absl::string_view node_id,
                                  uint64_t incarnation, uint64_t copy_shard_epoch) {
  const std::string id(node_id);
  return EditMap(
      shard_id, "mark in sync",
      [&](v1::ClusterMap* map, v1::Shard* shard, bool* changed) -> absl::Status {
        // Judged on this, the newest map: the reporter may have
        // restarted, or left and been added again, since the map
        // the primary checked it on.
        const v1::ClusterNode* record = nullptr;
        for (const v1::ClusterNode& n : map->nodes()) {
          if (n.node_id() == id) record = &n;
        }
        if (incarnation != 0 && (record == nullptr || record->incarnation() != incarnation)) {
          return absl::FailedPreconditionError(
              absl::StrCat(id, " incarnation ", incarnation, " is not the one map epoch ",
                           map->epoch(), " names; it must copy the shard again"));
        }
        if (Contains(shard->replicas(), id)) {
          *changed = false;  // a repeated report after a lost reply
          return absl::OkStatus();
        }
        auto since = shard->syncing_since().find(id);
        if (copy_shard_epoch != 0 && since != shard->syncing_since().end() &&
            since->second > copy_shard_epoch) {
          return absl::FailedPreconditionError(
              absl::StrCat(id, " was added to shard ", shard->shard_id(), " again at shard epoch ",
                           since->second, ", after its copy began (", copy_shard_epoch,
                           "); it must copy the shard again"));
        }
        if (!Erase(shard->mutable_syncing(), id)) {
          return absl::FailedPreconditionError(absl::StrCat(id, " is not syncing in shard ",
                                                            shard->shard_id(),
                                                            " (it must copy the shard again)"));
        }
        shard->add_replicas(id);
        *changed = true;
        return absl::OkStatus();
      });
}

absl::Status MapStore::Edit(uint32_t shard_id, const char* what, const ShardChange& change) {
  return EditMap(shard_id, what, [&change](v1::ClusterMap*, v1::Shard* shard, bool* changed) {
    return change(shard, changed);
  });
}

absl::StatusOr<uint32_t> MapStore::MigrationSource(uint32_t migration_id, bool* gone) {
  *gone = false;
  KV_ASSIGN_OR_RETURN(std::optional<StoredMap> stored, Read());
  if (!stored.has_value()) return absl::FailedPreconditionError("there is no cluster map yet");
  for (const v1::Migration& m : stored->map.migrations()) {
    if (m.id() == migration_id) return m.source_shard();
  }
  *gone = true;
  return absl::FailedPreconditionError(
      absl::StrCat("migration ", migration_id, " is not in map epoch ", stored->map.epoch()));
}

absl::Status MapStore::BeginHandoff(uint32_t migration_id, uint64_t target_shard_epoch) {
  bool gone = false;
  absl::StatusOr<uint32_t> source = MigrationSource(migration_id, &gone);
  if (!source.ok()) return source.status();
  return EditMap(
      *source, "begin handoff",
      [migration_id, target_shard_epoch](v1::ClusterMap* map, v1::Shard*, bool* changed) {
        for (v1::Migration& m : *map->mutable_migrations()) {
          if (m.id() != migration_id) continue;
          if (m.state() == v1::MIGRATION_HANDOFF) return absl::OkStatus();
          if (m.state() != v1::MIGRATION_COPYING) {
            return absl::FailedPreconditionError(
                absl::StrCat("migration ", migration_id, " is not copying (",
                             v1::MigrationState_Name(m.state()), ")"));
          }
          KV_RETURN_IF_ERROR(CheckTargetUnchanged(*map, m, target_shard_epoch));
          m.set_state(v1::MIGRATION_HANDOFF);
          *changed = true;
          return absl::OkStatus();
        }
        return absl::FailedPreconditionError(absl::StrCat("migration ", migration_id, " is gone"));
      });
}

absl::Status MapStore::CompleteMigration(uint32_t migration_id) {
  bool gone = false;
  absl::StatusOr<uint32_t> source = MigrationSource(migration_id, &gone);
  // Gone: an earlier attempt whose reply was lost already flipped it.
  if (gone) return absl::OkStatus();
  if (!source.ok()) return source.status();
  return EditMap(
      *source, "complete migration",
      [migration_id](v1::ClusterMap* map, v1::Shard* shard, bool* changed) {
        auto* migrations = map->mutable_migrations();
        auto it = std::find_if(migrations->begin(), migrations->end(),
                               [&](const v1::Migration& m) { return m.id() == migration_id; });
        if (it == migrations->end()) return absl::OkStatus();
        if (it->state() != v1::MIGRATION_HANDOFF) {
          return absl::FailedPreconditionError(
              absl::StrCat("migration ", migration_id, " is not in HANDOFF (",
                           v1::MigrationState_Name(it->state()), ")"));
        }
        v1::Shard* target = nullptr;
        for (v1::Shard& s : *map->mutable_shards()) {
          if (s.shard_id() == it->target_shard()) target = &s;
        }
        if (target == nullptr) {
          return absl::FailedPreconditionError(absl::StrCat(
              "migration ", migration_id, ": target shard ", it->target_shard(), " is gone"));
        }
        cluster::MoveSlots(it->slots(), shard, target);
        target->set_shard_epoch(target->shard_epoch() + 1);
        migrations->erase(it);
        *changed = true;
        return absl::OkStatus();
      });
}

absl::Status MapStore::CheckSameLife(const v1::ClusterMap& map) const {
  for (const v1::ClusterNode& n : map.nodes()) {
    if (n.node_id() != options_.node_id) continue;
    // 0: not recorded (maps written by hand or by tests).
    if (n.incarnation() == 0 || n.incarnation() == static_cast<uint64_t>(options_.lease)) break;
    // A process restarted within its earlier life's lease registers once
    // that lease expires, while the map still gives that life its roles:
    // it holds none of their data, and only the controller may replace it.
    return absl::FailedPreconditionError(absl::StrCat(
        "map epoch ", map.epoch(), " names an earlier incarnation of ", options_.node_id, " (",
        absl::Hex(n.incarnation()), "; this process holds lease ", absl::Hex(options_.lease),
        " and none of that life's copies)"));
  }
  return absl::OkStatus();
}

absl::Status MapStore::EditMap(uint32_t shard_id, const char* what, const MapChange& change) {
  absl::MutexLock lock(&edit_mu_);
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    // Checked every attempt: a fenced primary must not change the map.
    if (!state_->Serving()) {
      return absl::UnavailableError(
          absl::StrCat(what, ": node ", options_.node_id, " is not serving (fenced)"));
    }
    KV_ASSIGN_OR_RETURN(std::optional<StoredMap> stored, Read());
    if (!stored.has_value()) return absl::FailedPreconditionError("there is no cluster map yet");
    v1::ClusterMap& map = stored->map;
    // Whatever happens next, this node should route by the newest map.
    KV_RETURN_IF_ERROR(Install(map));
    auto it = std::find_if(map.mutable_shards()->begin(), map.mutable_shards()->end(),
                           [shard_id](const v1::Shard& s) { return s.shard_id() == shard_id; });
    if (it == map.mutable_shards()->end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", shard_id, " is not in map epoch ", map.epoch()));
    }
    v1::Shard* shard = &*it;
    if (shard->replicas().empty() || shard->replicas(0) != options_.node_id) {
      return absl::FailedPreconditionError(absl::StrCat(options_.node_id,
                                                        " is not the primary of shard ", shard_id,
                                                        " in map epoch ", map.epoch()));
    }
    KV_RETURN_IF_ERROR(CheckSameLife(map));
    bool changed = false;
    KV_RETURN_IF_ERROR(change(&map, shard, &changed));
    if (!changed) return absl::OkStatus();
    shard->set_shard_epoch(shard->shard_epoch() + 1);
    for (v1::Shard& s : *map.mutable_shards()) cluster::DropStaleSyncingSince(&s);
    map.set_epoch(map.epoch() + 1);
    // The edited map must still be a valid one before anyone sees it.
    KV_ASSIGN_OR_RETURN(auto view, cluster::ClusterMapView::Build(map));

    if (options_.before_txn) options_.before_txn();
    etcd::Compare same_map;
    same_map.key = map_key_;
    same_map.target = etcd::Compare::Target::kModRevision;
    same_map.number = stored->mod_revision;
    etcd::Compare my_lease;
    my_lease.key = member_key_;
    my_lease.target = etcd::Compare::Target::kLease;
    my_lease.number = options_.lease;
    etcd::TxnOp put;
    put.key = map_key_;
    put.value = etcd_keys::EncodeMap(map);
    etcd::TxnOp get_member;
    get_member.kind = etcd::TxnOp::Kind::kGet;
    get_member.key = member_key_;
    KV_ASSIGN_OR_RETURN(etcd::TxnResult result,
                        etcd_->Txn({same_map, my_lease}, {put}, {get_member}));
    if (result.succeeded) {
      state_->Update(std::move(view));
      LOG(INFO) << "map store: " << what << " in shard " << shard_id << ": map epoch "
                << map.epoch() << ", shard epoch " << shard->shard_epoch();
      return absl::OkStatus();
    }
    // Which compare failed? Without our lease on the member key we are (or
    // will be) replaced: no retry can succeed.
    if (result.gets.empty() || result.gets[0].lease != options_.lease) {
      return absl::UnavailableError(absl::StrCat(what, ": the member key of ", options_.node_id,
                                                 " no longer holds lease ",
                                                 absl::Hex(options_.lease)));
    }
    LOG(INFO) << "map store: " << what << " in shard " << shard_id
              << " lost a race with another map writer (attempt " << attempt << "), re-reading";
  }
  return absl::UnavailableError(absl::StrCat(what, " in shard ", shard_id, ": the map changed ",
                                             options_.max_attempts,
                                             " times under the edit; giving up"));
}

}  // namespace server
}  // namespace kvstore
