// Copyright 2026 The kvstore Authors.
//
// SlotImporter: the target primary's side of a slot migration (architecture
// §19.9): the ImportWrite, BeginImport, ImportEntries and AcceptHandoff
// RPCs of proto/kv_cluster.proto.
//
// Every call but ImportEntries is checked against this node's map: it must
// hold the migration COPYING or HANDOFF (AcceptHandoff: HANDOFF), this node
// must lead the migration's target shard and the sender must lead its
// source shard with the incarnation it sent (kFailedPrecondition
// otherwise); a map older than the request's map_epoch answers kUnavailable
// "map behind ..." (the sender retries briefly).
//
// Installing (ImportWrite, each copied entry): Replicator::ImportWrite —
// the key's stripe lock, the target shard's seq, Replicate to the target
// shard's replicas, then KvStore::InstallReplica / DeleteReplica.
//
// Sessions: BeginImport opens a copy session for its migration, replacing
// the previous one. ImportWrite records its key as touched in the current
// session (under the key's stripe lock); ImportEntries of that session
// skips a touched key (the forwarded write is at least as new as the copy)
// and fails with kNotFound "no import session" once its session is not the
// current one (a new copy began, or this process restarted). Session ids
// start from the clock, so a restarted target never matches an old one.
//
// Thread safety: thread-safe.

#ifndef KVSTORE_SERVER_CLUSTER_MIGRATION_SLOT_IMPORTER_H_
#define KVSTORE_SERVER_CLUSTER_MIGRATION_SLOT_IMPORTER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/registry.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/replication/replicator.h"
#include "server/routing/cluster_state.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

class SlotImporter {
 public:
  // None owned; all must outlive the importer. Registers itself as the
  // replicator's local import (the same-node forward). `registry` gets the
  // kvstore_import_* series.
  SlotImporter(KvStore* store, ClusterState* state, Replicator* replicator,
               metrics::Registry* registry);
  // Unregisters the local import; no write may be in flight.
  ~SlotImporter();
  SlotImporter(const SlotImporter&) = delete;
  SlotImporter& operator=(const SlotImporter&) = delete;

  // The RPCs (see the file comment for the errors).
  absl::Status ImportWrite(const v1::ImportWriteRequest& req) { return Import(req, false); }
  absl::StatusOr<v1::BeginImportResponse> BeginImport(const v1::BeginImportRequest& req);
  absl::StatusOr<v1::ImportEntriesResponse> ImportEntries(const v1::ImportEntriesRequest& req);
  absl::Status AcceptHandoff(const v1::AcceptHandoffRequest& req);

 private:
  struct Session {
    uint64_t id = 0;
    absl::Mutex mu;
    absl::flat_hash_set<std::string> touched ABSL_GUARDED_BY(mu);
  };
  // ImportWrite; `locks_held`: the same-node forward, under the source's
  // locks (Replicator::set_local_import).
  absl::Status Import(const v1::ImportWriteRequest& req, bool locks_held);
  // The checks of the file comment; returns the migration (kept alive by
  // `*map`).
  absl::StatusOr<const v1::Migration*> Check(
      uint32_t migration_id, uint64_t map_epoch, absl::string_view source_node_id,
      uint64_t source_incarnation, std::shared_ptr<const cluster::ClusterMapView>* map) const;
  // The current session of a migration; null when none.
  std::shared_ptr<Session> Current(uint32_t migration_id);
  absl::Status Install(absl::string_view key, absl::string_view entry);

  KvStore* const store_;
  ClusterState* const state_;
  Replicator* const replicator_;

  absl::Mutex mu_;
  uint64_t next_session_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);

  metrics::Counter* writes_;
  metrics::Counter* entries_;
  metrics::Counter* skipped_;
  metrics::Counter* sessions_begun_;
  metrics::Counter* refused_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MIGRATION_SLOT_IMPORTER_H_
