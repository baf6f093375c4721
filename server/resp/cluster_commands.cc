// Copyright 2026 The kvstore Authors.

#include "server/resp/cluster_commands.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/slots.h"
#include "common/protocol/resp.h"
#include "server/routing/cluster_state.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

using cluster::ClusterMapView;
using resp::CommandIs;

uint64_t Fnv1a64(absl::string_view salt, absl::string_view data) {
  uint64_t h = 14695981039346656037ull;
  for (absl::string_view part : {salt, data}) {
    for (unsigned char ch : part) {
      h ^= ch;
      h *= 1099511628211ull;
    }
  }
  return h;
}

// "host:port" split at the last ':'; port 0 when there is none.
std::pair<std::string, int64_t> SplitHostPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return {std::string(address), 0};
  int64_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port)) port = 0;
  return {std::string(address.substr(0, colon)), port};
}

// The node `id` as CLUSTER SLOTS lists it: [host, port, id, {}] (Redis 7).
void ReplySlotsNode(Connection* conn, const ClusterMapView& map, const std::string& id) {
  const v1::ClusterNode* node = map.Node(id);
  const auto [host, port] = SplitHostPort(node != nullptr ? node->resp_address() : "");
  conn->ReplyArrayHeader(4);
  conn->ReplyBulk(host);
  conn->ReplyInteger(port);
  conn->ReplyBulk(RedisNodeId(id));
  conn->ReplyArrayHeader(0);  // the metadata map (hostname): none
}

void ClusterSlots(const CommandContext& ctx, const ClusterMapView* map) {
  if (map == nullptr) return ctx.conn->ReplyArrayHeader(0);
  size_t ranges = 0;
  for (const v1::Shard& shard : map->proto().shards()) {
    if (!shard.replicas().empty()) ranges += shard.slots_size();
  }
  ctx.conn->ReplyArrayHeader(ranges);
  for (const v1::Shard& shard : map->proto().shards()) {
    if (shard.replicas().empty()) continue;  // down: the slots are unserved
    for (const v1::SlotRange& range : shard.slots()) {
      ctx.conn->ReplyArrayHeader(2 + shard.replicas_size());
      ctx.conn->ReplyInteger(range.start());
      ctx.conn->ReplyInteger(range.end());
      for (const std::string& id : shard.replicas()) ReplySlotsNode(ctx.conn, *map, id);
    }
  }
}

// One node of CLUSTER SHARDS: a map of 7 pairs (RESP2: the flat array of
// 14 Redis sends there).
void ReplyShardNode(Connection* conn, const ClusterMapView& map, const std::string& id,
                    absl::string_view role, absl::string_view health) {
  const v1::ClusterNode* node = map.Node(id);
  const std::string address = node != nullptr ? node->resp_address() : "";
  const auto [host, port] = SplitHostPort(address);
  conn->ReplyMapHeader(7);
  conn->ReplyBulk("id");
  conn->ReplyBulk(RedisNodeId(id));
  conn->ReplyBulk("port");
  conn->ReplyInteger(port);
  conn->ReplyBulk("ip");
  conn->ReplyBulk(host);
  conn->ReplyBulk("endpoint");
  conn->ReplyBulk(host);
  conn->ReplyBulk("role");
  conn->ReplyBulk(role);
  // Replication is synchronous: every in-sync replica is at the primary's
  // offset, which the RESP port does not track; 0 for all.
  conn->ReplyBulk("replication-offset");
  conn->ReplyInteger(0);
  conn->ReplyBulk("health");
  conn->ReplyBulk(health);
}

void ClusterShards(const CommandContext& ctx, const ClusterMapView* map) {
  if (map == nullptr) return ctx.conn->ReplyArrayHeader(0);
  ctx.conn->ReplyArrayHeader(map->proto().shards_size());
  for (const v1::Shard& shard : map->proto().shards()) {
    ctx.conn->ReplyMapHeader(2);
    ctx.conn->ReplyBulk("slots");
    ctx.conn->ReplyArrayHeader(2 * shard.slots_size());
    for (const v1::SlotRange& range : shard.slots()) {
      ctx.conn->ReplyInteger(range.start());
      ctx.conn->ReplyInteger(range.end());
    }
    ctx.conn->ReplyBulk("nodes");
    ctx.conn->ReplyArrayHeader(shard.replicas_size() + shard.syncing_size());
    for (int i = 0; i < shard.replicas_size(); ++i) {
      ReplyShardNode(ctx.conn, *map, shard.replicas(i), i == 0 ? "master" : "replica", "online");
    }
    for (const std::string& id : shard.syncing()) {
      ReplyShardNode(ctx.conn, *map, id, "replica", "loading");
    }
  }
}

