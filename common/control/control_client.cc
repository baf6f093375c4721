// Copyright 2026 The kvstore Authors.
//
// Every method follows one pattern, kept here and nowhere else in the client:
// build the request (stamping epoch and session where the RPC is scoped),
// make a fresh context with the caller's deadline and the bearer token, call
// the stub, and convert the grpc::Status with FromGrpcStatus so callers only
// ever see absl::Status.

#include "common/control/control_client.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/auth/token.h"
#include "common/cluster/refusal.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace kvstore {
namespace control {

namespace {

// Certificates and keys are a few KiB; a file far larger is not one.
constexpr std::streamsize kMaxPemBytes = 1 << 20;

// The contents of the PEM file at `path`. `what` names the option in errors
// ("tls_ca_file"), which also name the path, since a wrong path is the
// usual mistake. Checked here so that a typo fails at once with its name
// rather than as gRPC's unexplained handshake failure later.
absl::StatusOr<std::string> ReadPem(absl::string_view what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read ", path));
  }
  std::string pem(static_cast<size_t>(kMaxPemBytes) + 1, '\0');
  in.read(pem.data(), static_cast<std::streamsize>(pem.size()));
  pem.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read ", path));
  if (pem.size() > static_cast<size_t>(kMaxPemBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", path, " is over 1 MiB"));
  }
  if (!absl::StrContains(pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", path, " holds no PEM block"));
  }
  return pem;
}

// Which options go together; no file is read here.
absl::Status CheckCombination(const ControlSecurity& sec) {
  if (sec.tls_cert_file.empty() != sec.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls_cert_file and tls_key_file go together: give both for mutual TLS, or neither");
  }
  if (sec.tls_ca_file.empty() && !sec.tls_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs tls_ca_file (the CA of the server's certificate)");
  }
  if (sec.tls_ca_file.empty() && !sec.tls_server_name.empty()) {
    return absl::InvalidArgumentError("tls_server_name needs tls_ca_file");
  }
  if (!sec.auth_token.empty()) {
    // ValidateToken's messages describe the token, never quote it.
    if (absl::Status s = auth::ValidateToken(sec.auth_token); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("auth token: ", s.message()));
    }
  }
  return absl::OkStatus();
}

// TLS credentials from the PEM files, or insecure ones without a CA file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials(
    const ControlSecurity& sec) {
  if (sec.tls_ca_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  KV_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem("tls_ca_file", sec.tls_ca_file));
  if (!sec.tls_cert_file.empty()) {
    KV_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem("tls_cert_file", sec.tls_cert_file));
    KV_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem("tls_key_file", sec.tls_key_file));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

// FAILED_PRECONDITION also covers refusals that another handshake would not
// cure (e.g. "a lease needs an RDMA connection of this session"), so only
// the server's kSessionLost refusal counts, read from the status details.
bool IsSessionLost(const absl::Status& status) {
  return absl::IsUnauthenticated(status) ||
         cluster::IsRefusal(status, cluster::RefusalKind::kSessionLost);
}

absl::StatusOr<std::unique_ptr<ControlClient>> ControlClient::Dial(
    const std::string& address, const ControlSecurity& security) {
  KV_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, DialChannel(address, security));
  return std::make_unique<ControlClient>(v1::KvControl::NewStub(channel), security.auth_token);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ControlClient::DialChannel(
    const std::string& address, const ControlSecurity& security) {
  KV_RETURN_IF_ERROR(CheckCombination(security));
  KV_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds, MakeCredentials(security));
  grpc::ChannelArguments args;
  // Scan pages and fallback GETs carry values up to the server's limit,
  // which may exceed gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Checked against the certificate instead of the host of `address`
  // (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG), e.g. when dialling by IP.
  if (!security.tls_server_name.empty()) args.SetSslTargetNameOverride(security.tls_server_name);
  return grpc::CreateCustomChannel(address, creds, args);
}

// Per-call metadata rather than grpc::MetadataCredentials: gRPC refuses to
// send call credentials over a plaintext channel, and a token on a loopback
// server without TLS is a supported set-up.
ControlClient::ControlClient(std::unique_ptr<v1::KvControl::Stub> stub, std::string auth_token)
    : stub_(std::move(stub)),
      bearer_(auth_token.empty() ? std::string() : auth::BearerHeader(auth_token)) {}

// gRPC contexts are single-use, hence one per call.
std::unique_ptr<grpc::ClientContext> ControlClient::NewContext(absl::Time deadline) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(deadline));
  if (!bearer_.empty()) ctx->AddMetadata("authorization", bearer_);
  return ctx;
}

