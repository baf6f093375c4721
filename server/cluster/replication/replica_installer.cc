// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replica_installer.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"
#include "common/failpoint/failpoint.h"
#include "common/protocol/layout.h"
#include "common/status_macros.h"
#include "common/sync/thread_name.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {
namespace {

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& ids, absl::string_view id,
              int from = 0) {
  return std::find(ids.begin() + std::min(from, ids.size()), ids.end(), id) != ids.end();
}

// The store publishes nothing when it fails to install (KvStore::
// InstallReplica, CommitReplica): with its pool or index full this replica
// certainly does not hold the write, and says so with a typed refusal of no
// effect, so that its primary need not answer "outcome unknown" nor repair
// the key. Other errors keep their code (a corrupt entry is kDataLoss);
// the primary reads them as "may hold", the safe reading.
absl::Status NotStored(const absl::Status& s, absl::string_view self) {
  if (!absl::IsResourceExhausted(s) || cluster::FromStatus(s).has_value()) return s;
  return cluster::ToStatus(cluster::Refusal::NotStored(absl::StrCat(
      "on replica ", self, ": ", absl::StatusCodeToString(s.code()), ": ", s.message())));
}

}  // namespace

ReplicaInstaller::ReplicaInstaller(KvStore* store, ClusterState* state, ShardSeqs* seqs,
                                   PeerClient* peers, metrics::Registry* registry,
                                   ReplicaInstallerOptions options)
    : store_(store), state_(state), seqs_(seqs), peers_(peers), options_(std::move(options)) {
  metrics::Registry& r = *registry;
  installs_ = r.AddCounter("kvstore_replica_installs_total",
                           "Replicated PUTs this node installed as a backup.");
  deletes_ = r.AddCounter("kvstore_replica_deletes_total",
                          "Replicated DELETEs this node applied as a backup.");
  refused_ = r.AddCounter("kvstore_replica_refused_total",
                          "Replicate calls refused (epoch, sender or role mismatch, bad entry).");
  auto check_refusals = [&r](const char* check) {
    return r.AddCounter("kvstore_replica_check_refusals_total",
                        "Replicated writes refused by a backup's own checks of the sender's "
                        "claims: check=slot (key outside the shard), seq (0 or near wrapping), "
                        "incarnation (not the primary's in this node's map).",
                        {{"check", check}});
  };
  refused_slot_ = check_refusals("slot");
  refused_seq_ = check_refusals("seq");
  refused_incarnation_ = check_refusals("incarnation");
  stale_skipped_ = r.AddCounter("kvstore_replica_stale_skipped_total",
                                "Replicated writes ignored: older than one already applied to the "
                                "key (while syncing), or a replica commit whose seq was resent by "
                                "gRPC after its RDMA link failed.");
  sync_entries_ = r.AddCounter("kvstore_sync_entries_total",
                               "Entries installed from a primary's SyncShard stream.");
  sync_bytes_ = r.AddCounter("kvstore_sync_bytes_total",
                             "Bytes of entries installed from SyncShard streams.");
  syncs_done_ = r.AddCounter("kvstore_syncs_completed_total",
                             "Shard copies that ended with the primary accepting ReportInSync.");
  sync_failures_ = r.AddCounter("kvstore_sync_failures_total",
                                "Shard copy attempts that failed (retried with backoff).");
  sync_slots_equal_ = r.AddCounter(
      "kvstore_sync_slots_equal_total",
      "Slots a shard copy skipped because the copy held here already equalled the primary's "
      "(delta resync).");
  if (options_.sync_poll_interval > absl::ZeroDuration()) {
    sync_thread_ = std::thread([this] {
      NameThread("kv-replica-sync");
      SyncLoop();
    });
  }
}

ReplicaInstaller::~ReplicaInstaller() {
  {
    absl::MutexLock lock(&sync_mu_);
    stopping_ = true;
  }
  calls_.CancelAll();  // a copy in progress ends now
  if (sync_thread_.joinable()) sync_thread_.join();
}