// The running migration on the line of a node leading its source shard
// ("[<slot>->-<target primary id>]") or its target shard ("[<slot>-<-<source
// primary id>]"), as Redis marks a migrating / importing slot. Redis writes
// one entry per slot and redis-cli reads the slot as a number (atoi), so a
// range cannot be written as one entry; one entry per slot would be
// thousands for a rebalance. Only the range's first slot is listed (the
// header says so).
void AppendMigration(const ClusterMapView& map, const std::vector<const v1::Shard*>& led,
                     std::string* line) {
  for (const v1::Migration& m : map.proto().migrations()) {
    if (m.state() != v1::MIGRATION_COPYING && m.state() != v1::MIGRATION_HANDOFF) continue;
    const v1::Shard* source = map.ShardById(m.source_shard());
    const v1::Shard* target = map.ShardById(m.target_shard());
    if (source == nullptr || target == nullptr || source->replicas().empty() ||
        target->replicas().empty()) {
      continue;
    }
    for (const v1::Shard* shard : led) {
      if (shard == source) {
        absl::StrAppend(line, " [", m.slots().start(), "->-", RedisNodeId(target->replicas(0)),
                        "]");
      } else if (shard == target) {
        absl::StrAppend(line, " [", m.slots().start(), "-<-", RedisNodeId(source->replicas(0)),
                        "]");
      }
    }
  }
}

// One CLUSTER NODES line (see the header for how roles are mapped).
std::string NodesLine(const ClusterMapView& map, const v1::ClusterNode& node,
                      absl::string_view self) {
  const std::vector<const v1::Shard*> led = map.ShardsLedBy(node.node_id());
  std::string flags = node.node_id() == self ? "myself," : "";
  std::string master = "-";
  uint64_t config_epoch = 0;
  if (!led.empty()) {
    flags += "master";
    config_epoch = led[0]->shard_epoch();
  } else if (auto backed = map.ShardsBackedBy(node.node_id()); !backed.empty()) {
    flags += "slave";
    master = RedisNodeId(backed[0]->replicas(0));
  } else if (auto syncing = map.ShardsSyncingOn(node.node_id()); !syncing.empty()) {
    flags += "slave";
    if (!syncing[0]->replicas().empty()) master = RedisNodeId(syncing[0]->replicas(0));
  } else {
    flags += "master";  // holds nothing, as an empty Redis master
  }
  const auto [control_host, control_port] = SplitHostPort(node.control_address());
  std::string line =
      absl::StrCat(RedisNodeId(node.node_id()), " ", node.resp_address(), "@", control_port, " ",
                   flags, " ", master, " 0 0 ", config_epoch, " connected");
  for (const v1::Shard* shard : led) {
    for (const v1::SlotRange& r : shard->slots()) {
      if (r.start() == r.end()) {
        absl::StrAppend(&line, " ", r.start());
      } else {
        absl::StrAppend(&line, " ", r.start(), "-", r.end());
      }
    }
  }
  AppendMigration(map, led, &line);
  return line + "\n";
}

void ClusterNodes(const CommandContext& ctx, const ClusterMapView* map) {
  std::string text;
  if (map != nullptr) {
    for (const v1::ClusterNode& node : map->proto().nodes()) {
      text += NodesLine(*map, node, ctx.options->cluster->self());
    }
  }
  // Text for people, as Redis sends it: verbatim in RESP3, bulk in RESP2.
  ctx.conn->ReplyVerbatim(text);
}

void ClusterInfo(const CommandContext& ctx, const ClusterMapView* map) {
  const ClusterState& state = *ctx.options->cluster;
  uint64_t assigned = 0, shards = 0, my_epoch = 0;
  if (map != nullptr) {
    for (const v1::Shard& shard : map->proto().shards()) {
      if (shard.replicas().empty()) continue;
      ++shards;
      for (const v1::SlotRange& r : shard.slots()) assigned += r.end() - r.start() + 1;
    }
    for (const v1::Shard* shard : map->ShardsLedBy(state.self())) {
      my_epoch = std::max<uint64_t>(my_epoch, shard->shard_epoch());
    }
  }
  const bool ok = map != nullptr && state.Serving() && assigned == cluster::kSlotCount;
  ctx.conn->ReplyVerbatim(
      absl::StrCat("cluster_enabled:1\r\ncluster_state:", ok ? "ok" : "fail",
                   "\r\ncluster_slots_assigned:", assigned, "\r\ncluster_slots_ok:", assigned,
                   "\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:",
                   map != nullptr ? map->proto().nodes_size() : 0, "\r\ncluster_size:", shards,
                   "\r\ncluster_current_epoch:", map != nullptr ? map->epoch() : 0,
                   "\r\ncluster_my_epoch:", my_epoch, "\r\n"));
}

