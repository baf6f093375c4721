// Copyright 2026 The kvstore Authors.

#include "common/auth/principal.h"

namespace kvstore {
namespace auth {

bool Allows(Role role, Permission permission) {
  switch (permission) {
    case Permission::kClusterMap:
    case Permission::kSession:
      return true;
    case Permission::kRead:
      return role == Role::kRead || role == Role::kWrite || role == Role::kAdmin;
    case Permission::kWrite:
      return role == Role::kWrite || role == Role::kAdmin;
    case Permission::kLease:
      // A primary's RDMA replica link writes replica entries into leases.
      return role == Role::kWrite || role == Role::kAdmin || role == Role::kPeer;
    case Permission::kPeer:
      return role == Role::kPeer;
    case Permission::kAdmin:
      return role == Role::kAdmin;
  }
  return false;
}

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kWrite:
      return "write";
    case Role::kAdmin:
      return "admin";
    case Role::kPeer:
      return "peer";
  }
  return "?";
}

absl::string_view PermissionName(Permission permission) {
  switch (permission) {
    case Permission::kClusterMap:
      return "cluster-map";
    case Permission::kSession:
      return "session";
    case Permission::kRead:
      return "read";
    case Permission::kWrite:
      return "write";
    case Permission::kLease:
      return "lease";
    case Permission::kPeer:
      return "peer";
    case Permission::kAdmin:
      return "admin";
  }
  return "?";
}

std::optional<Role> ParseClientRole(absl::string_view name) {
  if (name == "read") return Role::kRead;
  if (name == "write") return Role::kWrite;
  if (name == "admin") return Role::kAdmin;
  return std::nullopt;
}

}  // namespace auth
}  // namespace kvstore
