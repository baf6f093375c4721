// Copyright 2026 The kvstore Authors.

#include "server/rdma/rdma_sizing.h"

#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

// Finding 7: the server's queue pairs retried RNR forever (rnr_retry 7).
TEST(RdmaSizing, ServerQueuePairsRetryRnrAFiniteNumberOfTimes) {
  EXPECT_LT(ServerQpTimeouts().rnr_retry, 7);
  // The transport retry count stays finite too (rxe reads 7 as forever).
  EXPECT_LT(ServerQpTimeouts().retry_cnt, 7);
}

TEST(RdmaSizing, AckRingHoldsTwiceTheCreditsAndFitsTheSendQueue) {
  for (uint32_t credits : {1u, 64u, 4096u}) {
    EXPECT_EQ(AckRingSlots(credits), 2 * credits);
    EXPECT_GT(SendQueueDepth(credits), AckRingSlots(credits));
  }
}

// Before, the receive CQ was min(32768, connections x credits) deep: with
// --rdma_commit_credits=4096 and 256 connections, 1 Mi receives could be
// posted on a CQ of 32 Ki entries, and an overflow puts every QP in error.
TEST(RdmaSizing, ReceiveCqHoldsEveryPostedReceive) {
  auto plan = PlanRecvCq(256, 64, 32767);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_connections, 256u);
  EXPECT_EQ(plan->depth, 256 * 64);

  plan = PlanRecvCq(256, 4096, 32767);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_connections, 7u);  // 7 x 4096 <= 32767 < 8 x 4096
  EXPECT_LE(uint64_t{plan->max_connections} * 4096, 32767u);
  EXPECT_EQ(plan->depth, 7 * 4096);

  EXPECT_EQ(PlanRecvCq(256, 40000, 32767).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanRecvCq(0, 64, 32767).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanRecvCq(4, 0, 32767).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
