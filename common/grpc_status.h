// Copyright 2026 The kvstore Authors.
//
// The one place where absl::Status and grpc::Status are converted. The code
// values of the two enums are numerically identical, so the mapping is 1:1.
// Error details and payloads are not carried across, only code and message.
//
// Thread-safety: pure functions; thread-safe.

#ifndef KVSTORE_COMMON_GRPC_STATUS_H_
#define KVSTORE_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace kvstore {

// Same code and message; OK maps to OK.
grpc::Status ToGrpcStatus(const absl::Status& status);
// Same code and message; OK maps to OK (any message on an OK grpc::Status
// is dropped).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace kvstore

#endif  // KVSTORE_COMMON_GRPC_STATUS_H_
