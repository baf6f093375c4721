// Copyright 2026 The kvstore Authors.
//
// Replicator's answer to a round whose every target refused the write with
// no effect while the in-sync floor keeps the failed backups (step 4 of
// replicator.h).

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/cluster/refusal.h"
#include "server/cluster/replication/replicator.h"

namespace kvstore {
namespace server {

absl::Status Replicator::NothingStored(const v1::Shard& shard, const Targets& targets, int floor) {
  // Every target refused with no effect: no replica holds the write and this
  // node did not publish it, so the client gets a definite answer (and
  // NoteOutcome marks nothing for repair). A replica that could not store
  // it names its reason; any other clean refusal reads as the shard down.
  for (const Target& t : targets) {
    std::optional<cluster::Refusal> r = cluster::FromStatus(t.status);
    if (!r.has_value() || r->kind != cluster::RefusalKind::kNotStored) continue;
    return cluster::ToStatus(cluster::Refusal::NotStored(
        absl::StrCat(r->detail, " (shard ", shard.shard_id(),
                     "); nothing was stored: the in-sync set may not shrink below ", floor)));
  }
  return cluster::ToStatus(cluster::Refusal::ClusterDown(
      absl::StrCat("shard ", shard.shard_id(),
                   ": a backup refused the write and the in-sync set may not "
                   "shrink below ",
                   floor, "; nothing was stored")));
}

}  // namespace server
}  // namespace kvstore
