// Copyright 2026 The kvstore Authors.

#include "common/auth/authenticator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/auth/rpc_policy.h"
#include "common/auth/token.h"
#include "glog/logging.h"

namespace kvstore {
namespace auth {
namespace {

Identities BuildOrDie(const Credentials& credentials) {
  absl::StatusOr<Identities> ids = Identities::Build(credentials);
  CHECK(ids.ok()) << ids.status();
  return *std::move(ids);
}

}  // namespace

Authenticator::Authenticator(const Credentials& credentials, metrics::Registry* registry)
    : ids_(BuildOrDie(credentials)) {
  CHECK(registry != nullptr);
  failures_ = registry->AddCounter(
      "kvstore_grpc_auth_failures_total",
      "gRPC calls refused with UNAUTHENTICATED: missing or wrong bearer token.");
  denied_ = registry->AddCounter(
      "kvstore_grpc_permission_denied_total",
      "gRPC calls refused with PERMISSION_DENIED: the caller's role does not allow the method "
      "(a data client calling a peer or admin RPC, a read-only client writing).");
}

std::string Authenticator::AuthorizationOf(const grpc::ServerContextBase* context) {
  if (context == nullptr) return "";
  // Metadata keys arrive lower-cased; a repeated key is a client bug, and
  // only the first value is looked at.
  const auto& md = context->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

absl::StatusOr<Identity> Authenticator::Authenticate(absl::string_view authorization) const {
  const absl::string_view given = TokenFromBearer(authorization);
  if (given.empty()) {
    if (std::optional<Identity> anyone = ids_.Anonymous(); anyone.has_value()) return *anyone;
    failures_->Increment();
    return absl::UnauthenticatedError(
        "missing bearer token: this server requires a credential (client --token_file, or "
        "--admin_token_file for admin requests)");
  }
  std::optional<Identity> who = ids_.BySecret(given);
  if (!who.has_value()) {
    // In open mode a client that sends some token is still served (it may
    // be configured for another server); a peer secret that does not match
    // must not pass as anonymous, which Admit() sees by the method's rule.
    if (std::optional<Identity> anyone = ids_.Anonymous(); anyone.has_value()) return *anyone;
    failures_->Increment();
    return absl::UnauthenticatedError("wrong bearer token");
  }
  return *who;
}

absl::StatusOr<Identity> Authenticator::Admit(const grpc::ServerContextBase* context,
                                              absl::string_view method) const {
  return AdmitAuthorization(AuthorizationOf(context), method);
}

absl::StatusOr<Identity> Authenticator::AdmitAuthorization(absl::string_view authorization,
                                                           absl::string_view method) const {
  absl::StatusOr<Identity> who = Authenticate(authorization);
  if (!who.ok()) return who.status();
  const std::optional<Permission> needed = RpcPermission(method);
  if (!needed.has_value()) {
    LOG(ERROR) << "no authorization rule for " << method << " (common/auth/rpc_policy.cc)";
    denied_->Increment();
    return absl::PermissionDeniedError(absl::StrCat(method, " has no authorization rule"));
  }
  if (!Allows(who->role, *needed)) {
    denied_->Increment();
    std::string hint;
    if (*needed == Permission::kPeer) {
      hint = ids_.has_peers() ? " (only other kvservers of the cluster, with the cluster secret)"
                              : " (this server has no cluster secret: it accepts no peer)";
    } else if (*needed == Permission::kAdmin) {
      hint = " (send the admin token: kvctl --admin_token_file)";
    }
    return absl::PermissionDeniedError(
        absl::StrCat("user '", who->name, "' (role ", RoleName(who->role), ") may not call ",
                     method, ": it needs the ", PermissionName(*needed), " permission", hint));
  }
  return who;
}

}  // namespace auth
}  // namespace kvstore
