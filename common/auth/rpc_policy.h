// Copyright 2026 The kvstore Authors.
//
// The permission (common/auth/principal.h) every gRPC method of the control
// port needs, in one table: KvControl (data clients; the sessions a
// primary's RDMA replica link opens) and KvCluster (peers, admins, and the
// cluster map for everyone). The services ask it with their method names;
// rpc_policy_test walks the services' descriptors, so a method added to a
// .proto without a row here fails that test, and the servers refuse it.
//
// Thread safety: a constant table.

#ifndef KVSTORE_COMMON_AUTH_RPC_POLICY_H_
#define KVSTORE_COMMON_AUTH_RPC_POLICY_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "common/auth/principal.h"

namespace kvstore {
namespace auth {

// The permission `method` ("kvstore.v1.KvCluster/Replicate": service full
// name, '/', method name) needs; nullopt for a method without a rule.
std::optional<Permission> RpcPermission(absl::string_view method);

}  // namespace auth
}  // namespace kvstore

#endif  // KVSTORE_COMMON_AUTH_RPC_POLICY_H_
