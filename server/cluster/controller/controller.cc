// Copyright 2026 The kvstore Authors.

#include "server/cluster/controller/controller.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_map.h"
#include "common/failpoint/failpoint.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "server/cluster/membership/etcd_keys.h"

namespace kvstore {
namespace server {
namespace {

using etcd::Compare;
using etcd::TxnOp;

// RunOnce() writes at most this many changes before returning: enough for
// any single event (a failure, then a placement, then a refresh).
constexpr int kMaxStepsPerRun = 10;
// Failover() and RemoveNode() retry a map write that lost a race this often.
constexpr int kFailoverAttempts = 5;

Compare ControllerIsOurs(const std::string& key, int64_t token) {
  Compare c;
  c.key = key;
  c.target = Compare::Target::kCreateRevision;
  c.op = Compare::Op::kEqual;
  c.number = token;
  return c;
}

TxnOp GetOp(const std::string& key) {
  TxnOp op;
  op.kind = TxnOp::Kind::kGet;
  op.key = key;
  return op;
}

// Waits `d` on `clock` (a test's ManualClock: until the test advances it).
void PauseFor(const Clock& clock, absl::Duration d) {
  absl::Mutex mu;
  bool never = false;
  absl::MutexLock lock(&mu);
  clock.AwaitUntil(&mu, absl::Condition(&never), clock.Steady() + d);
}

}  // namespace

Controller::Controller(etcd::EtcdClient* etcd, ControllerOptions options, AppliedSeqFn applied_seq)
    : etcd_(etcd),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()),
      applied_seq_(std::move(applied_seq)),
      controller_key_(etcd_keys::ControllerKey(options_.cluster_name)),
      map_key_(etcd_keys::MapKey(options_.cluster_name)),
      departures_(options_.member_ttl) {}

Controller::~Controller() { Stop(); }

void Controller::Start() {
  CHECK(!started_) << "Controller::Start called twice";
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void Controller::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  watch_.reset();
  Resign();
}

std::string Controller::ControllerId() const {
  absl::MutexLock lock(&mu_);
  return controller_id_;
}

void Controller::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

void Controller::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    bool wrote = false;
    absl::Status status = Step(&wrote, /*watch=*/true);
    absl::Duration wait = options_.poll_interval;
    if (!status.ok()) {
      LOG(WARNING) << "controller " << options_.node_id << ": " << status;
      if (etcd::IsLeaseNotFound(status) && options_.on_lease_gone) options_.on_lease_gone();
      // A lost race: the map changed, so there is news to read at once.
      if (absl::IsAborted(status)) continue;
      wait = std::min(wait, options_.retry_interval);
    } else if (wrote) {
      continue;
    }
    // A departure becoming due is news too.
    const absl::Duration until =
        std::min(clock_.Steady() + wait, departures_.NextDue(clock_.Steady()));
    absl::MutexLock lock(&mu_);
    auto woken_or_stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return woken_ || stop_; };
    clock_.AwaitUntil(&mu_, absl::Condition(&woken_or_stopped), until);
    woken_ = false;
  }
}

