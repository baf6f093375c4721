// Copyright 2026 The kvstore Authors.

#include "server/resp/cluster_routing.h"

#include <cstdint>
#include <optional>

#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"

namespace kvstore {
namespace server {
namespace resp_internal {

bool RouteKey(const ClusterState* cluster, Connection* conn, absl::string_view key, bool write) {
  if (cluster == nullptr) return true;
  const Route route = cluster->RouteKey(key, /*replica_ok=*/!write && conn->readonly);
  if (route.kind == Route::Kind::kServe) return true;
  conn->ReplyStatus(RouteStatus(route, RefusalAddress::kResp));
  return false;
}

bool RouteKeys(const ClusterState* cluster, Connection* conn,
               absl::Span<const absl::string_view> args, size_t first, size_t step, bool write) {
  if (cluster == nullptr || first >= args.size()) return true;
  const bool replica_ok = !write && conn->readonly;
  const uint32_t slot = cluster::KeySlot(args[first]);
  bool one_slot = true;
  for (size_t i = first + step; i < args.size() && one_slot; i += step) {
    one_slot = cluster::KeySlot(args[i]) == slot;
  }
  if (!one_slot) {
    // Redis refuses keys of several slots even when one node serves them
    // all. kvstore serves them when this node serves every one (a superset:
    // cluster-aware Redis clients never send such a command), because its
    // own client batches MGET/MSET per node, not per slot. Keys of several
    // slots not all served here: CROSSSLOT, as in Redis; but a slot of a
    // shard this node leads and holds (a new lead not yet reconciled) is
    // its TRYAGAIN, which passes soon, not a client error.
    for (size_t i = first; i < args.size(); i += step) {
      const Route route = cluster->RouteKey(args[i], replica_ok);
      if (route.kind == Route::Kind::kServe) continue;
      if (route.kind == Route::Kind::kReconciling) {
        conn->ReplyStatus(RouteStatus(route, RefusalAddress::kResp));
      } else {
        conn->ReplyError(kCrossSlotError);
      }
      return false;
    }
    return true;
  }
  const Route route = cluster->RouteSlot(slot, replica_ok);
  if (route.kind == Route::Kind::kServe) return true;
  conn->ReplyStatus(RouteStatus(route, RefusalAddress::kResp));
  return false;
}

bool IsClusterRefusal(const absl::Status& s) { return cluster::FromStatus(s).has_value(); }

absl::Status AfterEarlierKeys(const absl::Status& s) {
  const std::optional<cluster::Refusal> r = cluster::FromStatus(s);
  if (!r.has_value() || r->effect != cluster::Effect::kNone) return s;
  return cluster::ToStatus(r->WithUnknownEffect());
}

void ReplyStoreRefusal(const ClusterState* cluster, Connection* conn, const absl::Status& s) {
  if (s.ok()) return conn->ReplyOk();
  const std::optional<cluster::Refusal> r = cluster::FromStatus(s);
  // The hook serves every transport and may name another port than the
  // RESP one: the slot is routed again on the newest map.
  if (cluster != nullptr && r.has_value() && r->effect == cluster::Effect::kNone &&
      (r->kind == cluster::RefusalKind::kMoved || r->kind == cluster::RefusalKind::kAsk) &&
      r->slot.has_value() && *r->slot < cluster::kSlotCount) {
    const Route route = cluster->RouteSlot(*r->slot);
    if (route.kind != Route::Kind::kServe) {
      return conn->ReplyStatus(RouteStatus(route, RefusalAddress::kResp));
    }
  }
  conn->ReplyStatus(s);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