std::shared_ptr<ReplicaInstaller::SyncState> ReplicaInstaller::GetSyncState(uint32_t shard_id) {
  absl::MutexLock lock(&sync_mu_);
  std::shared_ptr<SyncState>& s = syncing_[shard_id];
  if (s == nullptr) s = std::make_shared<SyncState>();
  return s;
}

absl::StatusOr<v1::ReplicateResponse> ReplicaInstaller::Replicate(const v1::ReplicateRequest& req,
                                                                  absl::Time deadline) {
  KV_RETURN_IF_ERROR(Replicate(ViewOf(req), deadline));
  v1::ReplicateResponse resp;
  resp.set_applied_seq(seqs_->Last(req.shard_id()));
  return resp;
}

absl::Status ReplicaInstaller::Replicate(const ReplicateWrite& write, absl::Time deadline) {
  if (write.op != v1::REPLICA_OP_PUT && write.op != v1::REPLICA_OP_DELETE) {
    refused_->Increment();
    return absl::InvalidArgumentError("unknown replica op");
  }
  if (absl::Now() > deadline) {
    refused_->Increment();
    return absl::DeadlineExceededError(
        "replicated write arrived after its deadline: not installed");
  }
  // Over a stream or gRPC the entry arrives in the message: it is copied
  // into the pool.
  return Apply(
      // A pool full of segments in their grace period is waited for, up
      // to the write's deadline, as the primary's own SET waits for it.
      write.commit,
      [&] {
        return store_->InstallReplica(write.entry(), deadline, write.key_hash, write.commit.key);
      },
      write.resent_after_rdma ? Via::kRpcResent : Via::kRpc);
}

absl::Status ReplicaInstaller::Apply(const ReplicaCommit& commit,
                                     absl::FunctionRef<absl::Status()> install, Via via) {
  KV_RETURN_IF_ERROR(KV_FAILPOINT("replica/before-install"));
  bool syncing = false;
  std::shared_ptr<const cluster::ClusterMapView> map;
  absl::Status refusal = Check(commit, &syncing, &map);
  absl::string_view key = commit.key;
  if (refusal.ok() && !commit.is_delete) {
    // A put names its key in its entry; a gRPC request also carries it.
    // The entry may lie anywhere in a batch's frame (or, from RDMA, a
    // lease chunk): read at any alignment.
    auto view = layout::ReadEntryHeader(commit.entry);
    if (!view.ok()) {
      refusal = view.status();
    } else if (!key.empty() && view->key != key) {
      refusal = absl::InvalidArgumentError("replicated entry holds another key");
    } else {
      key = view->key;
    }
  }
  if (refusal.ok()) refusal = CheckWrite(*map, commit, key);
  auto apply = [&]() -> absl::Status {
    absl::Status s = KV_FAILPOINT("replica/install");
    if (s.ok() && commit.is_delete) {
      deletes_->Increment();
      s = store_->DeleteReplica(key);
    } else if (s.ok()) {
      installs_->Increment();
      s = install();
    }
    return NotStored(s, state_->self());
  };
  if (refusal.ok() && syncing) {
    std::shared_ptr<SyncState> sync = GetSyncState(commit.shard_id);
    absl::MutexLock lock(&sync->mu);
    uint64_t& last = sync->key_seq[std::string(key)];
    if (last >= commit.seq) {
      stale_skipped_->Increment();
    } else {
      refusal = apply();
      if (refusal.ok()) {
        last = commit.seq;
        sync->touched.insert(std::string(key));
      }
    }
  } else if (refusal.ok() && via == Via::kRpc &&
             resent_.Superseded(commit.shard_id, key, commit.seq)) {
    // Older than a resend or repair of its key already applied: held up on
    // the wire (a cut that healed). Dropped, as a stale RDMA commit is.
    stale_skipped_->Increment();
  } else if (refusal.ok() && via == Via::kRdma) {
    bool dropped = false;
    refusal = resent_.InstallFromRdma(commit.shard_id, key, commit.seq, apply, &dropped);
    if (dropped) stale_skipped_->Increment();
  } else if (refusal.ok() && via == Via::kRpcResent) {
    refusal = resent_.InstallResent(commit.shard_id, key, commit.seq, apply);
  } else if (refusal.ok()) {
    refusal = apply();
  }
  if (!refusal.ok()) {
    refused_->Increment();
    return refusal;
  }
  seqs_->Applied(commit.shard_id, commit.seq);
  return absl::OkStatus();
}