absl::Status Controller::RunOnce() {
  for (int i = 0; i < kMaxStepsPerRun; ++i) {
    bool wrote = false;
    absl::Status status = Step(&wrote, /*watch=*/false);
    if (absl::IsAborted(status)) continue;
    KV_RETURN_IF_ERROR(status);
    if (!wrote) return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Controller::Step(bool* wrote, bool watch) {
  KV_ASSIGN_OR_RETURN(Snapshot snap, Read());
  if (watch) KV_RETURN_IF_ERROR(EnsureWatch(snap.revision));
  Observe(snap);
  if (!snap.controller.has_value()) {
    KV_ASSIGN_OR_RETURN(bool won, Campaign());
    *wrote = won;  // step again: reconcile from a fresh read
    return absl::OkStatus();
  }
  if (!is_leader_.load()) return absl::OkStatus();
  return Reconcile(snap, wrote);
}

absl::StatusOr<Controller::Snapshot> Controller::Read() {
  Snapshot snap;
  KV_ASSIGN_OR_RETURN(std::vector<etcd::KeyValue> kvs,
                      etcd_->GetPrefix(etcd_keys::Prefix(options_.cluster_name), &snap.revision));
  for (etcd::KeyValue& kv : kvs) {
    if (kv.key == controller_key_) {
      snap.controller = std::move(kv);
    } else if (kv.key == map_key_) {
      snap.map = std::move(kv);
    } else {
      const std::string id = etcd_keys::NodeIdOfMemberKey(options_.cluster_name, kv.key);
      if (id.empty()) continue;
      absl::StatusOr<v1::ClusterNode> node = etcd_keys::DecodeNode(kv.value);
      if (!node.ok()) {
        LOG(WARNING) << "controller: ignoring member key " << kv.key << ": " << node.status();
        continue;
      }
      // The key names the node; the lease is the incarnation when the
      // value does not say.
      node->set_node_id(id);
      if (node->incarnation() == 0) node->set_incarnation(static_cast<uint64_t>(kv.lease));
      snap.members[id] = std::move(*node);
    }
  }
  return snap;
}

void Controller::Observe(const Snapshot& snap) {
  std::string id;
  bool leader = false;
  if (snap.controller.has_value()) {
    const etcd::KeyValue& kv = *snap.controller;
    id = kv.value;
    if (token_.load() != 0 && kv.create_revision == token_.load()) {
      leader = true;
    } else if (kv.value == options_.node_id && options_.lease != 0 && kv.lease == options_.lease) {
      // Our own key from an earlier Controller of this process.
      token_.store(kv.create_revision);
      leader = true;
    }
  }
  if (!leader) token_.store(0);
  if (is_leader_.exchange(leader) && !leader) {
    LOG(WARNING) << "controller: " << options_.node_id << " is no longer the controller ("
                 << (id.empty() ? "none" : id) << " is)";
  }
  absl::MutexLock lock(&mu_);
  controller_id_ = id;
}

absl::StatusOr<bool> Controller::Campaign() {
  TxnOp put;
  put.kind = TxnOp::Kind::kPut;
  put.key = controller_key_;
  put.value = options_.node_id;
  put.lease = options_.lease;
  KV_ASSIGN_OR_RETURN(etcd::TxnResult result,
                      etcd_->Txn({ControllerIsOurs(controller_key_, 0)},
                                 {put, GetOp(controller_key_)}, {GetOp(controller_key_)}));
  const std::string holder = result.gets.empty() ? "" : result.gets[0].value;
  if (!result.succeeded) {
    absl::MutexLock lock(&mu_);
    controller_id_ = holder;
    return false;
  }
  token_.store(result.gets.empty() ? result.revision : result.gets[0].create_revision);
  is_leader_.store(true);
  {
    absl::MutexLock lock(&mu_);
    controller_id_ = options_.node_id;
  }
  LOG(INFO) << "controller: " << options_.node_id << " elected controller of cluster "
            << options_.cluster_name << " (token " << token_.load() << ")";
  return true;
}

absl::Status Controller::Reconcile(const Snapshot& snap, bool* wrote) {
  absl::MutexLock write_lock(&write_mu_);
  if (!snap.map.has_value()) {
    if (snap.members.empty() || snap.members.size() < options_.min_nodes) {
      LOG_EVERY_N(INFO, 20) << "controller: " << snap.members.size() << " of " << options_.min_nodes
                            << " members registered; no map yet";
      return absl::OkStatus();
    }
    v1::ClusterMap map = MakeFirstMap(snap.members, options_.replicas, options_.cluster_name);
    map.set_controller(options_.node_id);
    KV_RETURN_IF_ERROR(WriteMap(map, 0));
    LOG(INFO) << "controller: first map written: " << map.shards_size()
              << " shards, R=" << options_.replicas;
    *wrote = true;
    return absl::OkStatus();
  }
  KV_ASSIGN_OR_RETURN(v1::ClusterMap current, etcd_keys::DecodeMap(snap.map->value));
  if (current.cluster_name() != options_.cluster_name) {
    return absl::FailedPreconditionError(absl::StrCat("the map names cluster '",
                                                      current.cluster_name(), "', not '",
                                                      options_.cluster_name, "'; not touching it"));
  }
  // A departed node stays alive for planning until its own lease deadline
  // has surely passed: no promotion before then.
  const MemberSet members = departures_.Settle(current, snap.members, clock_.Steady());
  std::optional<PlanStep> step = PlanNext(current, members, applied_seq_);
  if (!step.has_value()) return absl::OkStatus();
  step->map.set_controller(options_.node_id);
  KV_RETURN_IF_ERROR(KV_FAILPOINT("controller/before-write-map"));
  KV_RETURN_IF_ERROR(WriteMap(step->map, snap.map->mod_revision));
  LOG(INFO) << "controller: map epoch " << step->map.epoch() << ": " << step->what;
  *wrote = true;
  return absl::OkStatus();
}

absl::Status Controller::WriteMap(v1::ClusterMap map, int64_t read_revision) {
  // Every node placed as syncing is stamped with the shard epoch that
  // placed it (MarkInSync refuses a copy begun before that).
  for (v1::Shard& shard : *map.mutable_shards()) cluster::StampSyncingSince(&shard);
  absl::StatusOr<std::shared_ptr<const cluster::ClusterMapView>> view =
      cluster::ClusterMapView::Build(map);
  if (!view.ok()) {
    return absl::InternalError(
        absl::StrCat("controller planned an invalid map: ", view.status().message()));
  }
  const int64_t token = token_.load();
  if (token == 0) return absl::FailedPreconditionError("not the controller");
  Compare map_unchanged;
  map_unchanged.key = map_key_;
  map_unchanged.target = Compare::Target::kModRevision;
  map_unchanged.op = Compare::Op::kEqual;
  map_unchanged.number = read_revision;
  TxnOp put;
  put.kind = TxnOp::Kind::kPut;
  put.key = map_key_;
  put.value = etcd_keys::EncodeMap(map);
  KV_ASSIGN_OR_RETURN(etcd::TxnResult result,
                      etcd_->Txn({map_unchanged, ControllerIsOurs(controller_key_, token)}, {put},
                                 {GetOp(controller_key_)}));
  if (result.succeeded) return absl::OkStatus();
  if (result.gets.empty() || result.gets[0].create_revision != token) {
    is_leader_.store(false);
    token_.store(0);
    const std::string holder = result.gets.empty() ? "" : result.gets[0].value;
    {
      absl::MutexLock lock(&mu_);
      controller_id_ = holder;
    }
    LOG(WARNING) << "controller: " << options_.node_id
                 << " was deposed; its map write was refused (controller now "
                 << (holder.empty() ? "none" : holder) << ")";
    return absl::FailedPreconditionError("deposed: the controller key is no longer ours");
  }
  return absl::AbortedError(
      absl::StrCat("the map changed since revision ", read_revision, "; re-reading"));
}

absl::Status Controller::EnsureWatch(int64_t revision) {
  bool reset = false;
  {
    absl::MutexLock lock(&mu_);
    reset = watch_broken_;
    watch_broken_ = false;
  }
  if (reset) watch_.reset();  // not under mu_: its thread may be in the callback
  if (watch_ != nullptr) return absl::OkStatus();
  auto on_events = [this](absl::StatusOr<std::vector<etcd::WatchEvent>> events) {
    absl::MutexLock lock(&mu_);
    if (!events.ok()) {
      LOG(WARNING) << "controller: watch ended: " << events.status() << "; re-reading";
      watch_broken_ = true;
    }
    woken_ = true;
  };
  KV_ASSIGN_OR_RETURN(
      watch_, etcd_->Watch(etcd_keys::Prefix(options_.cluster_name), revision + 1, on_events));
  return absl::OkStatus();
}

void Controller::Resign() {
  const int64_t token = token_.exchange(0);
  is_leader_.store(false);
  if (token == 0) return;
  TxnOp del;
  del.kind = TxnOp::Kind::kDelete;
  del.key = controller_key_;
  absl::StatusOr<etcd::TxnResult> result =
      etcd_->Txn({ControllerIsOurs(controller_key_, token)}, {del}, {});
  if (!result.ok()) {
    LOG(WARNING) << "controller: resigning failed (the key goes with our lease): "
                 << result.status();
  } else if (result->succeeded) {
    LOG(INFO) << "controller: " << options_.node_id << " resigned";
  }
}

absl::Status Controller::NotControllerError() {
  KV_ASSIGN_OR_RETURN(std::optional<etcd::KeyValue> kv, etcd_->Get(controller_key_));
  if (!kv.has_value()) return absl::UnavailableError("no controller is elected right now");
  return absl::FailedPreconditionError(
      absl::StrCat("not the controller; the controller is ", kv->value));
}

absl::StatusOr<v1::ClusterMap> Controller::WritePlanned(
    const std::string& what,
    const std::function<absl::StatusOr<v1::ClusterMap>(const v1::ClusterMap&, const MemberSet&)>&
        plan) {
  if (!is_leader_.load()) return NotControllerError();
  for (int attempt = 0; attempt < kFailoverAttempts; ++attempt) {
    absl::MutexLock write_lock(&write_mu_);
    // Leadership is not re-derived from this read on purpose: the write's
    // compare on the token is what decides it.
    KV_ASSIGN_OR_RETURN(Snapshot snap, Read());
    if (!snap.map.has_value()) return absl::FailedPreconditionError("no cluster map yet");
    KV_ASSIGN_OR_RETURN(v1::ClusterMap current, etcd_keys::DecodeMap(snap.map->value));
    KV_ASSIGN_OR_RETURN(v1::ClusterMap next, plan(current, snap.members));
    if (next.epoch() == current.epoch()) return current;  // nothing to change
    next.set_controller(options_.node_id);
    absl::Status status = WriteMap(next, snap.map->mod_revision);
    if (status.ok()) {
      LOG(INFO) << "controller: " << what << " (map epoch " << next.epoch() << ")";
      Wake();  // the loop refills what the change left below R
      return next;
    }
    if (absl::IsFailedPrecondition(status)) return NotControllerError();
    if (!absl::IsAborted(status)) return status;
  }
  return absl::AbortedError(absl::StrCat("the map kept changing; ", what, " not done, try again"));
}

absl::StatusOr<v1::ClusterMap> Controller::Failover(uint32_t shard_id, const std::string& target) {
  return WritePlanned(absl::StrCat("manual failover of shard ", shard_id, " to ",
                                   target.empty() ? "the most advanced backup" : target),
                      [&](const v1::ClusterMap& current, const MemberSet& members) {
                        return PlanFailover(current, members, shard_id, target, applied_seq_);
                      });
}

absl::StatusOr<v1::ClusterMap> Controller::RemoveNode(const std::string& node_id) {
  auto plan = [&](const v1::ClusterMap& current, const MemberSet& members) {
    return PlanRemoveNode(current, members, node_id, applied_seq_);
  };
  KV_ASSIGN_OR_RETURN(
      v1::ClusterMap demoted,
      WritePlanned(absl::StrCat("remove-node ", node_id, " (demoted or drained, marked draining)"),
                   plan));
  if (!ServesAnyShard(demoted, node_id)) return demoted;
  KV_RETURN_IF_ERROR(AwaitMapApplied(demoted, node_id));
  return WritePlanned(absl::StrCat("remove-node ", node_id, " (drained after its demotion)"), plan);
}

absl::Status Controller::AwaitMapApplied(const v1::ClusterMap& map, const std::string& node_id) {
  const v1::ClusterNode* record = nullptr;
  for (const v1::ClusterNode& node : map.nodes()) {
    if (node.node_id() == node_id) record = &node;
  }
  if (record == nullptr || !options_.map_epoch) {
    return absl::FailedPreconditionError(
        absl::StrCat(node_id, " cannot be asked which map it applied; it stays a draining backup"));
  }
  const absl::Duration deadline = clock_.Steady() + options_.demote_confirm_timeout;
  absl::Status last = absl::OkStatus();
  while (clock_.Steady() < deadline) {
    absl::StatusOr<uint64_t> applied = options_.map_epoch(*record);
    if (applied.ok() && *applied >= map.epoch()) return absl::OkStatus();
    last = applied.ok() ? absl::FailedPreconditionError(absl::StrCat("at map epoch ", *applied))
                        : applied.status();
    // A node whose lease is gone is fenced (valid_until passed): it needs
    // no confirmation.
    absl::StatusOr<Snapshot> snap = Read();
    if (snap.ok() && !IsAliveIn(map, snap->members, node_id)) return absl::OkStatus();
    PauseFor(clock_, absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      node_id, " did not confirm map epoch ", map.epoch(), " within ",
      absl::FormatDuration(options_.demote_confirm_timeout), " (last: ", last.ToString(),
      "); it stays a draining backup: run remove-node again"));
}

absl::StatusOr<v1::AddNodeResponse> Controller::AddNode(const std::string& node_id) {
  KV_ASSIGN_OR_RETURN(v1::ClusterMap map,
                      WritePlanned(absl::StrCat("add-node ", node_id, " (a new, empty shard)"),
                                   [&](const v1::ClusterMap& current, const MemberSet& members) {
                                     return PlanAddNode(current, members, node_id);
                                   }));
  v1::AddNodeResponse response;
  // PlanAddNode appends the new shard; WritePlanned never returns the
  // unchanged map for it (PlanAddNode always changes the map).
  if (map.shards_size() > 0) response.set_shard_id(map.shards(map.shards_size() - 1).shard_id());
  *response.mutable_map() = std::move(map);
  return response;
}

absl::StatusOr<v1::AcceptLossResponse> Controller::AcceptLoss(uint32_t shard_id) {
  KV_ASSIGN_OR_RETURN(v1::ClusterMap map,
                      WritePlanned(absl::StrCat("accept-loss of shard ", shard_id,
                                                " (an empty primary: its keys are lost)"),
                                   [&](const v1::ClusterMap& current, const MemberSet& members) {
                                     return PlanAcceptLoss(current, members, shard_id);
                                   }));
  v1::AcceptLossResponse response;
  for (const v1::Shard& shard : map.shards()) {
    if (shard.shard_id() == shard_id && !shard.replicas().empty()) {
      response.set_primary(shard.replicas(0));
    }
  }
  *response.mutable_map() = std::move(map);
  return response;
}

absl::StatusOr<v1::RebalanceResponse> Controller::Rebalance(bool dry_run) {
  std::vector<v1::Migration> planned;
  KV_ASSIGN_OR_RETURN(
      v1::ClusterMap map,
      WritePlanned(
          dry_run ? "rebalance (dry run)" : "rebalance: migrations queued",
          [&](const v1::ClusterMap& current, const MemberSet&) -> absl::StatusOr<v1::ClusterMap> {
            KV_ASSIGN_OR_RETURN(RebalancePlan plan, PlanRebalance(current));
            planned = std::move(plan.planned);  // the last attempt's plan
            if (dry_run) return current;        // same epoch: nothing written
            return std::move(plan.map);
          }));
  v1::RebalanceResponse response;
  *response.mutable_map() = std::move(map);
  for (v1::Migration& m : planned) *response.add_planned() = std::move(m);
  return response;
}

namespace {

// ReplicaStatus of a node through the peer client. Thread-safe.
using ReplicaStatusFn = std::function<absl::StatusOr<v1::ReplicaStatusResponse>(
    const v1::ClusterNode& node, uint32_t shard_id)>;

ReplicaStatusFn MakeGrpcReplicaStatusFn(GrpcAppliedSeqOptions options) {
  return [options](const v1::ClusterNode& node,
                   uint32_t shard_id) -> absl::StatusOr<v1::ReplicaStatusResponse> {
    if (node.control_address().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", node.node_id(), " has no control address"));
    }
    v1::ReplicaStatusRequest request;
    request.set_shard_id(shard_id);
    return options.peers->ReplicaStatus(node, request, absl::Now() + options.deadline);
  };
}

}  // namespace

AppliedSeqFn MakeGrpcAppliedSeqFn(GrpcAppliedSeqOptions options) {
  return [status_of = MakeGrpcReplicaStatusFn(std::move(options))](
             const v1::ClusterNode& node, uint32_t shard_id) -> absl::StatusOr<uint64_t> {
    KV_ASSIGN_OR_RETURN(v1::ReplicaStatusResponse response, status_of(node, shard_id));
    if (response.fenced()) {
      return absl::UnavailableError(absl::StrCat(node.node_id(), " is fenced"));
    }
    return response.applied_seq();
  };
}

MapEpochFn MakeGrpcMapEpochFn(GrpcAppliedSeqOptions options) {
  return [status_of = MakeGrpcReplicaStatusFn(std::move(options))](
             const v1::ClusterNode& node) -> absl::StatusOr<uint64_t> {
    KV_ASSIGN_OR_RETURN(v1::ReplicaStatusResponse response, status_of(node, 0));
    return response.map_epoch();
  };
}

}  // namespace server
}  // namespace kvstore