// Redis's text for a subcommand with the wrong number of arguments.
void WrongArity(const CommandContext& ctx, absl::string_view sub) {
  ctx.conn->ReplyError(absl::StrCat("ERR wrong number of arguments for 'cluster|",
                                    absl::AsciiStrToLower(sub), "' command"));
}

}  // namespace

std::string RedisNodeId(absl::string_view node_id) {
  std::string hex = absl::StrFormat("%016x%016x%016x", Fnv1a64("0:", node_id),
                                    Fnv1a64("1:", node_id), Fnv1a64("2:", node_id));
  hex.resize(40);
  return hex;
}

void ClusterCommand(const CommandContext& ctx, CommandArgs args) {
  if (ctx.options->cluster == nullptr) return ctx.conn->ReplyError(kClusterDisabledError);
  const absl::string_view sub = args[1];
  if (CommandIs(sub, "KEYSLOT")) {
    if (args.size() != 3) return WrongArity(ctx, sub);
    return ctx.conn->ReplyInteger(cluster::KeySlot(args[2]));
  }
  if (CommandIs(sub, "MYID")) {
    if (args.size() != 2) return WrongArity(ctx, sub);
    return ctx.conn->ReplyBulk(RedisNodeId(ctx.options->cluster->self()));
  }
  // One snapshot per command: the reply describes one map.
  const std::shared_ptr<const ClusterMapView> map = ctx.options->cluster->map();
  using Handler = void (*)(const CommandContext&, const ClusterMapView*);
  Handler handler = nullptr;
  if (CommandIs(sub, "SLOTS")) handler = ClusterSlots;
  if (CommandIs(sub, "SHARDS")) handler = ClusterShards;
  if (CommandIs(sub, "NODES")) handler = ClusterNodes;
  if (CommandIs(sub, "INFO")) handler = ClusterInfo;
  if (handler == nullptr) {
    std::string name(sub.substr(0, 64));
    for (char& ch : name) {
      if (!absl::ascii_isprint(static_cast<unsigned char>(ch))) ch = '?';
    }
    return ctx.conn->ReplyError(
        absl::StrCat("ERR unknown subcommand '", name, "'. Try CLUSTER HELP."));
  }
  if (args.size() != 2) return WrongArity(ctx, sub);
  handler(ctx, map.get());
}

void ReadOnlyCommand(const CommandContext& ctx, CommandArgs) {
  if (ctx.options->cluster == nullptr) return ctx.conn->ReplyError(kClusterDisabledError);
  ctx.conn->readonly = true;
  ctx.conn->ReplyOk();
}

void ReadWriteCommand(const CommandContext& ctx, CommandArgs) {
  if (ctx.options->cluster == nullptr) return ctx.conn->ReplyError(kClusterDisabledError);
  ctx.conn->readonly = false;
  ctx.conn->ReplyOk();
}

// A client that follows a kAsk refusal sends ASKING first. The target of a migration
// serves the slot once it accepted the handoff whether or not ASKING came
// (ClusterState::RouteKey, §19.9), so there is nothing to allow; accepted
// so that redis-cli -c and cluster clients work unchanged.
void AskingCommand(const CommandContext& ctx, CommandArgs) {
  if (ctx.options->cluster == nullptr) return ctx.conn->ReplyError(kClusterDisabledError);
  ctx.conn->ReplyOk();
}

// Every acknowledged write is already on every in-sync backup (§19.3), so
// the answer needs no waiting: the backups of the shard this node leads
// (the fewest, if it leads several; 0 if it leads none or in single-node
// mode).
void WaitCommand(const CommandContext& ctx, CommandArgs args) {
  int64_t numreplicas = 0, timeout = 0;
  if (!absl::SimpleAtoi(args[1], &numreplicas) || !absl::SimpleAtoi(args[2], &timeout)) {
    return ctx.conn->ReplyError("ERR value is not an integer or out of range");
  }
  if (timeout < 0) return ctx.conn->ReplyError("ERR timeout is negative");
  if (ctx.options->cluster == nullptr) return ctx.conn->ReplyInteger(0);
  const std::shared_ptr<const ClusterMapView> map = ctx.options->cluster->map();
  int64_t backups = -1;
  if (map != nullptr) {
    for (const v1::Shard* shard : map->ShardsLedBy(ctx.options->cluster->self())) {
      const int64_t n = shard->replicas_size() - 1;
      backups = backups < 0 ? n : std::min(backups, n);
    }
  }
  ctx.conn->ReplyInteger(std::max<int64_t>(backups, 0));
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
