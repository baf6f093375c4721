// Copyright 2026 The kvstore Authors.

#include "common/protocol/fence.h"

#include "gtest/gtest.h"

namespace kvstore {
namespace fence {
namespace {

TEST(Fence, RoundTripsThroughBytes) {
  char bytes[kFenceBytes] = {};
  Encode({42, 1234567}, bytes);
  FenceWords w = Decode(bytes);
  EXPECT_EQ(w.map_epoch, 42u);
  EXPECT_EQ(w.valid_until_ms, 1234567u);
}

TEST(Fence, SingleNodeNeverExpires) {
  EXPECT_TRUE(Check({0, kNoExpiry}, 0, 1'000'000'000'000).ok());
}

TEST(Fence, FencedOrLapsedServersAreRefused) {
  EXPECT_EQ(Check({5, 0}, 5, 1000).code(), absl::StatusCode::kUnavailable);
  // Valid until 10 000 ms: fine well before, refused inside the skew margin.
  EXPECT_TRUE(Check({5, 10'000}, 5, 10'000 - kClockSkewMarginMs - 1).ok());
  EXPECT_EQ(Check({5, 10'000}, 5, 10'000 - kClockSkewMarginMs).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Check({5, 10'000}, 5, 20'000).code(), absl::StatusCode::kUnavailable);
}

TEST(Fence, AMapEpochMismatchAsksForARefresh) {
  EXPECT_EQ(Check({6, 10'000}, 5, 0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Check({5, 10'000}, 6, 0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Check({0, kNoExpiry}, 3, 0).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JudgeExpiry, OnlyTheSkewWindowAroundTheExpiryGoesToTheServer) {
  const int64_t now = 1'800'000'000'000;
  const int64_t m = kClockSkewMarginMs;
  EXPECT_EQ(JudgeExpiry(0, now), ExpiryVerdict::kLive);
  EXPECT_EQ(JudgeExpiry(now + m + 1, now), ExpiryVerdict::kLive);
  EXPECT_EQ(JudgeExpiry(now + m, now), ExpiryVerdict::kUncertain);
  EXPECT_EQ(JudgeExpiry(now, now), ExpiryVerdict::kUncertain);
  EXPECT_EQ(JudgeExpiry(now - m + 1, now), ExpiryVerdict::kUncertain);
  EXPECT_EQ(JudgeExpiry(now - m, now), ExpiryVerdict::kExpired);
  // Whatever the skew within the margin, a value the server holds expired
  // (server clock >= expiry) is never judged live.
  for (int64_t skew = -m; skew <= m; skew += 50) {
    const int64_t server_now = now + skew;
    EXPECT_NE(JudgeExpiry(server_now, now), ExpiryVerdict::kLive) << skew;
  }
}

}  // namespace
}  // namespace fence

}  // namespace kvstore