// The handshake is the only call that may wait for a channel in
// TRANSIENT_FAILURE: after a server restart gRPC backs off reconnecting, and
// failing fast there would make every reconnect attempt fail.
absl::StatusOr<v1::HandshakeResponse> ControlClient::Handshake(const std::string& client_name,
                                                               bool wait_for_ready,
                                                               absl::Time deadline) {
  v1::HandshakeRequest req;
  req.set_client_name(client_name);
  auto ctx = NewContext(deadline);
  ctx->set_wait_for_ready(wait_for_ready);
  v1::HandshakeResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Handshake(ctx.get(), req, &resp)));
  return resp;
}

// Listing keys is a control-plane operation on every transport: the server
// walks its index under its own locks.
absl::StatusOr<v1::ScanResponse> ControlClient::Scan(uint64_t cursor, uint32_t count,
                                                     absl::string_view prefix,
                                                     absl::Time deadline) {
  v1::ScanRequest req;
  req.set_cursor(cursor);
  req.set_count(count);
  req.set_prefix(std::string(prefix));  // bytes field: may hold any key bytes
  auto ctx = NewContext(deadline);
  v1::ScanResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Scan(ctx.get(), req, &resp)));
  return resp;
}

// StatsRequest has no fields; the server answers with all it knows.
absl::StatusOr<v1::StatsResponse> ControlClient::Stats(absl::Time deadline) {
  auto ctx = NewContext(deadline);
  v1::StatsResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Stats(ctx.get(), v1::StatsRequest(), &resp)));
  return resp;
}

// Used only as the RDMA reader's last resort, so it is not epoch-scoped:
// any server epoch answers a GET correctly.
absl::StatusOr<std::string> ControlClient::Get(absl::string_view key, absl::Time deadline) {
  v1::GetRequest req;
  req.set_key(std::string(key));
  auto ctx = NewContext(deadline);
  v1::GetResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Get(ctx.get(), req, &resp)));
  // Moved out: a fallback GET may carry a value of many megabytes.
  return std::move(*resp.mutable_value());
}

absl::Status ControlClient::PutWithTtl(absl::string_view key, absl::string_view value,
                                       absl::Duration ttl, absl::Time deadline) {
  v1::PutRequest req;
  req.set_key(std::string(key));
  req.set_value(std::string(value));
  req.set_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl))));
  auto ctx = NewContext(deadline);
  v1::PutResponse resp;
  return FromGrpcStatus(stub_->Put(ctx.get(), req, &resp));
}

absl::StatusOr<bool> ControlClient::Expire(absl::string_view key, absl::Duration ttl,
                                           absl::Time deadline) {
  v1::ExpireRequest req;
  req.set_key(std::string(key));
  if (ttl != absl::InfiniteDuration()) {
    req.set_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl))));
  }
  auto ctx = NewContext(deadline);
  v1::ExpireResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Expire(ctx.get(), req, &resp)));
  return resp.applied();
}

absl::StatusOr<absl::Duration> ControlClient::Ttl(absl::string_view key, absl::Time deadline) {
  v1::TtlRequest req;
  req.set_key(std::string(key));
  auto ctx = NewContext(deadline);
  v1::TtlResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Ttl(ctx.get(), req, &resp)));
  return resp.ttl_ms() < 0 ? absl::InfiniteDuration() : absl::Milliseconds(resp.ttl_ms());
}

