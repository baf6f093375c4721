// Copyright 2026 The kvstore Authors.
//
// Authenticator: who a gRPC caller is and whether it may call a method, in
// one place for both services of the control port.
//
// A call carries its credential as the metadata "authorization: Bearer
// <secret>" (common/auth/token.h); Identities (credentials.h) maps the
// secret to a user and its role, RpcPermission (rpc_policy.h) names what
// the method needs, Allows (principal.h) decides. The services call Admit()
// first in each method, before they read the request, so nothing (keys,
// index seed, regions, values, the map's secrets) leaves the server for a
// caller that may not have it. A plain check in the service works the same
// over insecure and TLS credentials; a grpc::AuthMetadataProcessor is only
// run on secure channels.
//
// Errors: kUnauthenticated "missing bearer token ..." or "wrong bearer
// token" (told apart for the operator; neither says anything about the
// secrets), counted in kvstore_grpc_auth_failures_total; kPermissionDenied
// naming the caller's user, its role and the permission the method needs,
// counted in kvstore_grpc_permission_denied_total. A method without a rule
// is refused (kPermissionDenied) and logged: a new RPC is closed until it is
// given one.
//
// Thread safety: thread-safe; Admit() only reads.

#ifndef KVSTORE_COMMON_AUTH_AUTHENTICATOR_H_
#define KVSTORE_COMMON_AUTH_AUTHENTICATOR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/auth/credentials.h"
#include "common/metrics/registry.h"
#include "grpcpp/server_context.h"

namespace kvstore {
namespace auth {

class Authenticator {
 public:
  // `credentials` must pass Identities::Build (the server validates them at
  // start; CHECK-fails otherwise). `registry` (not owned, must outlive
  // this) gets the two counters above.
  Authenticator(const Credentials& credentials, metrics::Registry* registry);
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;

  // The caller of `method` ("kvstore.v1.KvCluster/Replicate") when it may
  // call it. `context` is a sync or a callback RPC's; null (a test calling the service directly)
  // carries no credential.
  absl::StatusOr<Identity> Admit(const grpc::ServerContextBase* context,
                                 absl::string_view method) const;

  // Admit() on the raw "authorization" metadata value ("" when none) and
  // the method's name without its leading '/': what MetadataTokenCheck
  // sees before a call's body is read.
  absl::StatusOr<Identity> AdmitAuthorization(absl::string_view authorization,
                                              absl::string_view method) const;

  // Admit() without the identity.
  absl::Status Check(const grpc::ServerContextBase* context, absl::string_view method) const {
    return Admit(context, method).status();
  }

  // The raw "authorization" metadata of the call ("" when none): an admin
  // request forwarded to the controller carries the operator's own.
  static std::string AuthorizationOf(const grpc::ServerContextBase* context);

 private:
  absl::StatusOr<Identity> Authenticate(absl::string_view authorization) const;

  const Identities ids_;
  metrics::Counter* failures_;
  metrics::Counter* denied_;
};

}  // namespace auth
}  // namespace kvstore

#endif  // KVSTORE_COMMON_AUTH_AUTHENTICATOR_H_
