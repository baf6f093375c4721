// Copyright 2026 The kvstore Authors.
//
// Rendering of `kvctl cluster`. The map is printed as it came: shards in
// the map's order, nodes in the map's order, slot ranges sorted by start.

#include "client/kvctl/kvctl_cluster_format.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace client {
namespace kvctl {
namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) {
  // Nothing guarantees that names are UTF-8: replace, never throw.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string Ranges(const v1::Shard& shard) {
  std::vector<std::string> parts;
  for (const v1::SlotRange& r : shard.slots()) {
    parts.push_back(r.start() == r.end() ? absl::StrCat(r.start())
                                         : absl::StrCat(r.start(), "-", r.end()));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

std::string ListOrDash(const std::vector<std::string>& v) {
  return v.empty() ? "-" : absl::StrJoin(v, ",");
}

std::vector<std::string> Backups(const v1::Shard& shard) {
  return std::vector<std::string>(shard.replicas().begin() + std::min(1, shard.replicas_size()),
                                  shard.replicas().end());
}

const v1::ClusterNode* FindNode(const v1::ClusterMap& map, const std::string& id) {
  for (const v1::ClusterNode& n : map.nodes()) {
    if (n.node_id() == id) return &n;
  }
  return nullptr;
}

// Nodes drained by remove-node whose incarnation still lives.
std::vector<std::string> DrainingIds(const v1::ClusterMap& map) {
  std::vector<std::string> ids;
  for (const v1::ClusterNode& n : map.draining()) ids.push_back(n.node_id());
  return ids;
}

// "COPYING" for MIGRATION_COPYING.
std::string StateName(v1::MigrationState state) {
  switch (state) {
    case v1::MIGRATION_PENDING:
      return "PENDING";
    case v1::MIGRATION_COPYING:
      return "COPYING";
    case v1::MIGRATION_HANDOFF:
      return "HANDOFF";
    default:
      return "UNSPECIFIED";
  }
}

uint32_t CountOf(const v1::Migration& m) { return m.slots().end() - m.slots().start() + 1; }

Json MigrationJson(const v1::Migration& m, bool with_state) {
  Json j;
  j["id"] = m.id();
  if (with_state) j["state"] = StateName(m.state());
  j["start"] = m.slots().start();
  j["end"] = m.slots().end();
  j["count"] = CountOf(m);
  j["source_shard"] = m.source_shard();
  j["target_shard"] = m.target_shard();
  return j;
}

Json MigrationsJson(const v1::ClusterMap& map) {
  Json j = Json::array();
  for (const v1::Migration& m : map.migrations()) j.push_back(MigrationJson(m, true));
  return j;
}

// "slots 4096-5460  count 1365  shard 0 -> shard 3"
std::string MigrationText(const v1::Migration& m) {
  return absl::StrFormat("slots %d-%d  count %d  shard %d -> shard %d", m.slots().start(),
                         m.slots().end(), CountOf(m), m.source_shard(), m.target_shard());
}

std::string MigrationLines(const v1::ClusterMap& map) {
  std::string out;
  for (const v1::Migration& m : map.migrations()) {
    absl::StrAppendFormat(&out, "migration %d  %s  %s\n", m.id(), StateName(m.state()),
                          MigrationText(m));
  }
  return out;
}

bool TargetOwns(const v1::ClusterMap& map, const v1::Migration& m) {
  for (const v1::Shard& s : map.shards()) {
    if (s.shard_id() != m.target_shard()) continue;
    for (const v1::SlotRange& r : s.slots()) {
      if (r.start() <= m.slots().start() && m.slots().end() <= r.end()) return true;
    }
  }
  return false;
}

}  // namespace

std::string FormatClusterStatus(const v1::ClusterMap& map, bool json) {
  if (json) {
    Json j;
    j["epoch"] = map.epoch();
    j["controller"] = map.controller();
    j["cluster_name"] = map.cluster_name();
    j["replication_factor"] = map.replication_factor();
    j["shards"] = Json::array();
    for (const v1::Shard& s : map.shards()) {
      Json js;
      js["shard_id"] = s.shard_id();
      js["shard_epoch"] = s.shard_epoch();
      js["slots"] = Json::array();
      for (const v1::SlotRange& r : s.slots()) js["slots"].push_back({r.start(), r.end()});
      js["up"] = !s.replicas().empty();
      js["primary"] = s.replicas().empty() ? Json(nullptr) : Json(s.replicas(0));
      js["backups"] = Backups(s);
      js["syncing"] = std::vector<std::string>(s.syncing().begin(), s.syncing().end());
      j["shards"].push_back(std::move(js));
    }
    j["draining"] = DrainingIds(map);
    j["migrations"] = MigrationsJson(map);
    return Dump(j);
  }
  std::string out = absl::StrFormat("epoch %d controller %s cluster %s replicas %d\n", map.epoch(),
                                    map.controller().empty() ? "-" : map.controller(),
                                    map.cluster_name().empty() ? "-" : map.cluster_name(),
                                    map.replication_factor());
  if (map.draining_size() > 0) {
    absl::StrAppend(&out, "draining ", absl::StrJoin(DrainingIds(map), ","), "\n");
  }
  for (const v1::Shard& s : map.shards()) {
    absl::StrAppendFormat(
        &out, "shard %d  %-4s  slots %s  primary %s  backups %s  syncing %s  shard_epoch %d\n",
        s.shard_id(), s.replicas().empty() ? "DOWN" : "up", Ranges(s),
        s.replicas().empty() ? "-" : s.replicas(0), ListOrDash(Backups(s)),
        ListOrDash(std::vector<std::string>(s.syncing().begin(), s.syncing().end())),
        s.shard_epoch());
  }
  return out + MigrationLines(map);
}

std::string FormatClusterNodes(const v1::ClusterMap& map, bool json) {
  Json j;
  j["epoch"] = map.epoch();
  j["nodes"] = Json::array();
  std::string out;
  for (const v1::ClusterNode& n : map.nodes()) {
    std::vector<std::string> roles;
    for (const v1::Shard& s : map.shards()) {
      for (int i = 0; i < s.replicas_size(); ++i) {
        if (s.replicas(i) == n.node_id()) {
          roles.push_back(absl::StrCat(i == 0 ? "primary:" : "backup:", s.shard_id()));
        }
      }
      for (const std::string& id : s.syncing()) {
        if (id == n.node_id()) roles.push_back(absl::StrCat("syncing:", s.shard_id()));
      }
    }
    if (json) {
      Json jn;
      jn["node_id"] = n.node_id();
      jn["incarnation"] = n.incarnation();
      jn["control_address"] = n.control_address();
      jn["resp_address"] = n.resp_address();
      jn["metrics_address"] = n.metrics_address();
      jn["applied_map_epoch"] = n.applied_map_epoch();
      jn["roles"] = roles;
      j["nodes"].push_back(std::move(jn));
    } else {
      absl::StrAppendFormat(&out, "%s  control %s  resp %s  incarnation %d  roles %s\n",
                            n.node_id(), n.control_address(),
                            n.resp_address().empty() ? "-" : n.resp_address(), n.incarnation(),
                            ListOrDash(roles));
    }
  }
  return json ? Dump(j) : out;
}

std::string FormatClusterSlots(const v1::ClusterMap& map, bool json) {
  struct Row {
    uint32_t start, end;
    const v1::Shard* shard;
  };
  std::vector<Row> rows;
  for (const v1::Shard& s : map.shards()) {
    for (const v1::SlotRange& r : s.slots()) rows.push_back({r.start(), r.end(), &s});
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.start < b.start; });
  Json j;
  j["epoch"] = map.epoch();
  j["slots"] = Json::array();
  std::string out;
  for (const Row& r : rows) {
    const bool up = !r.shard->replicas().empty();
    const v1::ClusterNode* node = up ? FindNode(map, r.shard->replicas(0)) : nullptr;
    if (json) {
      Json jr;
      jr["start"] = r.start;
      jr["end"] = r.end;
      jr["shard_id"] = r.shard->shard_id();
      jr["primary"] = up ? Json(r.shard->replicas(0)) : Json(nullptr);
      jr["primary_address"] = node != nullptr ? Json(node->control_address()) : Json(nullptr);
      j["slots"].push_back(std::move(jr));
    } else {
      absl::StrAppendFormat(
          &out, "%d-%d  shard %d  primary %s\n", r.start, r.end, r.shard->shard_id(),
          !up               ? std::string("down")
          : node != nullptr ? absl::StrCat(r.shard->replicas(0), " ", node->control_address())
                            : r.shard->replicas(0));
    }
  }
  if (json) j["migrations"] = MigrationsJson(map);
  return json ? Dump(j) : out + MigrationLines(map);
}