absl::Status ControlClient::ReportReads(absl::Span<const uint64_t> offsets, absl::Time deadline) {
  v1::ReportReadsRequest req;
  req.mutable_fixed_offsets()->Add(offsets.begin(), offsets.end());
  auto ctx = NewContext(deadline);
  v1::ReportReadsResponse resp;
  return FromGrpcStatus(stub_->ReportReads(ctx.get(), req, &resp));
}

// The request is built by RdmaConnection (it knows the queue pair and the
// probe word); only the epoch and session are filled in here, as for every
// scoped RPC.
absl::StatusOr<v1::ConnectQpResponse> ControlClient::ConnectQp(const SessionScope& scope,
                                                               v1::ConnectQpRequest request,
                                                               absl::Time deadline) {
  request.set_epoch(scope.epoch);
  request.set_session_id(scope.session_id);
  auto ctx = NewContext(deadline);
  v1::ConnectQpResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->ConnectQp(ctx.get(), request, &resp)));
  return resp;
}

// The response carries nothing; only the status matters (and callers treat
// even that as best effort).
absl::Status ControlClient::DisconnectQp(const SessionScope& scope, uint64_t connection_id,
                                         absl::Time deadline) {
  v1::DisconnectQpRequest req;
  req.set_epoch(scope.epoch);
  req.set_session_id(scope.session_id);
  req.set_connection_id(connection_id);
  auto ctx = NewContext(deadline);
  v1::DisconnectQpResponse resp;
  return FromGrpcStatus(stub_->DisconnectQp(ctx.get(), req, &resp));
}

// Returns just the lease: the response has nothing else. A kUnavailable here
// means a stale epoch or a server that is gone; the caller decides what that
// does to its path.
absl::StatusOr<v1::Lease> ControlClient::GrantLease(const SessionScope& scope, uint64_t bytes,
                                                    const std::string& client_name,
                                                    uint64_t connection_id, absl::Time deadline) {
  v1::GrantLeaseRequest req;
  req.set_epoch(scope.epoch);
  req.set_session_id(scope.session_id);
  req.set_bytes(bytes);
  req.set_client_name(client_name);
  req.set_connection_id(connection_id);
  auto ctx = NewContext(deadline);
  v1::GrantLeaseResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->GrantLease(ctx.get(), req, &resp)));
  return resp.lease();
}

// The renewed lease in the response is not needed: the client measures the
// new expiry itself, from before the request, to stay on the safe side.
absl::Status ControlClient::RenewLease(const SessionScope& scope, uint64_t lease_id,
                                       uint64_t connection_id, absl::Time deadline) {
  v1::RenewLeaseRequest req;
  req.set_epoch(scope.epoch);
  req.set_session_id(scope.session_id);
  req.set_lease_id(lease_id);
  req.set_connection_id(connection_id);
  auto ctx = NewContext(deadline);
  v1::RenewLeaseResponse resp;
  return FromGrpcStatus(stub_->RenewLease(ctx.get(), req, &resp));
}

// The status only tells the caller whether to count the release; a lease
// that is not released expires on the server anyway.
absl::Status ControlClient::ReleaseLease(const SessionScope& scope, uint64_t lease_id,
                                         uint64_t connection_id, absl::Time deadline) {
  v1::ReleaseLeaseRequest req;
  req.set_epoch(scope.epoch);
  req.set_session_id(scope.session_id);
  req.set_lease_id(lease_id);
  req.set_connection_id(connection_id);
  auto ctx = NewContext(deadline);
  v1::ReleaseLeaseResponse resp;
  return FromGrpcStatus(stub_->ReleaseLease(ctx.get(), req, &resp));
}

}  // namespace control
}  // namespace kvstore
