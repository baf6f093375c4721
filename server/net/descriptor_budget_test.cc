// Copyright 2026 The kvstore Authors.

#include "server/net/descriptor_budget.h"

#include <sys/resource.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace net {
namespace {

using ::testing::HasSubstr;

TEST(DescriptorBudgetTest, RaisesTheSoftLimitToTheHardOne) {
  rlimit lim;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max > 64) {
    rlimit lower = lim;
    lower.rlim_cur = 64;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lower), 0);
  }
  auto got = RaiseDescriptorLimit();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_LE(got->soft_before, got->soft);
  EXPECT_EQ(got->hard, lim.rlim_max);
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  EXPECT_EQ(lim.rlim_cur, got->soft);
  if (got->hard != RLIM_INFINITY) {
    EXPECT_EQ(got->soft, got->hard);
  }
  EXPECT_GT(OpenDescriptors(), 2);
}

TEST(DescriptorBudgetTest, CapsFitUnderTheLimit) {
  // 256 descriptors, 20 open: 64 reserved, 172 left; gRPC gets a quarter,
  // RESP's 4096 is lowered to the rest.
  auto caps = PlanConnectionCaps(256, 20, 0, 4096);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->grpc, 43);
  EXPECT_EQ(caps->resp, 172 - 43);
  EXPECT_THAT(caps->adjusted, HasSubstr("--resp_max_clients lowered from 4096 to 129"));
  EXPECT_LE(20 + 64 + caps->grpc + caps->resp, 256);

  // A large limit: the automatic gRPC cap stops at 1024; RESP fits as asked.
  caps = PlanConnectionCaps(1 << 20, 30, 0, 4096);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->grpc, 1024);
  EXPECT_EQ(caps->resp, 4096);
  EXPECT_TRUE(caps->adjusted.empty());

  // An explicit gRPC cap is kept when it fits, refused when it does not.
  caps = PlanConnectionCaps(1024, 30, 300, 100);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->grpc, 300);
  EXPECT_EQ(caps->resp, 100);
  caps = PlanConnectionCaps(1024, 30, 5000, 100);
  EXPECT_EQ(caps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(caps.status().message(), HasSubstr("--grpc_max_connections=5000"));

  // Too small a limit to serve both ports is refused, naming the limit.
  caps = PlanConnectionCaps(96, 20, 0, 4096);
  EXPECT_EQ(caps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(caps.status().message(), HasSubstr("RLIMIT_NOFILE"));
}

}  // namespace
}  // namespace net
}  // namespace server
}  // namespace kvstore