absl::Status ReplicaInstaller::CheckWrite(const cluster::ClusterMapView& map,
                                          const ReplicaCommit& c, absl::string_view key) const {
  // A primary's seqs start at 1 and grow by one per write: a seq of 0 or
  // one near 2^64 was never taken. Recorded as applied, a huge one would
  // make this replica look newest to the controller and wrap the shard's
  // seqs after a promotion.
  if (c.seq == 0 || c.seq > kMaxReplicaSeq) {
    refused_seq_->Increment();
    return absl::InvalidArgumentError(
        absl::StrCat("replicated write with seq ", c.seq, ", which no primary takes"));
  }
  // The key must be the shard's: else a write "of" one shard would land
  // on keys of another that this node serves (or backs) without that
  // shard's primary, its other replicas or its locks.
  const uint32_t slot = cluster::KeySlot(key);
  const v1::Shard* owner = map.ShardForSlot(slot);
  const v1::Migration* m = map.ActiveMigrationForSlot(slot);
  const bool owned = owner != nullptr && owner->shard_id() == c.shard_id;
  const bool imported = m != nullptr && m->target_shard() == c.shard_id;
  if (!owned && !imported) {
    refused_slot_->Increment();
    return absl::InvalidArgumentError(absl::StrCat("key of slot ", slot,
                                                   " does not belong to shard ", c.shard_id,
                                                   " (nor to a migration into it) in this map"));
  }
  return absl::OkStatus();
}

namespace {

// The last write a thread's Check() passed, with what its map said: the
// writes of a batch share shard, epoch and primary, and their map checks
// (shard lookup, primary's incarnation, this node's place in the shard)
// were a seventh of a backup's instructions per write. Valid only for the
// same installer, node, map object (held, so its address is not reused)
// and write identity; NamesOtherProcess() is asked every time, as it may
// change while the map stays (this node's incarnation may), but with this
// node's record of the held map kept here.
struct CheckMemo {
  const void* installer = nullptr;
  std::shared_ptr<const cluster::ClusterMapView> map;
  std::string self;
  uint32_t shard_id = 0;
  uint64_t shard_epoch = 0;
  std::string primary;
  uint64_t incarnation = 0;
  bool syncing = false;
  const v1::ClusterNode* self_record = nullptr;  // map->Node(self), in `map`

  bool Matches(const void* who, const std::shared_ptr<const cluster::ClusterMapView>& m,
               absl::string_view node, const ReplicaCommit& c) const {
    return installer == who && map == m && map != nullptr && shard_id == c.shard_id &&
           shard_epoch == c.shard_epoch && incarnation == c.primary_incarnation &&
           primary == c.primary_node_id && self == node;
  }
};

thread_local CheckMemo check_memo;

}  // namespace

