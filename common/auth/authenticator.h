// Copyright 2026 The kvstore Authors.
//
// Authenticator: the bearer-token check of the control plane, in one place.
//
// When the server has a token (--auth_token_file), every RPC must carry the
// metadata "authorization: Bearer <token>" (common/auth/token.h). The
// service calls Check() first in each method, before it reads the request,
// so nothing (read keys, index seed, regions, values) leaves the server for
// an unauthenticated caller. A plain check in the service works the same
// over insecure and TLS credentials; a grpc::AuthMetadataProcessor is only
// run on secure channels.
//
// Errors: kUnauthenticated "missing bearer token ..." or "wrong bearer token"
// (the two are told apart for the operator; neither says anything about the
// token). Each failure counts in kvstore_grpc_auth_failures_total.
//
// Thread safety: thread-safe; Check() only reads.

#ifndef KVSTORE_COMMON_AUTH_AUTHENTICATOR_H_
#define KVSTORE_COMMON_AUTH_AUTHENTICATOR_H_

#include <string>

#include "absl/status/status.h"
#include "common/metrics/registry.h"
#include "grpcpp/server_context.h"

namespace kvstore {
namespace auth {

class Authenticator {
 public:
  // `token` empty: no check (every call passes). `registry` (not owned,
  // must outlive this) gets kvstore_grpc_auth_failures_total.
  Authenticator(std::string token, metrics::Registry* registry);
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;

  // OK when no token is configured or the call carries it. `context` null
  // (a test calling the service directly) carries no token.
  absl::Status Check(const grpc::ServerContext* context) const;

  bool enabled() const { return !token_.empty(); }

 private:
  const std::string token_;
  metrics::Counter* failures_;
};

}  // namespace auth
}  // namespace kvstore

#endif  // KVSTORE_COMMON_AUTH_AUTHENTICATOR_H_
