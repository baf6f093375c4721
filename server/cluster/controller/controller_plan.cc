// Copyright 2026 The kvstore Authors.

#include "server/cluster/controller/controller_plan.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cluster/cluster_map.h"
#include "glog/logging.h"
#include "server/cluster/controller/controller_plan_util.h"

namespace kvstore {
namespace server {
namespace {

using plan_util::InShard;
using plan_util::IsDraining;
using plan_util::NamedNodes;
using plan_util::RebuildNodes;
using plan_util::RecordOf;
using plan_util::RemoveFrom;

// Equal as the map uses them: addresses and incarnations, in any order.
// applied_map_epoch changes on every map install and must not by itself
// cause another map.
bool SameRecords(const google::protobuf::RepeatedPtrField<v1::ClusterNode>& a,
                 const google::protobuf::RepeatedPtrField<v1::ClusterNode>& b) {
  if (a.size() != b.size()) return false;
  std::map<std::string, const v1::ClusterNode*> by_id;
  for (const v1::ClusterNode& n : a) by_id[n.node_id()] = &n;
  for (const v1::ClusterNode& n : b) {
    auto it = by_id.find(n.node_id());
    if (it == by_id.end()) return false;
    const v1::ClusterNode& o = *it->second;
    if (o.incarnation() != n.incarnation() || o.control_address() != n.control_address() ||
        o.resp_address() != n.resp_address() || o.metrics_address() != n.metrics_address() ||
        o.replication_address() != n.replication_address()) {
      return false;
    }
  }
  return true;
}

// The candidate with the highest applied seq; ties and unknowns go by list
// order (a candidate that answered beats one that did not). Every in-sync
// replica holds every acknowledged write, so any candidate is safe; the
// highest seq also keeps writes that were in flight.
std::string BestCandidate(const std::vector<std::string>& candidates, const MemberSet& members,
                          uint32_t shard_id, const AppliedSeqFn& applied_seq, bool* any_answered) {
  std::string best;
  uint64_t best_seq = 0;
  *any_answered = false;
  for (const std::string& id : candidates) {
    auto member = members.find(id);
    if (member == members.end()) continue;
    absl::StatusOr<uint64_t> seq = applied_seq(member->second, shard_id);
    if (!seq.ok()) {
      LOG(WARNING) << "controller: ReplicaStatus of " << id << " for shard " << shard_id
                   << " failed: " << seq.status();
      continue;
    }
    if (!*any_answered || *seq > best_seq) {
      best = id;
      best_seq = *seq;
      *any_answered = true;
    }
  }
  return *any_answered ? best : candidates.front();
}

// Step 1 of PlanNext: every dead node leaves the map.
std::optional<PlanStep> RemoveDead(const v1::ClusterMap& current, const MemberSet& members,
                                   const AppliedSeqFn& applied_seq) {
  std::set<std::string> dead;
  for (const std::string& id : NamedNodes(current)) {
    if (!IsAliveIn(current, members, id)) dead.insert(id);
  }
  if (dead.empty()) return std::nullopt;
  PlanStep step{current, absl::StrCat("node(s) ", absl::StrJoin(dead, ","), " failed:")};
  for (v1::Shard& shard : *step.map.mutable_shards()) {
    const v1::Shard before = shard;
    if (!shard.replicas().empty() && dead.count(shard.replicas(0)) > 0) {
      std::vector<std::string> candidates;
      for (int i = 1; i < shard.replicas_size(); ++i) {
        if (dead.count(shard.replicas(i)) == 0) candidates.push_back(shard.replicas(i));
      }
      if (candidates.empty()) {
        LOG(ERROR) << "controller: shard " << shard.shard_id() << " (slots "
                   << cluster::FormatSlotRanges(shard) << ") lost every in-sync replica ("
                   << absl::StrJoin(shard.replicas(), ",")
                   << ") and is DOWN until one of them registers again with its copy, or an "
                      "operator accepts the loss (kvctl cluster accept-loss --shard="
                   << shard.shard_id() << ")";
        // Who held every acknowledged write, and which process: only that
        // memory can bring the shard back.
        shard.clear_last_in_sync();
        for (const std::string& id : shard.replicas()) {
          v1::ClusterNode* last = shard.add_last_in_sync();
          last->set_node_id(id);
          if (const v1::ClusterNode* record = RecordOf(current, id)) {
            last->set_incarnation(record->incarnation());
            last->set_process_id(record->process_id());
          }
        }
        shard.clear_replicas();
        shard.clear_syncing();
        absl::StrAppend(&step.what, " shard ", shard.shard_id(), " down;");
      } else {
        bool answered = false;
        const std::string chosen =
            BestCandidate(candidates, members, shard.shard_id(), applied_seq, &answered);
        if (!answered) {
          LOG(WARNING) << "controller: no backup of shard " << shard.shard_id()
                       << " answered ReplicaStatus; promoting " << chosen << " by list order";
        }
        shard.clear_replicas();
        shard.add_replicas(chosen);
        for (const std::string& id : candidates) {
          if (id != chosen) shard.add_replicas(id);
        }
        absl::StrAppend(&step.what, " shard ", shard.shard_id(), " primary ", chosen, ";");
      }
    }
    RemoveFrom(shard.mutable_replicas(), dead);
    RemoveFrom(shard.mutable_syncing(), dead);
    if (shard.replicas_size() != before.replicas_size() ||
        shard.syncing_size() != before.syncing_size() ||
        (shard.replicas_size() > 0 && shard.replicas(0) != before.replicas(0))) {
      shard.set_shard_epoch(shard.shard_epoch() + 1);
    }
  }
  *step.map.mutable_nodes() = RebuildNodes(step.map, members, {});
  return step;
}

// Step 4 of PlanNext: shards below R (replicas + syncing) are filled from
// the live members that are not draining, whether they serve other shards
// or none (a refill after a failover must not wait for the dead node to
// come back). A member whose record lists a copy of the shard goes first
// (a node back from a lease lapse: its delta resync copies only what
// changed), then the member with the fewest roles (ties: node id);
// a node is never twice in one shard. A down shard (no replicas) is left
// alone: an empty primary would answer NOT_FOUND for acknowledged writes
// (RecoverDown or PlanAcceptLoss bring it back). Runs after RemoveDead, so
// every member named by the map is alive here.
std::optional<PlanStep> FillShards(const v1::ClusterMap& current, const MemberSet& members) {
  std::map<std::string, int> roles;  // candidate -> shards naming it
  for (const auto& [id, node] : members) {
    if (!IsDraining(current, id, node.incarnation())) roles[id] = 0;
  }
  if (roles.empty()) return std::nullopt;
  for (const v1::Shard& shard : current.shards()) {
    for (const std::string& id : shard.replicas()) {
      if (roles.count(id) > 0) ++roles[id];
    }
    for (const std::string& id : shard.syncing()) {
      if (roles.count(id) > 0) ++roles[id];
    }
  }
  const std::set<std::string> named = NamedNodes(current);
  const int r = std::max<int>(1, current.replication_factor());
  PlanStep step{current, "placed:"};
  std::vector<int> order(current.shards_size());
  for (int i = 0; i < current.shards_size(); ++i) order[i] = i;
  auto count = [&](int i) {
    return current.shards(i).replicas_size() + current.shards(i).syncing_size();
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return count(a) < count(b); });
  std::set<std::string> placed;  // members that were in no shard before
  bool any = false;
  for (int i : order) {
    v1::Shard& shard = *step.map.mutable_shards(i);
    if (shard.replicas().empty()) continue;
    bool changed = false;
    auto holds_copy = [&](const std::string& id) {
      auto member = members.find(id);
      if (member == members.end()) return false;
      for (const v1::ShardCopy& copy : member->second.copies()) {
        if (copy.shard_id() == shard.shard_id()) return true;
      }
      return false;
    };
    while (shard.replicas_size() + shard.syncing_size() < r) {
      std::string pick;
      for (const auto& [id, n] : roles) {
        if (InShard(shard, id)) continue;
        if (pick.empty() || holds_copy(id) > holds_copy(pick) ||
            (holds_copy(id) == holds_copy(pick) && n < roles[pick])) {
          pick = id;
        }
      }
      if (pick.empty()) break;
      ++roles[pick];
      if (named.count(pick) == 0) placed.insert(pick);
      changed = true;
      shard.add_syncing(pick);
      absl::StrAppend(&step.what, " ", pick, " syncing shard ", shard.shard_id(), ";");
    }
    if (changed) {
      shard.set_shard_epoch(shard.shard_epoch() + 1);
      any = true;
    }
  }
  if (!any) return std::nullopt;
  *step.map.mutable_nodes() = RebuildNodes(step.map, members, placed);
  return step;
}

// Step 5 of PlanNext: draining marks whose incarnation is gone (the node
// stopped, or restarted as a new incarnation) are dropped.
std::optional<PlanStep> PruneDraining(const v1::ClusterMap& current, const MemberSet& members) {
  PlanStep step{current, "draining mark(s) dropped:"};
  step.map.clear_draining();
  for (const v1::ClusterNode& d : current.draining()) {
    auto member = members.find(d.node_id());
    if (member != members.end() && member->second.incarnation() == d.incarnation()) {
      *step.map.add_draining() = d;
    } else {
      absl::StrAppend(&step.what, " ", d.node_id());
    }
  }
  if (step.map.draining_size() == current.draining_size()) return std::nullopt;
  return step;
}

const v1::Shard* ShardWithId(const v1::ClusterMap& map, uint32_t shard_id) {
  for (const v1::Shard& shard : map.shards()) {
    if (shard.shard_id() == shard_id) return &shard;
  }
  return nullptr;
}

bool HasPrimary(const v1::ClusterMap& map, uint32_t shard_id) {
  const v1::Shard* shard = ShardWithId(map, shard_id);
  return shard != nullptr && !shard->replicas().empty();
}

std::string DescribeMigration(const v1::Migration& m) {
  return absl::StrCat("migration ", m.id(), " (slots ", m.slots().start(), "-", m.slots().end(),
                      ", shard ", m.source_shard(), " -> ", m.target_shard(), ", ",
                      v1::MigrationState_Name(m.state()), ")");
}

// Step 3 of PlanNext: migrations with a down source or target shard. One
// PENDING or COPYING is dropped: a down source lost the slots' data (until a
// copy of it returns), a down target what it imported, and a down shard
// must not take part in a copy; the source, if alive, still holds every
// acknowledged write. One in HANDOFF is never handed back to its source: the
// target holds every acknowledged write of the slots (the copy was complete
// and the source refuses their writes) and may have accepted the handoff and
// acknowledged more, which the source never saw. So with the target alive
// (the source down) the slots flip to it here; with the target down the
// migration stays, and routing answers CLUSTERDOWN for its slots until the
// target shard has a primary again (then the source's primary flips it).
std::optional<PlanStep> SettleBrokenMigrations(const v1::ClusterMap& current) {
  PlanStep step{current, "migration(s) dropped or flipped (a shard is down):"};
  step.map.clear_migrations();
  for (const v1::Migration& m : current.migrations()) {
    const bool source_up = HasPrimary(current, m.source_shard());
    const bool target_up = HasPrimary(current, m.target_shard());
    if ((source_up && target_up) || (m.state() == v1::MIGRATION_HANDOFF && !target_up)) {
      *step.map.add_migrations() = m;
      continue;
    }
    v1::Shard* from = nullptr;
    v1::Shard* to = nullptr;
    for (v1::Shard& s : *step.map.mutable_shards()) {
      if (s.shard_id() == m.source_shard()) from = &s;
      if (s.shard_id() == m.target_shard()) to = &s;
    }
    if (m.state() == v1::MIGRATION_HANDOFF && from != nullptr && to != nullptr) {
      cluster::MoveSlots(m.slots(), from, to);
      from->set_shard_epoch(from->shard_epoch() + 1);
      to->set_shard_epoch(to->shard_epoch() + 1);
      LOG(WARNING) << "controller: flipping " << DescribeMigration(m)
                   << ": its source shard is DOWN and the target holds the slots";
      absl::StrAppend(&step.what, " ", m.id(), " (flipped)");
      continue;
    }
    LOG(ERROR) << "controller: dropping " << DescribeMigration(m)
               << ": its source or target shard is DOWN";
    absl::StrAppend(&step.what, " ", m.id());
  }
  if (step.map.migrations_size() == current.migrations_size()) return std::nullopt;
  return step;
}

// Step 9 of PlanNext: one migration at a time. COPYING and HANDOFF belong
// to the source primary; only PENDING -> COPYING is the controller's.
std::optional<PlanStep> StartMigration(const v1::ClusterMap& current) {
  for (const v1::Migration& m : current.migrations()) {
    if (m.state() == v1::MIGRATION_COPYING || m.state() == v1::MIGRATION_HANDOFF) {
      return std::nullopt;
    }
  }
  for (int i = 0; i < current.migrations_size(); ++i) {
    const v1::Migration& m = current.migrations(i);
    if (m.state() != v1::MIGRATION_PENDING) continue;
    if (!HasPrimary(current, m.source_shard()) || !HasPrimary(current, m.target_shard())) continue;
    PlanStep step{current, ""};
    step.map.mutable_migrations(i)->set_state(v1::MIGRATION_COPYING);
    step.what = absl::StrCat("started ", DescribeMigration(step.map.migrations(i)));
    return step;
  }
  return std::nullopt;
}

// The members a new shard may use as backups, as FillShards ranks them:
// alive, not draining, not `exclude`; fewest roles first, ties node id.
std::vector<std::string> RankedBackups(const v1::ClusterMap& current, const MemberSet& members,
                                       const std::string& exclude) {
  const std::set<std::string> named = NamedNodes(current);
  std::map<std::string, int> roles;
  for (const auto& [id, node] : members) {
    if (id == exclude || IsDraining(current, id, node.incarnation())) continue;
    // A member the map names must be the incarnation it names (alive); a
    // member in no shard is alive by its key.
    if (named.count(id) > 0 && !IsAliveIn(current, members, id)) continue;
    roles[id] = 0;
  }
  for (const v1::Shard& shard : current.shards()) {
    for (const std::string& id : shard.replicas()) {
      if (roles.count(id) > 0) ++roles[id];
    }
    for (const std::string& id : shard.syncing()) {
      if (roles.count(id) > 0) ++roles[id];
    }
  }
  std::vector<std::string> out;
  for (const auto& [id, n] : roles) out.push_back(id);
  std::stable_sort(out.begin(), out.end(),
                   [&](const std::string& a, const std::string& b) { return roles[a] < roles[b]; });
  return out;
}

}  // namespace

bool ServesAnyShard(const v1::ClusterMap& map, const std::string& node_id) {
  for (const v1::Shard& shard : map.shards()) {
    if (InShard(shard, node_id)) return true;
  }
  return false;
}

bool IsAliveIn(const v1::ClusterMap& map, const MemberSet& members, const std::string& node_id) {
  auto member = members.find(node_id);
  const v1::ClusterNode* record = RecordOf(map, node_id);
  return member != members.end() && record != nullptr &&
         record->incarnation() == member->second.incarnation();
}

v1::ClusterMap MakeFirstMap(const MemberSet& members, uint32_t replicas,
                            const std::string& cluster_name) {
  std::vector<const v1::ClusterNode*> nodes;
  for (const auto& [id, node] : members) nodes.push_back(&node);
  const uint32_t n = nodes.size();
  const uint32_t per_shard = std::min<uint32_t>(std::max<uint32_t>(replicas, 1), n);
  const std::vector<v1::SlotRange> ranges = cluster::EvenSlotRanges(n);
  v1::ClusterMap map;
  map.set_epoch(1);
  map.set_replication_factor(replicas);
  map.set_cluster_name(cluster_name);
  for (uint32_t i = 0; i < n; ++i) {
    v1::Shard* shard = map.add_shards();
    shard->set_shard_id(i);
    shard->set_shard_epoch(1);
    *shard->add_slots() = ranges[i];
    for (uint32_t k = 0; k < per_shard; ++k) shard->add_replicas(nodes[(i + k) % n]->node_id());
    *map.add_nodes() = *nodes[i];
    map.mutable_nodes(i)->clear_copies();
  }
  return map;
}

std::optional<PlanStep> PlanNext(const v1::ClusterMap& current, const MemberSet& members,
                                 const AppliedSeqFn& applied_seq) {
  std::optional<PlanStep> step = Rejoin(current, members);
  if (!step) step = RemoveDead(current, members, applied_seq);
  if (!step) step = RecoverDown(current, members);
  if (!step) step = SettleBrokenMigrations(current);
  if (!step) step = FillShards(current, members);
  if (!step) step = PruneDraining(current, members);
  if (!step) step = TrimReplicas(current, members);
  if (!step) step = BalanceReplicas(current, members);
  if (!step) {
    auto nodes = RebuildNodes(current, members, {});
    if (!SameRecords(nodes, current.nodes())) {
      step = PlanStep{current, "node records refreshed from member keys"};
      *step->map.mutable_nodes() = std::move(nodes);
    }
  }
  if (!step) step = StartMigration(current);
  if (!step) return std::nullopt;
  step->map.set_epoch(current.epoch() + 1);
  return step;
}

absl::StatusOr<v1::ClusterMap> PlanFailover(const v1::ClusterMap& current, const MemberSet& members,
                                            uint32_t shard_id, const std::string& target,
                                            const AppliedSeqFn& applied_seq) {
  v1::ClusterMap next = current;
  v1::Shard* shard = nullptr;
  for (v1::Shard& s : *next.mutable_shards()) {
    if (s.shard_id() == shard_id) shard = &s;
  }
  if (shard == nullptr) return absl::NotFoundError(absl::StrCat("no shard ", shard_id));
  if (shard->replicas().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("shard ", shard_id, " is down"));
  }
  if (target == shard->replicas(0)) return current;
  std::vector<std::string> backups(shard->replicas().begin() + 1, shard->replicas().end());
  std::string chosen = target;
  if (!target.empty()) {
    if (std::find(backups.begin(), backups.end(), target) == backups.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(target, " is not an in-sync backup of shard ", shard_id));
    }
    if (!IsAliveIn(current, members, target)) {
      return absl::FailedPreconditionError(
          absl::StrCat(target, " is not alive (no member key of the incarnation in the map)"));
    }
  } else {
    std::vector<std::string> alive;
    for (const std::string& id : backups) {
      if (IsAliveIn(current, members, id)) alive.push_back(id);
    }
    if (alive.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", shard_id, " has no alive in-sync backup"));
    }
    bool answered = false;
    chosen = BestCandidate(alive, members, shard_id, applied_seq, &answered);
    if (!answered) {
      return absl::UnavailableError(
          absl::StrCat("no in-sync backup of shard ", shard_id, " answered ReplicaStatus"));
    }
  }
  const std::string old_primary = shard->replicas(0);
  shard->clear_replicas();
  shard->add_replicas(chosen);
  shard->add_replicas(old_primary);
  for (const std::string& id : backups) {
    if (id != chosen) shard->add_replicas(id);
  }
  shard->set_shard_epoch(shard->shard_epoch() + 1);
  next.set_epoch(current.epoch() + 1);
  *next.mutable_nodes() = RebuildNodes(next, members, {});
  return next;
}

