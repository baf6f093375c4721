// Copyright 2026 The kvstore Authors.
//
// ReplicaInstaller: the backup's side of a new primary's reconciliation
// (ShardDigest, ReconcileSlots), apart from replication and sync in
// replica_installer.cc.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/slots.h"
#include "common/protocol/layout.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/cluster/replication/replica_installer.h"
#include "server/cluster/replication/slot_digest.h"

namespace kvstore {
namespace server {

absl::Status ReplicaInstaller::CheckReconcile(uint32_t shard_id, uint64_t shard_epoch,
                                              absl::string_view primary, uint64_t incarnation) {
  ReplicaCommit c;
  c.shard_id = shard_id;
  c.shard_epoch = shard_epoch;
  c.primary_node_id = primary;
  c.primary_incarnation = incarnation;
  bool syncing = false;
  absl::Status s = Check(c, &syncing);
  if (s.ok() && syncing) {
    s = absl::FailedPreconditionError(absl::StrCat(state_->self(), " is syncing shard ", shard_id,
                                                   ": it copies the shard instead"));
  }
  if (!s.ok()) refused_->Increment();
  return s;
}

absl::StatusOr<v1::ShardDigestResponse> ReplicaInstaller::ShardDigest(
    const v1::ShardDigestRequest& req) {
  KV_RETURN_IF_ERROR(CheckReconcile(req.shard_id(), req.shard_epoch(), req.primary_node_id(),
                                    req.primary_incarnation()));
  absl::flat_hash_map<uint32_t, uint64_t> digests = DigestSlots(*store_, BitsOf(req.slots()));
  std::vector<uint32_t> slots;
  for (const auto& [slot, digest] : digests) slots.push_back(slot);
  std::sort(slots.begin(), slots.end());
  v1::ShardDigestResponse resp;
  for (uint32_t slot : slots) {
    resp.add_slots(slot);
    resp.add_digests(digests[slot]);
  }
  resp.set_applied_seq(seqs_->Last(req.shard_id()));
  return resp;
}

absl::StatusOr<v1::ReconcileSlotsResponse> ReplicaInstaller::ReconcileSlots(
    const v1::ReconcileSlotsRequest& req) {
  KV_RETURN_IF_ERROR(CheckReconcile(req.shard_id(), req.shard_epoch(), req.primary_node_id(),
                                    req.primary_incarnation()));
  SlotBits slots;
  for (uint32_t slot : req.slots()) {
    if (slot >= cluster::kSlotCount) return absl::InvalidArgumentError("slot out of range");
    slots.set(slot);
  }
  // Every entry is checked before anything changes here.
  absl::flat_hash_set<std::string> keep;
  for (const std::string& entry : req.entries()) {
    auto view = layout::ParseEntry(entry);
    if (!view.ok()) return view.status();
    if (!slots[cluster::KeySlot(view->key)]) {
      return absl::InvalidArgumentError("a reconciled entry is not of the slots listed");
    }
    keep.insert(std::string(view->key));
  }
  // The primary's entries first, then the keys it lacks: at every step each
  // key holds this replica's entry or the primary's.
  v1::ReconcileSlotsResponse resp;
  for (const std::string& entry : req.entries()) {
    KV_RETURN_IF_ERROR(store_->InstallReplica(entry));
    installs_->Increment();
    resp.set_installed(resp.installed() + 1);
  }
  absl::Status deleted = absl::OkStatus();
  ForEachKeyIn(*store_, slots, [&](const std::string& key) {
    if (keep.contains(key) || !deleted.ok()) return;
    deleted = store_->DeleteReplica(key);
    if (deleted.ok()) {
      deletes_->Increment();
      resp.set_deleted(resp.deleted() + 1);
    }
  });
  KV_RETURN_IF_ERROR(deleted);
  LOG(INFO) << "reconciled " << req.slots_size() << " slot(s) of shard " << req.shard_id()
            << " with primary " << req.primary_node_id() << ": " << resp.installed()
            << " installed, " << resp.deleted() << " deleted";
  return resp;
}

}  // namespace server
}  // namespace kvstore
