// Copyright 2026 The kvstore Authors.
//
// The one place where absl::Status and grpc::Status are converted. The code
// values of the two enums are numerically identical, so the mapping is 1:1.
// The message travels as the gRPC message, and every payload of the
// absl::Status (a typed refusal, common/cluster/refusal.h, is one) travels in
// the binary error details, as proto/status_details.proto (the shape of
// google.rpc.Status), so a status crosses a gRPC hop with its payloads, in
// either direction.
//
// Thread-safety: pure functions; thread-safe.

#ifndef KVSTORE_COMMON_GRPC_STATUS_H_
#define KVSTORE_COMMON_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace kvstore {

// Same code and message, and the payloads in the error details (none: no
// details); OK maps to OK.
grpc::Status ToGrpcStatus(const absl::Status& status);
// Same code and message, and the payloads of the error details restored
// (details that do not parse as status_details.proto are ignored); OK maps
// to OK (any message on an OK grpc::Status is dropped).
absl::Status FromGrpcStatus(const grpc::Status& status);

// A status as bytes (proto/status_details.proto: code, message, payloads)
// for a message field, where one call answers many requests (the
// replication stream's per-write failures); "" for OK.
std::string StatusToBytes(const absl::Status& status);
// The inverse: "" is OK; bytes that do not parse are kInternal.
absl::Status StatusFromBytes(const std::string& bytes);

}  // namespace kvstore

#endif  // KVSTORE_COMMON_GRPC_STATUS_H_