absl::StatusOr<v1::ClusterMap> PlanRemoveNode(const v1::ClusterMap& current,
                                              const MemberSet& members, const std::string& node_id,
                                              const AppliedSeqFn& applied_seq) {
  auto member = members.find(node_id);
  const v1::ClusterNode* record = RecordOf(current, node_id);
  if (member == members.end() && record == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no node ", node_id, " (neither a member key nor in the map)"));
  }
  // The mark follows the live incarnation; a node only in the map (its
  // key gone) gets the map's, and the mark is dropped once it leaves.
  const uint64_t incarnation =
      member != members.end() ? member->second.incarnation() : record->incarnation();
  v1::ClusterMap next = current;
  bool changed = false;
  for (v1::Shard& shard : *next.mutable_shards()) {
    if (!InShard(shard, node_id)) continue;
    if (!shard.replicas().empty() && shard.replicas(0) == node_id) {
      std::vector<std::string> alive;
      for (int i = 1; i < shard.replicas_size(); ++i) {
        if (IsAliveIn(current, members, shard.replicas(i))) alive.push_back(shard.replicas(i));
      }
      if (alive.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "removing ", node_id, " would leave shard ", shard.shard_id(),
            " without an in-sync replica (", node_id,
            " is its primary and it has no alive in-sync backup",
            shard.syncing().empty() ? "" : "; wait until its syncing replicas are in sync",
            "); nothing changed"));
      }
      bool answered = false;
      const std::string chosen =
          BestCandidate(alive, members, shard.shard_id(), applied_seq, &answered);
      if (!answered) {
        return absl::UnavailableError(absl::StrCat("no in-sync backup of shard ", shard.shard_id(),
                                                   " answered ReplicaStatus; nothing changed"));
      }
      std::vector<std::string> backups(shard.replicas().begin() + 1, shard.replicas().end());
      shard.clear_replicas();
      shard.add_replicas(chosen);
      for (const std::string& id : backups) {
        if (id != chosen) shard.add_replicas(id);
      }
      // A live primary stays as the last backup for now: one-sided readers
      // on the older map accept its fence page until it has applied this
      // map, and while it is in sync every write acknowledged meanwhile is
      // in its index too. The caller removes it once it has applied this
      // map (Controller::RemoveNode). A dead one (lease gone) is fenced.
      if (IsAliveIn(current, members, node_id)) shard.add_replicas(node_id);
    } else {
      RemoveFrom(shard.mutable_replicas(), {node_id});
      RemoveFrom(shard.mutable_syncing(), {node_id});
    }
    shard.set_shard_epoch(shard.shard_epoch() + 1);
    changed = true;
  }
  if (!changed && IsDraining(current, node_id, incarnation)) return current;
  next.clear_draining();
  for (const v1::ClusterNode& d : current.draining()) {
    if (d.node_id() != node_id) *next.add_draining() = d;
  }
  v1::ClusterNode* mark = next.add_draining();
  mark->set_node_id(node_id);
  mark->set_incarnation(incarnation);
  next.set_epoch(current.epoch() + 1);
  *next.mutable_nodes() = RebuildNodes(next, members, {});
  return next;
}

