// Copyright 2026 The kvstore Authors.
//
// Every method follows one pattern, kept here and nowhere else in the client:
// build the request (stamping the epoch where the RPC is epoch-scoped), make
// a fresh context with the caller's deadline, call the stub, and convert the
// grpc::Status with FromGrpcStatus so callers only ever see absl::Status.

#include "client/internal/control_client.h"

#include <utility>

#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace kvstore {
namespace client {

namespace {

// A context for one call. gRPC contexts are single-use, hence one per call.
std::unique_ptr<grpc::ClientContext> NewContext(absl::Time deadline) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(deadline));
  return ctx;
}

}  // namespace

std::unique_ptr<ControlClient> ControlClient::Dial(const std::string& address) {
  grpc::ChannelArguments args;
  // Scan pages and fallback GETs carry values up to the server's limit,
  // which may exceed gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  return std::make_unique<ControlClient>(v1::KvControl::NewStub(channel));
}

ControlClient::ControlClient(std::unique_ptr<v1::KvControl::Stub> stub) : stub_(std::move(stub)) {}

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

// The request is built by RdmaConnection (it knows the queue pair and the
// probe word); only the epoch is filled in here, as for every scoped RPC.
absl::StatusOr<v1::ConnectQpResponse> ControlClient::ConnectQp(uint64_t epoch,
                                                               v1::ConnectQpRequest request,
                                                               absl::Time deadline) {
  request.set_epoch(epoch);
  auto ctx = NewContext(deadline);
  v1::ConnectQpResponse resp;
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->ConnectQp(ctx.get(), request, &resp)));
  return resp;
}

// The response carries nothing; only the status matters (and callers treat
// even that as best effort).
absl::Status ControlClient::DisconnectQp(uint64_t epoch, uint64_t connection_id,
                                         absl::Time deadline) {
  v1::DisconnectQpRequest req;
  req.set_epoch(epoch);
  req.set_connection_id(connection_id);
  auto ctx = NewContext(deadline);
  v1::DisconnectQpResponse resp;
  return FromGrpcStatus(stub_->DisconnectQp(ctx.get(), req, &resp));
}

// Returns just the lease: the response has nothing else. A kUnavailable here
// means a stale epoch or a server that is gone; the caller decides what that
// does to its path.
absl::StatusOr<v1::Lease> ControlClient::GrantLease(uint64_t epoch, uint64_t bytes,
                                                    const std::string& client_name,
                                                    uint64_t connection_id, absl::Time deadline) {
  v1::GrantLeaseRequest req;
  req.set_epoch(epoch);
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
absl::Status ControlClient::RenewLease(uint64_t epoch, uint64_t lease_id, uint64_t connection_id,
                                       absl::Time deadline) {
  v1::RenewLeaseRequest req;
  req.set_epoch(epoch);
  req.set_lease_id(lease_id);
  req.set_connection_id(connection_id);
  auto ctx = NewContext(deadline);
  v1::RenewLeaseResponse resp;
  return FromGrpcStatus(stub_->RenewLease(ctx.get(), req, &resp));
}

// The status only tells the caller whether to count the release; a lease
// that is not released expires on the server anyway.
absl::Status ControlClient::ReleaseLease(uint64_t epoch, uint64_t lease_id, uint64_t connection_id,
                                         absl::Time deadline) {
  v1::ReleaseLeaseRequest req;
  req.set_epoch(epoch);
  req.set_lease_id(lease_id);
  req.set_connection_id(connection_id);
  auto ctx = NewContext(deadline);
  v1::ReleaseLeaseResponse resp;
  return FromGrpcStatus(stub_->ReleaseLease(ctx.get(), req, &resp));
}

}  // namespace client
}  // namespace kvstore
