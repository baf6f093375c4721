// Copyright 2026 The kvstore Authors.

#include "common/auth/authenticator.h"

#include <utility>

#include "absl/strings/string_view.h"
#include "common/auth/token.h"
#include "glog/logging.h"

namespace kvstore {
namespace auth {

Authenticator::Authenticator(std::string token, metrics::Registry* registry)
    : token_(std::move(token)) {
  CHECK(registry != nullptr);
  failures_ = registry->AddCounter(
      "kvstore_grpc_auth_failures_total",
      "gRPC calls refused with UNAUTHENTICATED: missing or wrong bearer token.");
}

absl::Status Authenticator::Check(const grpc::ServerContext* context) const {
  if (token_.empty()) return absl::OkStatus();
  absl::string_view given;
  if (context != nullptr) {
    // Metadata keys arrive lower-cased; a repeated key is a client bug, and
    // only the first value is looked at.
    const auto& md = context->client_metadata();
    auto it = md.find("authorization");
    if (it != md.end()) {
      given = auth::TokenFromBearer(absl::string_view(it->second.data(), it->second.size()));
    }
  }
  if (given.empty()) {
    failures_->Increment();
    return absl::UnauthenticatedError(
        "missing bearer token: this server requires its token (client --token_file)");
  }
  if (!auth::TokenEquals(token_, given)) {
    failures_->Increment();
    return absl::UnauthenticatedError("wrong bearer token");
  }
  return absl::OkStatus();
}

}  // namespace auth
}  // namespace kvstore
