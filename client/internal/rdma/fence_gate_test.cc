// Copyright 2026 The kvstore Authors.
//
// The reader's fence decision without a device: which words admit a read,
// which status a refusal carries, and that each refusal is counted under
// its reason in the client's registry.

#include "client/internal/rdma/fence_gate.h"

#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "common/protocol/fence.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;  // unix ms, fixed: no clock in the decision

uint64_t Refusals(metrics::Registry& r, const char* reason) {
  // Registering again returns the gate's series.
  return r
      .AddCounter("kvstore_client_fence_refusals_total",
                  "One-sided reads refused because the server's fence words said fenced, "
                  "lease lapsed or another cluster map epoch.",
                  {{"reason", reason}})
      ->Value();
}

TEST(FenceGate, SingleNodeWordsAlwaysAdmit) {
  metrics::Registry r;
  FenceGate gate(&r);
  EXPECT_EQ(gate.map_epoch(), 0u);
  // What a single-node server's FencePage holds.
  EXPECT_TRUE(gate.Admit({0, fence::kNoExpiry}, kNow).ok());
  EXPECT_TRUE(gate.Admit({0, fence::kNoExpiry}).ok());  // at the real clock too
  EXPECT_EQ(Refusals(r, "fenced") + Refusals(r, "lease_lapsed") + Refusals(r, "map_epoch"), 0u);
}

TEST(FenceGate, FencedServerIsUnavailable) {
  metrics::Registry r;
  FenceGate gate(&r);
  absl::Status s = gate.Admit({0, 0}, kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(Refusals(r, "fenced"), 1u);
  EXPECT_EQ(Refusals(r, "lease_lapsed"), 0u);
}

TEST(FenceGate, LapsedOrNearlyLapsedLeaseIsUnavailable) {
  metrics::Registry r;
  FenceGate gate(&r);
  const uint64_t now = static_cast<uint64_t>(kNow);
  // In the past, and inside the clock-skew margin: both refused.
  EXPECT_EQ(gate.Admit({0, now - 1}, kNow).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(gate.Admit({0, now + fence::kClockSkewMarginMs}, kNow).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Refusals(r, "lease_lapsed"), 2u);
  // Beyond the margin: admitted.
  EXPECT_TRUE(gate.Admit({0, now + fence::kClockSkewMarginMs + 1}, kNow).ok());
  EXPECT_EQ(Refusals(r, "lease_lapsed"), 2u);
  EXPECT_EQ(Refusals(r, "fenced"), 0u);
}

TEST(FenceGate, OtherMapEpochIsFailedPrecondition) {
  metrics::Registry r;
  FenceGate gate(&r);
  gate.set_map_epoch(7);
  const fence::FenceWords valid{8, fence::kNoExpiry};
  EXPECT_EQ(gate.Admit(valid, kNow).code(), absl::StatusCode::kFailedPrecondition);
  // A single-node reader (epoch 0) refuses a server in a cluster map too.
  gate.set_map_epoch(0);
  EXPECT_EQ(gate.Admit(valid, kNow).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Refusals(r, "map_epoch"), 2u);
  gate.set_map_epoch(8);
  EXPECT_TRUE(gate.Admit(valid, kNow).ok());
  EXPECT_EQ(Refusals(r, "map_epoch"), 2u);
}

// Being fenced outranks an epoch mismatch: the reader must not merely
// refresh its map and come back to a fenced server expecting data.
TEST(FenceGate, FencedOutranksEpochMismatch) {
  metrics::Registry r;
  FenceGate gate(&r);
  gate.set_map_epoch(3);
  EXPECT_EQ(gate.Admit({4, 0}, kNow).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Refusals(r, "fenced"), 1u);
  EXPECT_EQ(Refusals(r, "map_epoch"), 0u);
}

// The words the server encodes are the words the gate judges.
TEST(FenceGate, DecodesWhatTheServerEncodes) {
  metrics::Registry r;
  FenceGate gate(&r);
  gate.set_map_epoch(42);
  alignas(8) unsigned char page[fence::kFenceBytes] = {};
  fence::Encode({42, static_cast<uint64_t>(kNow) + 10'000}, page);
  EXPECT_TRUE(gate.Admit(fence::Decode(page), kNow).ok());
  fence::Encode({42, 0}, page);
  EXPECT_EQ(gate.Admit(fence::Decode(page), kNow).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace client
}  // namespace kvstore
