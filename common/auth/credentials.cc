// Copyright 2026 The kvstore Authors.

#include "common/auth/credentials.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/auth/token.h"

namespace kvstore {
namespace auth {
namespace {

// Names travel in RESP AUTH and in logs: a conservative alphabet.
bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<User>> ParseUsers(absl::string_view text) {
  std::vector<User> users;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", line_no, ": expected NAME ROLE SECRET, got ", fields.size(), " field(s)"));
    }
    std::optional<Role> role = ParseClientRole(fields[1]);
    if (!role.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": role '", fields[1],
                                                     "' is not one of read, write, admin"));
    }
    users.push_back(User{std::string(fields[0]), *role, std::string(fields[2])});
  }
  return users;
}

absl::StatusOr<std::vector<User>> ReadUsersFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string why = absl::StrCat("cannot read users file ", path, ": ", std::strerror(err));
    if (err == EACCES) return absl::PermissionDeniedError(why);
    return absl::NotFoundError(why);
  }
  // A users file is a few lines; refuse anything that is not.
  constexpr size_t kMaxBytes = 1 << 20;
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("users file ", path, " is over 1 MiB"));
  }
  absl::StatusOr<std::vector<User>> users = ParseUsers(text);
  if (!users.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("users file ", path, ": ", users.status().message()));
  }
  return users;
}

absl::StatusOr<Identities> Identities::Build(const Credentials& credentials) {
  Identities ids;
  if (!credentials.data_token.empty()) {
    ids.users_.push_back(User{std::string(kDefaultUser), Role::kWrite, credentials.data_token});
  }
  if (!credentials.admin_token.empty()) {
    ids.users_.push_back(User{std::string(kAdminUser), Role::kAdmin, credentials.admin_token});
  }
  ids.users_.insert(ids.users_.end(), credentials.users.begin(), credentials.users.end());
  absl::flat_hash_set<std::string> names;
  for (const User& u : ids.users_) {
    if (!ValidName(u.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("user name '", u.name, "': use 1..64 letters, digits, '_', '-' or '.'"));
    }
    if (!names.insert(u.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "user '", u.name, "' is defined twice (\"default\" is --auth_token_file's, \"admin\" ",
          "--admin_token_file's)"));
    }
    if (absl::Status s = ValidateToken(u.secret); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("secret of user '", u.name, "': ", s.message()));
    }
  }
  if (!credentials.peer_secret.empty()) {
    if (absl::Status s = ValidateToken(credentials.peer_secret); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cluster secret: ", s.message()));
    }
  }
  // One secret, one principal: otherwise a data client holding the token
  // would also be whatever else shares it.
  for (size_t i = 0; i < ids.users_.size(); ++i) {
    for (size_t j = i + 1; j < ids.users_.size(); ++j) {
      if (ids.users_[i].secret == ids.users_[j].secret) {
        return absl::InvalidArgumentError(
            absl::StrCat("users '", ids.users_[i].name, "' and '", ids.users_[j].name,
                         "' have the same secret; give each its own"));
      }
    }
    if (ids.users_[i].secret == credentials.peer_secret) {
      return absl::InvalidArgumentError(
          absl::StrCat("user '", ids.users_[i].name,
                       "' has the cluster secret as its secret: peers and clients need "
                       "different secrets"));
    }
  }
  ids.peer_secret_ = credentials.peer_secret;
  ids.open_ = ids.users_.empty();
  return ids;
}

std::optional<Identity> Identities::BySecret(absl::string_view secret) const {
  // Every secret is compared, so that the time taken does not depend on
  // which one (if any) matched.
  std::optional<Identity> found;
  for (const User& u : users_) {
    if (TokenEquals(u.secret, secret)) found = Identity{u.name, u.role};
  }
  if (!peer_secret_.empty() && TokenEquals(peer_secret_, secret)) {
    found = Identity{std::string(kPeerName), Role::kPeer};
  }
  return found;
}

std::optional<Identity> Identities::ByUser(absl::string_view name,
                                           absl::string_view password) const {
  for (const User& u : users_) {
    if (u.name == name) {
      if (TokenEquals(u.secret, password)) return Identity{u.name, u.role};
      return std::nullopt;
    }
  }
  // An unknown user costs the same as a wrong password.
  TokenEquals(password, password);
  return std::nullopt;
}

std::optional<Identity> Identities::Anonymous() const {
  if (open_) return Identity{std::string(kDefaultUser), Role::kAdmin};
  return std::nullopt;
}

}  // namespace auth
}  // namespace kvstore