std::string DescribeLoss(const v1::ClusterMap& map, uint32_t shard_id) {
  for (const v1::Shard& shard : map.shards()) {
    if (shard.shard_id() != shard_id || !shard.replicas().empty()) continue;
    uint64_t slots = 0;
    for (const v1::SlotRange& r : shard.slots()) slots += r.end() - r.start() + 1;
    std::vector<std::string> waits;
    for (const v1::ClusterNode& n : shard.last_in_sync()) waits.push_back(n.node_id());
    return absl::StrCat(
        "accept-loss of shard ", shard_id, ": every key of shard ", shard_id, " is lost, slots ",
        slots == 0 ? "-" : Ranges(shard), " (", slots,
        " slots), every acknowledged write included; the shard then serves again, empty.\n",
        waits.empty()
            ? std::string("no in-sync replica is known to hold a copy.\n")
            : absl::StrCat("it waits for its last in-sync replicas (", absl::StrJoin(waits, ", "),
                           ") to register again with their copy; if one can still "
                           "come back, start it instead.\n"));
  }
  return "";
}

std::string FormatRebalancePlan(const std::vector<v1::Migration>& planned, uint64_t epoch,
                                bool dry_run, bool json) {
  if (json) {
    Json j;
    j["dry_run"] = dry_run;
    j["epoch"] = epoch;
    j["planned"] = Json::array();
    for (const v1::Migration& m : planned) j["planned"].push_back(MigrationJson(m, false));
    return Dump(j);
  }
  if (planned.empty()) return "slots are already even: nothing to move\n";
  std::string out =
      dry_run
          ? absl::StrFormat("dry run: %d migration(s) planned, nothing written\n", planned.size())
          : absl::StrFormat("queued %d migration(s) in map epoch %d\n", planned.size(), epoch);
  for (const v1::Migration& m : planned) {
    absl::StrAppendFormat(&out, "migration %d  %s\n", m.id(), MigrationText(m));
  }
  return out;
}

