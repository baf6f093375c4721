// Copyright 2026 The kvstore Authors.
//
// Who may call what: the roles a credential grants and the permission every
// RPC and command needs, in one place.
//
//   kRead   a read-only data client: GET, SCAN, one-sided RDMA reads.
//   kWrite  a read-write data client: kRead plus PUT, DELETE and leases.
//   kAdmin  an operator: kWrite plus the cluster's admin requests
//           (failover, add/remove node, rebalance, accept-loss) and the
//           RESP admin commands (FLUSHALL, CONFIG SET ...).
//   kPeer   another kvserver of the same cluster: replication, shard copies,
//           reconciliation, migration, ReplicaStatus, and the RDMA session
//           its replica commits travel on. A peer is NOT a data client (it
//           reads no keys through the client API) and not an admin.
//
// A role is what a credential is (one per credential); a Permission is what
// an entry point needs; Allows() is the only place that relates the two.
//
// Thread safety: free functions without state.

#ifndef KVSTORE_COMMON_AUTH_PRINCIPAL_H_
#define KVSTORE_COMMON_AUTH_PRINCIPAL_H_

#include <optional>

#include "absl/strings/string_view.h"

namespace kvstore {
namespace auth {

enum class Role { kRead, kWrite, kAdmin, kPeer };

enum class Permission {
  kClusterMap,  // the cluster map: every principal (clients route with it)
  kSession,     // a control session and its RDMA queue pairs: clients, peers
  kRead,        // read keys and server statistics
  kWrite,       // write and delete keys
  kLease,       // write leases (pool memory an RDMA WRITE fills): writers, peers
  kPeer,        // the server-to-server calls
  kAdmin,       // the operator's requests
};

// Whether `role` holds `permission`.
bool Allows(Role role, Permission permission);

// "read", "write", "admin", "peer".
absl::string_view RoleName(Role role);
absl::string_view PermissionName(Permission permission);

// The role named `name` ("read", "write" or "admin"; a users file cannot
// make peers: the cluster secret is the only peer credential). nullopt
// otherwise.
std::optional<Role> ParseClientRole(absl::string_view name);

}  // namespace auth
}  // namespace kvstore

#endif  // KVSTORE_COMMON_AUTH_PRINCIPAL_H_
