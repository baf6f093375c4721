// Copyright 2026 The kvstore Authors.

#include "common/grpc_status.h"

#include <string>

namespace kvstore {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  // The numeric cast is sound because both enums use the canonical gRPC
  // code numbers (0..16); codes outside that range pass through unchanged.
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  // An OK status carries no message in absl, so it is returned bare.
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace kvstore
