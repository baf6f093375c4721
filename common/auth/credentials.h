// Copyright 2026 The kvstore Authors.
//
// Credentials: every secret a server accepts and the principal each one
// makes its holder, and Identities, the lookup from a presented secret (a
// gRPC bearer token, a RESP AUTH) to that principal.
//
//   --auth_token_file     user "default", role write (the data token)
//   --admin_token_file    user "admin",   role admin
//   --cluster_secret_file the peers' secret, role peer (never a RESP user)
//   --users_file          more users, one per line: NAME ROLE SECRET, ROLE
//                         one of read | write | admin; '#' starts a comment
//
// Open mode: a server with no client credential at all (none of the first,
// second and fourth) authenticates nobody and treats every caller as an
// admin, as before there were roles; protected mode confines that to
// loopback. The peer secret alone does not close it (a loopback test
// cluster keeps working without client secrets) but is always required for
// the peer calls: an anonymous caller is never a peer.
//
// Errors (Identities::Build, ReadUsersFile): kInvalidArgument naming the
// line or user for a malformed line, an unknown role, a bad name, a secret
// that ValidateToken() refuses, a name used twice, or one secret given to
// two users or to a user and the peers (a secret must name one principal).
//
// Thread safety: Identities is immutable after Build(); its lookups are
// thread-safe.

#ifndef KVSTORE_COMMON_AUTH_CREDENTIALS_H_
#define KVSTORE_COMMON_AUTH_CREDENTIALS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/auth/principal.h"

namespace kvstore {
namespace auth {

struct User {
  std::string name;
  Role role = Role::kRead;
  std::string secret;
};

inline constexpr absl::string_view kDefaultUser = "default";
inline constexpr absl::string_view kAdminUser = "admin";
// The name a peer is known by in logs and errors (not a RESP user).
inline constexpr absl::string_view kPeerName = "cluster-peer";

struct Credentials {
  std::string data_token;   // user "default", role write; empty: none
  std::string admin_token;  // user "admin", role admin; empty: none
  std::string peer_secret;  // the cluster's peers; empty: no peer may call
  std::vector<User> users;  // from --users_file
};

// Parses a users file (see the file comment). Errors: kNotFound /
// kPermissionDenied when unreadable, kInvalidArgument naming the line.
absl::StatusOr<std::vector<User>> ReadUsersFile(const std::string& path);
absl::StatusOr<std::vector<User>> ParseUsers(absl::string_view text);

// Who presented a secret.
struct Identity {
  std::string name;
  Role role = Role::kRead;
};

class Identities {
 public:
  // Validates `credentials` (see the file comment).
  static absl::StatusOr<Identities> Build(const Credentials& credentials);

  // No client credential configured: every client is an anonymous admin.
  bool open() const { return open_; }
  bool has_peers() const { return !peer_secret_.empty(); }

  // The holder of `secret` (any user's or the peers'), or nullopt. Compares
  // with every secret in constant time each (TokenEquals), so the time does
  // not tell which secret came close.
  std::optional<Identity> BySecret(absl::string_view secret) const;
  // The user `name` when `password` is its secret (RESP AUTH user pass).
  // Peers are not users: nullopt for them.
  std::optional<Identity> ByUser(absl::string_view name, absl::string_view password) const;
  // The identity of an unauthenticated caller: an admin in open mode, else
  // nullopt.
  std::optional<Identity> Anonymous() const;

 private:
  Identities() = default;

  std::vector<User> users_;
  std::string peer_secret_;
  bool open_ = true;
};

}  // namespace auth
}  // namespace kvstore

#endif  // KVSTORE_COMMON_AUTH_CREDENTIALS_H_