absl::Status ReplicaInstaller::Check(const ReplicaCommit& c, bool* syncing,
                                     std::shared_ptr<const cluster::ClusterMapView>* used) const {
  auto map = state_->map();
  if (used != nullptr) *used = map;
  if (check_memo.Matches(this, map, state_->self(), c)) {
    if (state_->NamesOtherProcess(check_memo.self_record)) return NamesEarlierLife();
    *syncing = check_memo.syncing;
    return absl::OkStatus();
  }
  const v1::Shard* shard = map != nullptr ? map->ShardById(c.shard_id) : nullptr;
  if (shard == nullptr || shard->shard_epoch() < c.shard_epoch) {
    return cluster::ToStatus(cluster::Refusal::MapBehind(
        absl::StrCat("shard ", c.shard_id, " epoch ", c.shard_epoch,
                     " not in this node's map (epoch ", map ? map->epoch() : 0, ")")));
  }
  if (shard->shard_epoch() > c.shard_epoch) {
    return cluster::ToStatus(cluster::Refusal::StaleShardEpoch(
        absl::StrCat(c.shard_epoch, " < ", shard->shard_epoch(), " of shard ", c.shard_id,
                     "; refresh the map")));
  }
  if (shard->replicas().empty() || shard->replicas(0) != c.primary_node_id) {
    return absl::FailedPreconditionError(
        absl::StrCat(c.primary_node_id, " is not the primary of shard ", c.shard_id, " here"));
  }
  // Always compared (a sender's 0 is no wildcard): the sender must be the
  // life of the primary this map names.
  if (const v1::ClusterNode* p = map->Node(c.primary_node_id);
      p == nullptr || p->incarnation() != c.primary_incarnation) {
    refused_incarnation_->Increment();
    return absl::FailedPreconditionError(absl::StrCat("primary incarnation ", c.primary_incarnation,
                                                      " is not the map's ",
                                                      p != nullptr ? p->incarnation() : 0));
  }
  // A restarted, empty process whose map still names its earlier life
  // must not acknowledge writes as that life's copy of the shard. The same
  // process back from a lease lapse holds that copy: it goes on.
  if (state_->NamesOtherProcess(*map)) return NamesEarlierLife();
  *syncing = Contains(shard->syncing(), state_->self());
  if (!Contains(shard->replicas(), state_->self(), 1) && !*syncing) {
    return absl::FailedPreconditionError(
        absl::StrCat(state_->self(), " is not a replica of shard ", c.shard_id, " here"));
  }
  check_memo.installer = this;
  check_memo.map = std::move(map);
  check_memo.self.assign(state_->self().data(), state_->self().size());
  check_memo.shard_id = c.shard_id;
  check_memo.shard_epoch = c.shard_epoch;
  check_memo.primary.assign(c.primary_node_id.data(), c.primary_node_id.size());
  check_memo.incarnation = c.primary_incarnation;
  check_memo.syncing = *syncing;
  check_memo.self_record = check_memo.map->Node(state_->self());
  return absl::OkStatus();
}

absl::Status ReplicaInstaller::NamesEarlierLife() const {
  return absl::FailedPreconditionError(absl::StrCat("this map names an earlier incarnation of ",
                                                    state_->self(), " (restarted, empty)"));
}

v1::ReplicaStatusResponse ReplicaInstaller::Status(uint32_t shard_id) const {
  v1::ReplicaStatusResponse resp;
  resp.set_applied_seq(seqs_->Last(shard_id));
  if (auto map = state_->map()) {
    resp.set_map_epoch(map->epoch());
    if (const v1::Shard* shard = map->ShardById(shard_id)) {
      resp.set_shard_epoch(shard->shard_epoch());
    }
  }
  resp.set_fenced(!state_->Serving());
  return resp;
}

