// Copyright 2026 The kvstore Authors.

#include "server/resp/cluster_routing.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cluster/slots.h"

namespace kvstore {
namespace server {
namespace resp_internal {

std::string RouteErrorText(const Route& route) {
  switch (route.kind) {
    case Route::Kind::kServe:
      return "";
    case Route::Kind::kMoved:
      return absl::StrCat("MOVED ", route.slot, " ", route.node->resp_address());
    case Route::Kind::kAsk:
      return absl::StrCat("ASK ", route.slot, " ", route.node->resp_address());
    case Route::Kind::kTryAgain:
      return absl::StrCat("TRYAGAIN Hash slot ", route.slot,
                          " is being handed to another shard; retry shortly");
    case Route::Kind::kDown:
    case Route::Kind::kNotReady:
      break;
  }
  return std::string(kClusterDownError);
}

bool RouteKey(const ClusterState* cluster, Connection* conn, absl::string_view key, bool write) {
  if (cluster == nullptr) return true;
  const Route route = cluster->RouteKey(key, /*replica_ok=*/!write && conn->readonly);
  if (route.kind == Route::Kind::kServe) return true;
  conn->ReplyError(RouteErrorText(route));
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
    // slots not all served here: CROSSSLOT, as in Redis.
    for (size_t i = first; i < args.size(); i += step) {
      if (cluster->RouteKey(args[i], replica_ok).kind != Route::Kind::kServe) {
        conn->ReplyError(kCrossSlotError);
        return false;
      }
    }
    return true;
  }
  const Route route = cluster->RouteSlot(slot, replica_ok);
  if (route.kind == Route::Kind::kServe) return true;
  conn->ReplyError(RouteErrorText(route));
  return false;
}

bool IsClusterRefusal(const absl::Status& s) {
  return (s.code() == absl::StatusCode::kFailedPrecondition &&
          (absl::StartsWith(s.message(), "MOVED ") || absl::StartsWith(s.message(), "ASK "))) ||
         (s.code() == absl::StatusCode::kUnavailable &&
          (absl::StartsWith(s.message(), "CLUSTERDOWN") ||
           absl::StartsWith(s.message(), "TRYAGAIN")));
}

void ReplyStoreStatus(const ClusterState* cluster, Connection* conn, const absl::Status& s) {
  if (!IsClusterRefusal(s)) return conn->ReplyStatus(s);
  if (s.code() == absl::StatusCode::kUnavailable) return conn->ReplyError(s.message());
  // "MOVED <slot> <host:port>": the hook may name another port than the
  // RESP one (it serves every transport), so the slot is routed again on
  // the newest map and the primary's RESP address named.
  const absl::string_view rest = s.message().substr(s.message().find(' ') + 1);
  uint32_t slot = 0;
  if (cluster != nullptr && absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &slot) &&
      slot < cluster::kSlotCount) {
    const Route route = cluster->RouteSlot(slot);
    if (route.kind != Route::Kind::kServe) return conn->ReplyError(RouteErrorText(route));
  }
  conn->ReplyError(s.message());
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
