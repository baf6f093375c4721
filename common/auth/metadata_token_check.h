// Copyright 2026 The kvstore Authors.
//
// The credential and permission check at the metadata stage of a gRPC
// call, before its request message is read.
//
// Why: a sync handler (and so Authenticator::Check in it) runs only once
// gRPC has received and parsed the whole request, which on the control port
// may be tens of MiB. Checked there alone, anyone who can reach the port
// makes the server read and buffer whole uploads before being refused.
// MetadataTokenCheck is an auth metadata processor: gRPC's server auth
// filter runs it on the call's initial metadata, and a refused call ends
// with UNAUTHENTICATED (no or an unknown credential) or PERMISSION_DENIED
// (a data client calling a peer or admin RPC) before the server asks the
// transport for the message, so no more of the body than one HTTP/2 flow-control window ever
// leaves the client. The handlers keep their own check (defence in depth,
// and what a test calling a service directly goes through).
//
// gRPC's C++ API takes a processor only on secure credentials;
// ControlPortCredentials builds the plaintext ones from the core library's
// insecure credentials, which run the processor the same way.
//
// It decides by Authenticator::AdmitAuthorization, the services' own rule
// (the same secrets, roles and method table), so the two stages never
// disagree.
//
// Calls whose method path starts with one of `open_prefixes` pass without
// a credential (health checks: orchestrators probe with no credentials).
//
// Errors: those of Authenticator::Admit, with its texts and counters.
//
// Thread safety: thread-safe; Process() only reads.

#ifndef KVSTORE_COMMON_AUTH_METADATA_TOKEN_CHECK_H_
#define KVSTORE_COMMON_AUTH_METADATA_TOKEN_CHECK_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/auth/authenticator.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/server_credentials.h"

namespace kvstore {
namespace auth {

class MetadataTokenCheck : public grpc::AuthMetadataProcessor {
 public:
  // `authenticator` (shared: the processor lives as long as gRPC's
  // credentials) must not be null.
  MetadataTokenCheck(std::shared_ptr<const Authenticator> authenticator,
                     std::vector<std::string> open_prefixes);

  // Compares in constant time, never blocks: gRPC may run it inline.
  bool IsBlocking() const override { return false; }
  // Consumes nothing: the handlers read the same header again.
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const std::shared_ptr<const Authenticator> authenticator_;
  const std::vector<std::string> open_prefixes_;
};

// The control port's credentials: TLS with `ssl` when given, plaintext
// otherwise; `check` (may be null: nothing to check) runs on every call's metadata.
std::shared_ptr<grpc::ServerCredentials> ControlPortCredentials(
    const std::optional<grpc::SslServerCredentialsOptions>& ssl,
    std::shared_ptr<MetadataTokenCheck> check);

}  // namespace auth
}  // namespace kvstore

#endif  // KVSTORE_COMMON_AUTH_METADATA_TOKEN_CHECK_H_
