// Copyright 2026 The kvstore Authors.

#include "common/grpc_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace {

TEST(GrpcStatus, CodeAndMessageBothWays) {
  const grpc::Status g = ToGrpcStatus(absl::NotFoundError("no such key"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(g.error_message(), "no such key");
  EXPECT_TRUE(g.error_details().empty());  // no payloads, no details
  const absl::Status a = FromGrpcStatus(g);
  EXPECT_EQ(a, absl::NotFoundError("no such key"));
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status(grpc::StatusCode::OK, "ignored")).ok());
}

TEST(GrpcStatus, PayloadsCrossAHop) {
  absl::Status s = absl::UnavailableError("busy");
  s.SetPayload("type.example/one", absl::Cord("first"));
  s.SetPayload("type.example/two", absl::Cord(std::string("\0\1\2", 3)));
  const absl::Status back = FromGrpcStatus(ToGrpcStatus(s));
  EXPECT_EQ(back, s);  // absl compares payloads too
  EXPECT_EQ(back.GetPayload("type.example/two"), absl::Cord(std::string("\0\1\2", 3)));
}

TEST(GrpcStatus, DetailsThatAreNotOursAreIgnored) {
  const absl::Status a =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "boom", "\xff\xff garbage"));
  EXPECT_EQ(a, absl::InternalError("boom"));
}

TEST(GrpcStatus, AStatusAsBytesKeepsCodeMessageAndPayloads) {
  absl::Status s = absl::FailedPreconditionError("stale epoch");
  s.SetPayload("type.example/refusal", absl::Cord(std::string("\0x", 2)));
  EXPECT_EQ(StatusFromBytes(StatusToBytes(s)), s);
  EXPECT_EQ(StatusToBytes(absl::OkStatus()), "");
  EXPECT_TRUE(StatusFromBytes("").ok());
  EXPECT_EQ(StatusFromBytes("\xff\xff").code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace kvstore