RebalanceProgress ProgressOf(const v1::ClusterMap& map, const std::vector<v1::Migration>& planned) {
  RebalanceProgress p;
  p.epoch = map.epoch();
  p.total = planned.size();
  for (const v1::Migration& want : planned) {
    const v1::Migration* found = nullptr;
    for (const v1::Migration& m : map.migrations()) {
      if (m.id() == want.id()) found = &m;
    }
    if (found == nullptr) {
      ++(TargetOwns(map, want) ? p.done : p.dropped);
    } else if (found->state() == v1::MIGRATION_PENDING) {
      ++p.pending;
    } else {
      p.running = *found;
    }
  }
  return p;
}

std::string FormatRebalanceProgress(const RebalanceProgress& p, bool json) {
  const bool running = p.running.state() != v1::MIGRATION_STATE_UNSPECIFIED;
  if (json) {
    Json j;
    j["epoch"] = p.epoch;
    j["done"] = p.done;
    j["dropped"] = p.dropped;
    j["total"] = p.total;
    j["pending"] = p.pending;
    j["running"] = running ? MigrationJson(p.running, true) : Json(nullptr);
    return Dump(j);
  }
  std::string out =
      absl::StrFormat("epoch %d: %d of %d done, %d pending", p.epoch, p.done, p.total, p.pending);
  if (p.dropped > 0) absl::StrAppendFormat(&out, ", %d DROPPED (a shard went down)", p.dropped);
  if (running) {
    absl::StrAppendFormat(&out, "; running migration %d %s %s", p.running.id(),
                          StateName(p.running.state()), MigrationText(p.running));
  }
  return out + "\n";
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