absl::StatusOr<v1::ClusterMap> PlanAddNode(const v1::ClusterMap& current, const MemberSet& members,
                                           const std::string& node_id) {
  auto member = members.find(node_id);
  if (member == members.end()) {
    return absl::NotFoundError(
        absl::StrCat("no member ", node_id, " (start it with --etcd so that it registers)"));
  }
  for (const v1::Shard& shard : current.shards()) {
    if (InShard(shard, node_id)) {
      return absl::FailedPreconditionError(
          absl::StrCat(node_id, " already serves shard ", shard.shard_id()));
    }
  }
  if (IsDraining(current, node_id, member->second.incarnation())) {
    return absl::FailedPreconditionError(
        absl::StrCat(node_id, " is draining (remove-node); restart it to use it again"));
  }
  uint32_t shard_id = 0;
  for (const v1::Shard& shard : current.shards()) {
    shard_id = std::max(shard_id, shard.shard_id() + 1);
  }
  v1::ClusterMap next = current;
  v1::Shard* shard = next.add_shards();
  shard->set_shard_id(shard_id);
  shard->set_shard_epoch(1);
  shard->add_replicas(node_id);
  const int r = std::max<int>(1, current.replication_factor());
  for (const std::string& id : RankedBackups(current, members, node_id)) {
    if (shard->replicas_size() >= r) break;
    shard->add_replicas(id);
  }
  next.set_epoch(current.epoch() + 1);
  *next.mutable_nodes() = RebuildNodes(next, members, {node_id});
  return next;
}

