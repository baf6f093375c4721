// Copyright 2026 The kvstore Authors.

#include "common/grpc_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "proto/status_details.pb.h"

namespace kvstore {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  // The numeric cast is sound because both enums use the canonical gRPC
  // code numbers (0..16); codes outside that range pass through unchanged.
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  v1::StatusDetails details;
  status.ForEachPayload([&details](absl::string_view type_url, const absl::Cord& value) {
    v1::StatusPayload* p = details.add_details();
    p->set_type_url(std::string(type_url));
    p->set_value(std::string(value));
  });
  // Without payloads no details: the trailer stays as small as before.
  if (details.details().empty()) return grpc::Status(code, std::string(status.message()));
  details.set_code(static_cast<int32_t>(status.code()));
  details.set_message(std::string(status.message()));
  return grpc::Status(code, std::string(status.message()), details.SerializeAsString());
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  // An OK status carries no message in absl, so it is returned bare.
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  const std::string& bytes = status.error_details();
  v1::StatusDetails details;
  if (bytes.empty() || !details.ParseFromString(bytes)) return out;
  for (const v1::StatusPayload& p : details.details()) {
    out.SetPayload(p.type_url(), absl::Cord(p.value()));
  }
  return out;
}

std::string StatusToBytes(const absl::Status& status) {
  if (status.ok()) return "";
  v1::StatusDetails details;
  details.set_code(static_cast<int32_t>(status.code()));
  details.set_message(std::string(status.message()));
  status.ForEachPayload([&details](absl::string_view type_url, const absl::Cord& value) {
    v1::StatusPayload* p = details.add_details();
    p->set_type_url(std::string(type_url));
    p->set_value(std::string(value));
  });
  return details.SerializeAsString();
}

absl::Status StatusFromBytes(const std::string& bytes) {
  if (bytes.empty()) return absl::OkStatus();
  v1::StatusDetails details;
  if (!details.ParseFromString(bytes) || details.code() == 0) {
    return absl::InternalError("a status that does not parse");
  }
  absl::Status out(static_cast<absl::StatusCode>(details.code()), details.message());
  for (const v1::StatusPayload& p : details.details()) {
    out.SetPayload(p.type_url(), absl::Cord(p.value()));
  }
  return out;
}

}  // namespace kvstore
