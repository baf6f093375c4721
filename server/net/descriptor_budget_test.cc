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
using ::testing::Not;

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

ConnectionRequest Request(int grpc, int resp) {
  ConnectionRequest r;
  r.grpc = grpc;
  r.resp = resp;
  return r;
}

// kvserver's defaults with a token: RESP's 256 unauthenticated connections
// on 2 loops, and the metrics port's 64.
ConnectionRequest Defaults() {
  ConnectionRequest r = Request(0, 4096);
  r.resp_unauthenticated = 256;
  r.resp_auth = true;
  r.resp_threads = 2;
  r.metrics = 64;
  return r;
}

// What every port may hold at once, as the ports count it.
uint64_t Held(const ConnectionRequest& r, const ConnectionCaps& c) {
  const int threads = std::max(1, r.resp_threads);
  const uint64_t unauth = r.resp_auth ? uint64_t{static_cast<uint64_t>(threads)} *
                                            ((c.resp_unauthenticated + threads - 1) / threads)
                                      : 0;
  return c.grpc + uint64_t{static_cast<uint64_t>(c.resp)} * (r.resp_tls ? 3 : 1) + unauth +
         c.metrics;
}

TEST(DescriptorBudgetTest, CapsFitUnderTheLimit) {
  // 256 descriptors, 20 open: 64 reserved, 172 left; gRPC gets a quarter,
  // RESP's 4096 is lowered to the rest.
  auto caps = PlanConnectionCaps(256, 20, Request(0, 4096));
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->grpc, 43);
  EXPECT_EQ(caps->resp, 172 - 43);
  EXPECT_THAT(caps->adjusted, HasSubstr("--resp_max_clients lowered from 4096 to 129"));
  EXPECT_LE(20 + 64 + caps->total, 256);

  // A large limit: the automatic gRPC cap stops at 1024; RESP fits as asked.
  caps = PlanConnectionCaps(1 << 20, 30, Request(0, 4096));
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->grpc, 1024);
  EXPECT_EQ(caps->resp, 4096);
  EXPECT_TRUE(caps->adjusted.empty());

  // An explicit gRPC cap is kept when it fits, refused when it does not.
  caps = PlanConnectionCaps(1024, 30, Request(300, 100));
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->grpc, 300);
  EXPECT_EQ(caps->resp, 100);
  caps = PlanConnectionCaps(1024, 30, Request(5000, 100));
  EXPECT_EQ(caps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(caps.status().message(), HasSubstr("--grpc_max_connections=5000"));

  // Too small a limit to serve both ports is refused, naming the limit.
  caps = PlanConnectionCaps(96, 20, Request(0, 4096));
  EXPECT_EQ(caps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(caps.status().message(), HasSubstr("RLIMIT_NOFILE"));
}

// Every port's cap counts: the unauthenticated RESP connections and the
// metrics port's, not only gRPC's and RESP clients'.
TEST(DescriptorBudgetTest, EveryPortsCapCounts) {
  const ConnectionRequest r = Defaults();
  auto caps = PlanConnectionCaps(256, 20, r);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_LE(20 + ReservedDescriptors(256) + Held(r, *caps), 256u);
  EXPECT_EQ(caps->total, Held(r, *caps));
  EXPECT_EQ(caps->metrics, 64);
  EXPECT_GE(caps->grpc, 8);
  EXPECT_GE(caps->resp, 8);
  EXPECT_GE(caps->resp_unauthenticated, 8);
  EXPECT_THAT(caps->adjusted, HasSubstr("--resp_max_unauthenticated_clients lowered from 256"));
  EXPECT_THAT(caps->adjusted, HasSubstr("--resp_max_clients lowered from 4096"));

  // A roomy limit keeps every flag as given.
  caps = PlanConnectionCaps(1 << 16, 20, r);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->resp, 4096);
  EXPECT_EQ(caps->resp_unauthenticated, 256);
  EXPECT_TRUE(caps->adjusted.empty()) << caps->adjusted;
  EXPECT_EQ(caps->total, Held(r, *caps));
}

TEST(DescriptorBudgetTest, UnauthenticatedCapRoundsUpPerLoop) {
  // 3 loops with a cap of 10 hold up to 3 * 4 = 12.
  ConnectionRequest r = Defaults();
  r.resp_unauthenticated = 10;
  r.resp_threads = 3;
  auto caps = PlanConnectionCaps(1 << 16, 20, r);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->total, caps->grpc + 4096 + 12 + 64u);
}

TEST(DescriptorBudgetTest, NoTokenNoUnauthenticatedShare) {
  // Without a token every RESP connection is a client: the unauthenticated
  // cap is not used and takes nothing.
  ConnectionRequest r = Defaults();
  r.resp_auth = false;
  auto caps = PlanConnectionCaps(256, 20, r);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_THAT(caps->adjusted, Not(HasSubstr("--resp_max_unauthenticated_clients")));
  EXPECT_EQ(caps->total, static_cast<uint64_t>(caps->grpc + caps->resp + 64));
  EXPECT_LE(20 + ReservedDescriptors(256) + caps->total, 256u);
}

TEST(DescriptorBudgetTest, NoUnauthenticatedCapGetsOneThatFits) {
  ConnectionRequest r = Defaults();
  r.resp_unauthenticated = 0;  // "no cap" cannot be budgeted
  auto caps = PlanConnectionCaps(4096, 20, r);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_GE(caps->resp_unauthenticated, 8);
  EXPECT_THAT(caps->adjusted, HasSubstr("--resp_max_unauthenticated_clients"));
  EXPECT_LE(20 + ReservedDescriptors(4096) + Held(r, *caps), 4096u);
}

TEST(DescriptorBudgetTest, TlsConnectionsHoldThreeDescriptors) {
  ConnectionRequest r = Defaults();
  r.resp_tls = true;
  auto caps = PlanConnectionCaps(1024, 20, r);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_LE(20 + ReservedDescriptors(1024) + Held(r, *caps), 1024u);
  EXPECT_EQ(caps->total, Held(r, *caps));
}

TEST(DescriptorBudgetTest, RefusesWhenEvenTheMinimumDoesNotFit) {
  // 160 with 20 open and 64 reserved leaves 76; the least the ports take is
  // 64 for metrics and 8 for each of the three flags, 88: it fits only
  // without the metrics port.
  ConnectionRequest r = Defaults();
  auto caps = PlanConnectionCaps(160, 20, r);
  EXPECT_EQ(caps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(caps.status().message(), HasSubstr("RLIMIT_NOFILE"));
  EXPECT_THAT(caps.status().message(), HasSubstr("metrics"));
  r.metrics = 0;
  caps = PlanConnectionCaps(160, 20, r);
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_LE(20 + ReservedDescriptors(160) + Held(r, *caps), 160u);
}

}  // namespace
}  // namespace net
}  // namespace server
}  // namespace kvstore