absl::Status ReplicaInstaller::SyncShardNow(uint32_t shard_id) {
  auto map = state_->map();
  if (map == nullptr) return absl::UnavailableError("no cluster map yet");
  const v1::Shard* shard = map->ShardById(shard_id);
  if (shard == nullptr || !Contains(shard->syncing(), state_->self())) {
    return absl::FailedPreconditionError(
        absl::StrCat(state_->self(), " is not syncing shard ", shard_id));
  }
  const v1::ClusterNode* primary = map->Primary(*shard);
  if (primary == nullptr) {
    return cluster::ToStatus(
        cluster::Refusal::ClusterDown(absl::StrCat("shard ", shard_id, " has no primary")));
  }
  std::shared_ptr<SyncState> sync = GetSyncState(shard_id);
  {
    // Writes applied before this copy begins are older than what the copy
    // will read (the primary copies each key under its stripe lock).
    absl::MutexLock lock(&sync->mu);
    sync->touched.clear();
  }
  // Digests taken after `touched` was cleared: a write installed since is
  // either in them or marked touched (and kept).
  const SlotBits own = OwnCopySlots(*map, *shard);
  const absl::flat_hash_map<uint32_t, uint64_t> digests = DigestSlots(*store_, own);
  const absl::Time start = absl::Now();
  CopyCounts counts;
  absl::Status s = Copy(*shard, *primary, own, digests, *sync, &counts);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!s.ok()) {
    LOG(WARNING) << "copy of shard " << shard_id << " from " << primary->node_id()
                 << " failed after " << counts.entries << " entries, " << counts.bytes << " bytes, "
                 << seconds << " s: " << s;
    return s;
  }
  seqs_->Applied(shard_id, counts.snapshot_seq);
  LOG(INFO) << "copied shard " << shard_id << " from " << primary->node_id() << ": "
            << counts.entries << " entries, " << counts.bytes << " bytes in " << seconds << " s; "
            << counts.slots_resynced << " slot(s) resynced, " << counts.slots_equal
            << " equal to the copy held here (" << digests.size() << " held) (snapshot seq "
            << counts.snapshot_seq << ")";
  KV_RETURN_IF_ERROR(KV_FAILPOINT("replica/before-report-in-sync"));
  v1::ReportInSyncRequest req;
  req.set_shard_id(shard_id);
  req.set_node_id(state_->self());
  if (const v1::ClusterNode* self = map->Node(state_->self())) {
    req.set_incarnation(self->incarnation());
  }
  req.set_shard_epoch(shard->shard_epoch());
  absl::StatusOr<v1::ReportInSyncResponse> resp =
      peers_->ReportInSync(*primary, req, peers_->DefaultDeadline());
  if (!resp.ok()) return resp.status();
  syncs_done_->Increment();
  LOG(INFO) << "shard " << shard_id << " in sync here as of map epoch " << resp->map_epoch();
  return absl::OkStatus();
}

SlotBits ReplicaInstaller::OwnCopySlots(const cluster::ClusterMapView& map,
                                        const v1::Shard& shard) const {
  SlotBits mine = BitsOf(shard.slots());
  // Slots this node imports for a migration's target shard are that
  // shard's copy, not this one's.
  for (const v1::Migration& m : map.proto().migrations()) {
    const v1::Shard* target = map.ShardById(m.target_shard());
    if (m.source_shard() != shard.shard_id() || m.state() == v1::MIGRATION_PENDING ||
        target == nullptr) {
      continue;
    }
    if (!Contains(target->replicas(), state_->self()) &&
        !Contains(target->syncing(), state_->self())) {
      continue;
    }
    for (uint32_t s = m.slots().start(); s <= m.slots().end() && s < cluster::kSlotCount; ++s) {
      mine.reset(s);
    }
  }
  return mine;
}

absl::Status ReplicaInstaller::DropStale(const SlotBits& slots, uint32_t shard_id,
                                         SyncState& sync) {
  if (slots.none()) return absl::OkStatus();
  uint64_t dropped = 0;
  absl::Status s = absl::OkStatus();
  ForEachKeyIn(*store_, slots, [&](const std::string& key) {
    if (!s.ok()) return;
    absl::MutexLock lock(&sync.mu);
    if (sync.touched.contains(key)) return;  // written since this copy began: newer
    s = store_->DeleteReplica(key);
    if (s.ok()) ++dropped;
  });
  KV_RETURN_IF_ERROR(s);
  if (dropped > 0) {
    LOG(INFO) << "dropped " << dropped << " entries of shard " << shard_id
              << " held from before, in the slots the copy resyncs";
  }
  return absl::OkStatus();
}

