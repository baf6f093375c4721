// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/map_history.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvstore {
namespace jepsen {
namespace {

constexpr int kSlots = 16384;
using Ids = google::protobuf::RepeatedPtrField<std::string>;

bool Contains(const Ids& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

const v1::ClusterNode* Record(const v1::ClusterMap& map, const std::string& id) {
  for (const v1::ClusterNode& n : map.nodes()) {
    if (n.node_id() == id) return &n;
  }
  return nullptr;
}

// One process, one memory: the process_id when both records have one (a
// node that re-registered after a lease lapse keeps it under a new
// incarnation), else the incarnation.
bool SameProcess(const v1::ClusterNode* a, const v1::ClusterNode* b) {
  if (a == nullptr || b == nullptr) return false;
  if (!a->process_id().empty() && !b->process_id().empty()) {
    return a->process_id() == b->process_id();
  }
  return a->incarnation() == b->incarnation();
}

std::string Process(const v1::ClusterNode* n) {
  if (n == nullptr) return "(no record)";
  return absl::StrCat(n->node_id(), "/inc ", n->incarnation(),
                      n->process_id().empty() ? "" : "/pid ", n->process_id());
}

const v1::Shard* ShardById(const v1::ClusterMap& map, uint32_t id) {
  for (const v1::Shard& s : map.shards()) {
    if (s.shard_id() == id) return &s;
  }
  return nullptr;
}

const v1::Migration* MigrationById(const v1::ClusterMap& map, uint32_t id) {
  for (const v1::Migration& m : map.migrations()) {
    if (m.id() == id) return &m;
  }
  return nullptr;
}

bool IsDraining(const v1::ClusterMap& map, const std::string& id) {
  for (const v1::ClusterNode& d : map.draining()) {
    if (d.node_id() == id) return true;
  }
  return false;
}

// Owner shard id of every slot; -1 none, -2 more than one (reported by
// CheckMap).
std::vector<int64_t> SlotOwners(const v1::ClusterMap& map) {
  std::vector<int64_t> owners(kSlots, -1);
  for (const v1::Shard& s : map.shards()) {
    for (const v1::SlotRange& r : s.slots()) {
      for (uint32_t slot = r.start(); slot <= r.end() && slot < kSlots; ++slot) {
        owners[slot] = owners[slot] == -1 ? static_cast<int64_t>(s.shard_id()) : -2;
      }
    }
  }
  return owners;
}

bool OwnsSlots(const v1::Shard& s) { return s.slots_size() > 0; }

bool SameSlots(const v1::Shard& a, const v1::Shard& b) {
  if (a.slots_size() != b.slots_size()) return false;
  for (int i = 0; i < a.slots_size(); ++i) {
    if (a.slots(i).start() != b.slots(i).start() || a.slots(i).end() != b.slots(i).end()) {
      return false;
    }
  }
  return true;
}

bool SameList(const Ids& a, const Ids& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

int Rank(v1::MigrationState s) {
  switch (s) {
    case v1::MIGRATION_PENDING:
      return 1;
    case v1::MIGRATION_COPYING:
      return 2;
    case v1::MIGRATION_HANDOFF:
      return 3;
    default:
      return 0;
  }
}

class Checker {
 public:
  Checker(const MapHistoryOptions& options, MapHistoryResult* result)
      : options_(options), result_(result) {}

  void CheckMap(const MapRevision& m);
  void CheckStep(const MapRevision& a, const MapRevision& b);

 private:
  template <typename... Args>
  void Fail(const MapRevision& at, const Args&... what) {
    result_->violations.push_back(
        absl::StrCat("revision ", at.revision, " epoch ", at.map.epoch(), ": ", what...));
  }
  void CheckShardInMap(const MapRevision& m, const v1::Shard& s);
  void CheckMigrationsInMap(const MapRevision& m, const std::vector<int64_t>& owners);
  void CheckShardStep(const MapRevision& a, const MapRevision& b, const v1::Shard& sa,
                      const v1::Shard& sb);
  void CheckPrimaryAndJoins(const MapRevision& a, const MapRevision& b, const v1::Shard& sa,
                            const v1::Shard& sb);
  void CheckDown(const MapRevision& a, const MapRevision& b, const v1::Shard& sa,
                 const v1::Shard& sb);
  void CheckFloor(const MapRevision& a, const MapRevision& b, const v1::Shard& sa,
                  const v1::Shard& sb);
  void CheckSlotMoves(const MapRevision& a, const MapRevision& b);
  void CheckMigrationSteps(const MapRevision& a, const MapRevision& b);

  const MapHistoryOptions& options_;
  MapHistoryResult* result_;
};

void Checker::CheckMap(const MapRevision& m) {
  std::set<uint32_t> ids;
  for (const v1::Shard& s : m.map.shards()) {
    if (!ids.insert(s.shard_id()).second) Fail(m, "shard id ", s.shard_id(), " twice");
    CheckShardInMap(m, s);
  }
  const std::vector<int64_t> owners = SlotOwners(m.map);
  int unowned = 0, doubly = 0;
  for (int slot = 0; slot < kSlots; ++slot) {
    unowned += owners[slot] == -1;
    doubly += owners[slot] == -2;
  }
  if (doubly > 0) Fail(m, doubly, " slots owned by two shards");
  if (unowned > 0 && !m.map.shards().empty()) Fail(m, unowned, " slots owned by no shard");
  CheckMigrationsInMap(m, owners);
}

void Checker::CheckShardInMap(const MapRevision& m, const v1::Shard& s) {
  std::set<std::string> seen;
  for (const Ids* list : {&s.replicas(), &s.syncing()}) {
    for (const std::string& id : *list) {
      if (!seen.insert(id).second) Fail(m, "shard ", s.shard_id(), " names ", id, " twice");
      if (Record(m.map, id) == nullptr) {
        Fail(m, "shard ", s.shard_id(), " names ", id, ", which has no node record");
      }
    }
  }
  if (s.replicas().empty() && !s.syncing().empty()) {
    Fail(m, "DOWN shard ", s.shard_id(), " has syncing replicas ", absl::StrJoin(s.syncing(), ","));
  }
  if (!s.replicas().empty() && !s.last_in_sync().empty()) {
    Fail(m, "shard ", s.shard_id(), " has a primary and a last_in_sync set");
  }
}

void Checker::CheckMigrationsInMap(const MapRevision& m, const std::vector<int64_t>& owners) {
  std::set<uint32_t> ids;
  int running = 0;
  for (const v1::Migration& mig : m.map.migrations()) {
    const std::string name = absl::StrCat("migration ", mig.id());
    if (!ids.insert(mig.id()).second) Fail(m, name, " twice");
    if (mig.id() >= m.map.next_migration_id()) {
      Fail(m, name, " is not below next_migration_id ", m.map.next_migration_id());
    }
    if (mig.source_shard() == mig.target_shard()) Fail(m, name, " moves slots to their own shard");
    if (ShardById(m.map, mig.source_shard()) == nullptr ||
        ShardById(m.map, mig.target_shard()) == nullptr) {
      Fail(m, name, " names a shard the map does not have");
    }
    for (uint32_t slot = mig.slots().start(); slot <= mig.slots().end() && slot < kSlots; ++slot) {
      if (owners[slot] != static_cast<int64_t>(mig.source_shard())) {
        Fail(m, name, ": slot ", slot, " is not its source shard ", mig.source_shard(), "'s");
        break;
      }
    }
    if (mig.state() == v1::MIGRATION_COPYING || mig.state() == v1::MIGRATION_HANDOFF) ++running;
  }
  if (running > 1) Fail(m, running, " migrations COPYING or HANDOFF at once");
}

void Checker::CheckStep(const MapRevision& a, const MapRevision& b) {
  if (b.map.epoch() <= a.map.epoch()) {
    Fail(b, "epoch did not increase (", a.map.epoch(), " at revision ", a.revision, ")");
  }
  if (b.map.cluster_name() != a.map.cluster_name()) Fail(b, "cluster name changed");
  if (b.map.replication_factor() != a.map.replication_factor()) Fail(b, "R changed");
  if (b.map.next_migration_id() < a.map.next_migration_id()) {
    Fail(b, "next_migration_id went back from ", a.map.next_migration_id());
  }
  for (const v1::Shard& sa : a.map.shards()) {
    const v1::Shard* sb = ShardById(b.map, sa.shard_id());
    if (sb == nullptr) {
      Fail(b, "shard ", sa.shard_id(), " disappeared");
      continue;
    }
    CheckShardStep(a, b, sa, *sb);
  }
  for (const v1::Shard& sb : b.map.shards()) {
    if (ShardById(a.map, sb.shard_id()) != nullptr) continue;
    // add-node: a new, empty shard; slots reach it only by migration.
    if (OwnsSlots(sb)) Fail(b, "new shard ", sb.shard_id(), " owns slots from the start");
  }
  CheckSlotMoves(a, b);
  CheckMigrationSteps(a, b);
  for (const v1::ClusterNode& d : b.map.draining()) {
    for (const v1::Shard& sb : b.map.shards()) {
      const v1::Shard* sa = ShardById(a.map, sb.shard_id());
      const bool now = Contains(sb.replicas(), d.node_id()) || Contains(sb.syncing(), d.node_id());
      const bool before = sa != nullptr && (Contains(sa->replicas(), d.node_id()) ||
                                            Contains(sa->syncing(), d.node_id()));
      if (now && !before) {
        Fail(b, "draining ", d.node_id(), " was placed in shard ", sb.shard_id());
      }
    }
  }
}

void Checker::CheckShardStep(const MapRevision& a, const MapRevision& b, const v1::Shard& sa,
                             const v1::Shard& sb) {
  const uint32_t id = sa.shard_id();
  if (sb.shard_epoch() < sa.shard_epoch()) {
    Fail(b, "shard ", id, " shard_epoch went back from ", sa.shard_epoch(), " to ",
         sb.shard_epoch());
  } else if (sb.shard_epoch() == sa.shard_epoch() &&
             (!SameList(sa.replicas(), sb.replicas()) || !SameSlots(sa, sb))) {
    Fail(b, "shard ", id, " changed its in-sync list or slots without a new shard_epoch (",
         sa.shard_epoch(), ")");
  }
  CheckDown(a, b, sa, sb);
  CheckPrimaryAndJoins(a, b, sa, sb);
  CheckFloor(a, b, sa, sb);
}

void Checker::CheckPrimaryAndJoins(const MapRevision& a, const MapRevision& b, const v1::Shard& sa,
                                   const v1::Shard& sb) {
  const uint32_t id = sa.shard_id();
  if (sa.replicas().empty() || sb.replicas().empty()) return;  // CheckDown's
  const std::string& primary = sb.replicas(0);
  if (!Contains(sa.replicas(), primary)) {
    Fail(b, "shard ", id, " primary ", primary, " was not in sync at revision ", a.revision, " [",
         absl::StrJoin(sa.replicas(), ","), "]");
  }
  for (const std::string& r : sb.replicas()) {
    if (r == primary && !Contains(sa.replicas(), r)) continue;  // reported above
    const v1::ClusterNode* now = Record(b.map, r);
    const v1::ClusterNode* then = Record(a.map, r);
    if (Contains(sa.replicas(), r)) {
      if (!SameProcess(then, now)) {
        Fail(b, "shard ", id, " in-sync replica ", r, " is another process (", Process(then),
             " -> ", Process(now), "): a restarted node counted as holding the data");
      }
    } else if (!Contains(sa.syncing(), r)) {
      Fail(b, "shard ", id, " ", r, " joined the in-sync set without syncing first");
    } else if (!SameProcess(then, now)) {
      Fail(b, "shard ", id, " ", r, " joined the in-sync set as another process than the one ",
           "that copied (", Process(then), " -> ", Process(now), ")");
    }
  }
}

void Checker::CheckDown(const MapRevision& a, const MapRevision& b, const v1::Shard& sa,
                        const v1::Shard& sb) {
  const uint32_t id = sa.shard_id();
  if (!sa.replicas().empty() && sb.replicas().empty()) {
    // Going down: the last in-sync set is who held every acknowledged write.
    std::set<std::string> want(sa.replicas().begin(), sa.replicas().end()), got;
    for (const v1::ClusterNode& n : sb.last_in_sync()) {
      got.insert(n.node_id());
      if (!SameProcess(Record(a.map, n.node_id()), &n)) {
        Fail(b, "DOWN shard ", id, " records ", Process(&n), " as last in sync, but it was ",
             Process(Record(a.map, n.node_id())));
      }
    }
    if (got != want) {
      Fail(b, "DOWN shard ", id, " last_in_sync [", absl::StrJoin(got, ","),
           "] is not its last in-sync set [", absl::StrJoin(want, ","), "]");
    }
  } else if (sa.replicas().empty() && sb.replicas().empty()) {
    if (sa.last_in_sync_size() != sb.last_in_sync_size()) {
      Fail(b, "DOWN shard ", id, " changed its last_in_sync set while down");
    }
  } else if (sa.replicas().empty() && !sb.replicas().empty()) {
    const std::string& primary = sb.replicas(0);
    const v1::ClusterNode* last = nullptr;
    for (const v1::ClusterNode& n : sa.last_in_sync()) {
      if (n.node_id() == primary) last = &n;
    }
    const v1::ClusterNode* now = Record(b.map, primary);
    const bool copy_back = last != nullptr && now != nullptr && !last->process_id().empty() &&
                           last->process_id() == now->process_id();
    if (!copy_back && options_.accepted_loss.count(id) == 0) {
      Fail(b, "DOWN shard ", id, " came back with primary ", Process(now),
           ", not a process of its last in-sync set, and nobody accepted the loss");
    }
    if (sb.replicas_size() != 1) {
      Fail(b, "DOWN shard ", id, " came back with ", sb.replicas_size(), " in-sync replicas");
    }
  }
}

void Checker::CheckFloor(const MapRevision& a, const MapRevision& b, const v1::Shard& sa,
                         const v1::Shard& sb) {
  if (sb.replicas().empty() || sb.replicas_size() >= static_cast<int>(options_.min_insync)) return;
  for (const std::string& r : sa.replicas()) {
    if (Contains(sb.replicas(), r)) continue;
    const v1::ClusterNode* then = Record(a.map, r);
    const v1::ClusterNode* now = Record(b.map, r);
    const bool gone = now == nullptr || !SameProcess(then, now);
    if (!gone && !IsDraining(b.map, r)) {
      Fail(b, "shard ", sa.shard_id(), " dropped live replica ", r, " to ", sb.replicas_size(),
           " in sync, below min_insync ", options_.min_insync);
    }
  }
}

void Checker::CheckSlotMoves(const MapRevision& a, const MapRevision& b) {
  const std::vector<int64_t> before = SlotOwners(a.map);
  const std::vector<int64_t> after = SlotOwners(b.map);
  std::map<std::pair<int64_t, int64_t>, int> unexplained;  // (from, to) -> slots
  for (int slot = 0; slot < kSlots; ++slot) {
    if (before[slot] == after[slot] || before[slot] < 0 || after[slot] < 0) continue;
    bool flipped = false;
    for (const v1::Migration& m : a.map.migrations()) {
      flipped |= m.state() == v1::MIGRATION_HANDOFF && m.slots().start() <= uint32_t(slot) &&
                 uint32_t(slot) <= m.slots().end() && m.source_shard() == before[slot] &&
                 m.target_shard() == after[slot] && MigrationById(b.map, m.id()) == nullptr;
    }
    if (!flipped) ++unexplained[{before[slot], after[slot]}];
  }
  for (const auto& [move, n] : unexplained) {
    Fail(b, n, " slots moved from shard ", move.first, " to shard ", move.second,
         " without the flip of a HANDOFF migration");
  }
}

void Checker::CheckMigrationSteps(const MapRevision& a, const MapRevision& b) {
  for (const v1::Migration& mb : b.map.migrations()) {
    const v1::Migration* ma = MigrationById(a.map, mb.id());
    if (ma == nullptr) {
      if (mb.state() != v1::MIGRATION_PENDING || mb.id() < a.map.next_migration_id()) {
        Fail(b, "migration ", mb.id(), " appeared ", v1::MigrationState_Name(mb.state()),
             " (next id was ", a.map.next_migration_id(), ")");
      }
      continue;
    }
    if (ma->slots().start() != mb.slots().start() || ma->slots().end() != mb.slots().end() ||
        ma->source_shard() != mb.source_shard() || ma->target_shard() != mb.target_shard()) {
      Fail(b, "migration ", mb.id(), " changed its slots or shards");
    }
    if (Rank(mb.state()) < Rank(ma->state())) {
      Fail(b, "migration ", mb.id(), " went back from ", v1::MigrationState_Name(ma->state()),
           " to ", v1::MigrationState_Name(mb.state()));
    }
  }
  const std::vector<int64_t> after = SlotOwners(b.map);
  for (const v1::Migration& ma : a.map.migrations()) {
    if (ma.state() != v1::MIGRATION_HANDOFF || MigrationById(b.map, ma.id()) != nullptr) continue;
    // Never handed back: the target may have acknowledged writes the
    // source never saw.
    for (uint32_t slot = ma.slots().start(); slot <= ma.slots().end() && slot < kSlots; ++slot) {
      if (after[slot] != static_cast<int64_t>(ma.target_shard())) {
        Fail(b, "migration ", ma.id(), " left HANDOFF without its slots reaching shard ",
             ma.target_shard(), " (slot ", slot, ")");
        break;
      }
    }
  }
}

}  // namespace

std::string MapHistoryResult::Text(size_t max) const {
  std::string out = absl::StrCat(maps, " map revisions: ");
  if (violations.empty()) return out + "every invariant holds";
  absl::StrAppend(&out, violations.size(), " VIOLATIONS");
  for (size_t i = 0; i < violations.size() && i < max; ++i) {
    absl::StrAppend(&out, "\n  ", violations[i]);
  }
  if (violations.size() > max) absl::StrAppend(&out, "\n  ...");
  return out;
}

MapHistoryResult CheckMapHistory(const std::vector<MapRevision>& maps,
                                 const MapHistoryOptions& options) {
  MapHistoryResult result;
  result.maps = maps.size();
  Checker checker(options, &result);
  for (size_t i = 0; i < maps.size(); ++i) {
    checker.CheckMap(maps[i]);
    if (i > 0) checker.CheckStep(maps[i - 1], maps[i]);
  }
  return result;
}

}  // namespace jepsen
}  // namespace kvstore
