// Copyright 2026 The kvstore Authors.
//
// Which writes the cluster client may send again (NoEffect) and what one
// that it may not send again returns (WriteOutcome): only a write certainly
// refused before it took effect is resent; every other failure after the
// write left the client says its outcome is unknown.

#include "client/internal/cluster/retry_budget.h"

#include <string>

#include "client/internal/data_path.h"
#include "common/cluster/refusal.h"
#include "common/protocol/resp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

using cluster::Refusal;
using cluster::ToStatus;
using ::testing::HasSubstr;

TEST(NoEffect, ARefusalOfNoEffectMayBeSentAgain) {
  EXPECT_TRUE(NoEffect(ToStatus(Refusal::Moved(12, "n2", "h:1")), /*sent=*/true));
  EXPECT_TRUE(NoEffect(resp::RespErrorToStatus("MOVED 12 10.0.0.2:6379"), true));
  EXPECT_TRUE(NoEffect(resp::RespErrorToStatus("ASK 12 10.0.0.2:6379"), true));
  EXPECT_TRUE(NoEffect(resp::RespErrorToStatus("TRYAGAIN Hash slot 12 is being handed"), true));
  EXPECT_TRUE(NoEffect(resp::RespErrorToStatus("CLUSTERDOWN The cluster is down"), true));
  // Never sent at all.
  EXPECT_TRUE(NoEffect(absl::UnavailableError("no link"), /*sent=*/false));
  EXPECT_TRUE(NoEffect(NotSent(absl::UnavailableError("connect failed")), true));
}

// The old client sent these again: a cluster-down answer given after the
// backups installed the write (its text names the kind), and a failed
// precondition (a backup's newer shard epoch passed on after others had
// installed it) read as a redirect.
TEST(NoEffect, AWriteThatMayHaveTakenEffectIsNotSentAgain) {
  EXPECT_FALSE(
      NoEffect(resp::RespErrorToStatus(
                   "UNKNOWN outcome unknown: CLUSTERDOWN Hash slot 4 cannot drop failed backup n2"),
               true));
  EXPECT_FALSE(NoEffect(
      ToStatus(Refusal::TryAgain(4, "migration target n2 unavailable").WithUnknownEffect()), true));
  EXPECT_FALSE(NoEffect(resp::RespErrorToStatus("PRECONDITION stale shard epoch 3 < 4"), true));
  EXPECT_FALSE(NoEffect(absl::UnavailableError("CLUSTERDOWN words without the type"), true));
  EXPECT_FALSE(NoEffect(absl::UnavailableError("connection reset"), true));
  EXPECT_FALSE(NoEffect(absl::DeadlineExceededError("attempt timed out"), true));
}

TEST(WriteOutcome, SaysTheOutcomeIsUnknown) {
  const absl::Status broke = WriteOutcome(absl::UnavailableError("connection reset"));
  EXPECT_EQ(broke.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(broke.message(), "outcome unknown: UNAVAILABLE: connection reset");
  const absl::Status slow = WriteOutcome(absl::DeadlineExceededError("attempt timed out"));
  EXPECT_EQ(slow.code(), absl::StatusCode::kUnknown);
  EXPECT_THAT(std::string(slow.message()), HasSubstr("outcome unknown: DEADLINE_EXCEEDED"));
  // The server's own outcome-unknown refusal stands as it is.
  const absl::Status server = ToStatus(Refusal::ClusterDown(4, "fenced").WithUnknownEffect());
  EXPECT_EQ(WriteOutcome(server), server);
  // Answers stand.
  EXPECT_EQ(WriteOutcome(absl::NotFoundError("key not found")),
            absl::NotFoundError("key not found"));
  EXPECT_EQ(WriteOutcome(absl::ResourceExhaustedError("pool full")),
            absl::ResourceExhaustedError("pool full"));
}

TEST(GaveUp, KeepsTheRefusal) {
  RetryBudget budget(3, absl::InfiniteFuture());
  budget.Begin();
  const absl::Status s = GaveUp(ToStatus(Refusal::Moved(1, "n", "h:1")), budget, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("gave up after 1 attempt(s); map epoch 9"));
  EXPECT_EQ(cluster::FromStatus(s), Refusal::Moved(1, "n", "h:1"));
}

}  // namespace
}  // namespace client
}  // namespace kvstore
