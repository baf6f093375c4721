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
  // CROSSSLOT comes first, as in Redis: it does not depend on the map.
  const uint32_t slot = cluster::KeySlot(args[first]);
  for (size_t i = first + step; i < args.size(); i += step) {
    if (cluster::KeySlot(args[i]) != slot) {
      conn->ReplyError(kCrossSlotError);
      return false;
    }
  }
  const Route route = cluster->RouteSlot(slot, /*replica_ok=*/!write && conn->readonly);
  if (route.kind == Route::Kind::kServe) return true;
  conn->ReplyError(RouteErrorText(route));
  return false;
}

bool IsClusterRefusal(const absl::Status& s) {
  return (s.code() == absl::StatusCode::kFailedPrecondition &&
          absl::StartsWith(s.message(), "MOVED ")) ||
         (s.code() == absl::StatusCode::kUnavailable &&
          absl::StartsWith(s.message(), "CLUSTERDOWN"));
}

void ReplyStoreStatus(const ClusterState* cluster, Connection* conn, const absl::Status& s) {
  if (!IsClusterRefusal(s)) return conn->ReplyStatus(s);
  if (s.code() == absl::StatusCode::kUnavailable) return conn->ReplyError(s.message());
  // "MOVED <slot> <host:port>": the hook may name another port than the
  // RESP one (it serves every transport), so the slot is routed again on
  // the newest map and the primary's RESP address named.
  const absl::string_view rest = s.message().substr(6);
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