absl::Status ReplicaInstaller::Copy(const v1::Shard& shard, const v1::ClusterNode& primary,
                                    const SlotBits& own,
                                    const absl::flat_hash_map<uint32_t, uint64_t>& digests,
                                    SyncState& sync, CopyCounts* counts) {
  v1::SyncShardRequest req;
  req.set_shard_id(shard.shard_id());
  req.set_shard_epoch(shard.shard_epoch());
  req.set_node_id(state_->self());
  std::vector<uint32_t> held;
  for (const auto& [slot, digest] : digests) held.push_back(slot);
  std::sort(held.begin(), held.end());
  for (uint32_t slot : held) {
    req.add_held_slots(slot);
    req.add_held_digests(digests.at(slot));
  }
  bool first = true, done = false;
  absl::Time last_log = absl::Now();
  auto on_chunk = [&](const v1::SyncShardChunk& chunk) -> absl::Status {
    if (first) {
      first = false;
      // A primary that lists nothing streams every slot: drop all of ours.
      SlotBits drop = own;
      if (chunk.slots_listed()) {
        drop &= BitsOf(chunk.resync_slots());
        counts->slots_resynced = BitsOf(chunk.resync_slots()).count();
        counts->slots_equal = chunk.slots_equal();
        sync_slots_equal_->Increment(chunk.slots_equal());
      }
      KV_RETURN_IF_ERROR(DropStale(drop, shard.shard_id(), sync));
    }
    for (const std::string& entry : chunk.entries()) {
      auto view = layout::ParseEntryHeader(entry);
      if (!view.ok()) return view.status();
      absl::MutexLock lock(&sync.mu);
      // A key written by Replicate since the copy began holds a value at
      // least as new as the streamed one.
      if (sync.touched.contains(view->key)) continue;
      KV_RETURN_IF_ERROR(store_->InstallReplica(entry));
      ++counts->entries;
      counts->bytes += entry.size();
      sync_entries_->Increment();
      sync_bytes_->Increment(entry.size());
    }
    if (chunk.done()) {
      done = true;
      counts->snapshot_seq = chunk.snapshot_seq();
    }
    if (absl::Now() - last_log > absl::Seconds(5)) {
      last_log = absl::Now();
      LOG(INFO) << "copying shard " << shard.shard_id() << ": " << counts->entries << " entries, "
                << counts->bytes << " bytes so far";
    }
    return absl::OkStatus();
  };
  // No deadline: a large shard takes as long as it takes; the destructor
  // cancels it (calls_).
  absl::Status s = peers_->SyncShard(primary, req, absl::InfiniteFuture(), &calls_, on_chunk);
  if (!s.ok()) return s;
  if (!done) return absl::UnavailableError("SyncShard stream ended before its last chunk");
  return absl::OkStatus();
}

void ReplicaInstaller::SyncLoop() {
  absl::flat_hash_map<uint32_t, absl::Time> next_try;
  absl::flat_hash_map<uint32_t, absl::Duration> backoff;
  while (true) {
    {
      absl::MutexLock lock(&sync_mu_);
      if (sync_mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.sync_poll_interval)) {
        return;
      }
    }
    auto map = state_->map();
    if (map == nullptr) continue;
    std::vector<const v1::Shard*> shards = map->ShardsSyncingOn(state_->self());
    {
      // Forget the sync state of shards no longer syncing here, judged on a
      // map read under the lock: a Replicate reads its map before it takes
      // the lock, so no map it acted on is newer than this one.
      absl::MutexLock lock(&sync_mu_);
      auto now_map = state_->map();
      absl::erase_if(syncing_, [&](const auto& kv) {
        const v1::Shard* s = now_map->ShardById(kv.first);
        return s == nullptr || !Contains(s->syncing(), state_->self());
      });
    }
    // Resent seqs matter while this node holds the shard's copy.
    resent_.Retain([&](uint32_t id) {
      const v1::Shard* s = map->ShardById(id);
      return s != nullptr &&
             (Contains(s->replicas(), state_->self()) || Contains(s->syncing(), state_->self()));
    });
    for (const v1::Shard* shard : shards) {
      const uint32_t id = shard->shard_id();
      const absl::Time now = absl::Now();
      if (now < next_try[id]) continue;
      absl::Status s = SyncShardNow(id);
      absl::Duration& b = backoff[id];
      if (s.ok()) {
        b = absl::ZeroDuration();
        // The map moving this node into the in-sync set is on its way; look
        // again only if it has not come by then.
        next_try[id] = absl::Now() + options_.max_backoff;
        continue;
      }
      sync_failures_->Increment();
      b = std::clamp(b * 2, options_.min_backoff, options_.max_backoff);
      next_try[id] = absl::Now() + b;
      LOG(WARNING) << "sync of shard " << id << " failed (" << s << "); retrying in " << b;
    }
  }
}

}  // namespace server
}  // namespace kvstore