absl::StatusOr<v1::ClusterMap> PlanAcceptLoss(const v1::ClusterMap& current,
                                              const MemberSet& members, uint32_t shard_id) {
  v1::ClusterMap next = current;
  v1::Shard* shard = nullptr;
  for (v1::Shard& s : *next.mutable_shards()) {
    if (s.shard_id() == shard_id) shard = &s;
  }
  if (shard == nullptr) return absl::NotFoundError(absl::StrCat("no shard ", shard_id));
  if (!shard->replicas().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("shard ", shard_id, " is not down (primary ",
                                                      shard->replicas(0), "); nothing to accept"));
  }
  const std::vector<std::string> ranked = RankedBackups(current, members, "");
  if (ranked.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no live member can lead shard ", shard_id, "; nothing changed"));
  }
  LOG(ERROR) << "controller: accept-loss of shard " << shard_id << " (slots "
             << cluster::FormatSlotRanges(*shard) << "): " << ranked.front()
             << " becomes its primary EMPTY; every key it held is lost";
  shard->add_replicas(ranked.front());
  shard->clear_last_in_sync();
  shard->set_shard_epoch(shard->shard_epoch() + 1);
  next.set_epoch(current.epoch() + 1);
  *next.mutable_nodes() = RebuildNodes(next, members, {ranked.front()});
  return next;
}

}  // namespace server
}  // namespace kvstore
