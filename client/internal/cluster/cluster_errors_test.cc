// Copyright 2026 The kvstore Authors.
//
// Classify(): the typed refusals as they arrive over every transport (a
// status with the refusal payload over gRPC and RDMA, Redis Cluster's words
// decoded over RESP), the statuses classified by their code, and the
// answers that must stay final. Text is never read: a message that merely
// looks like a refusal is classified by its code.

#include "client/internal/cluster/cluster_errors.h"

#include <optional>

#include "absl/status/status.h"
#include "common/cluster/refusal.h"
#include "common/protocol/fence.h"
#include "common/protocol/resp.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

using cluster::Refusal;
using cluster::ToStatus;

TEST(ClassifyTest, Redirects) {
  EXPECT_EQ(Classify(ToStatus(Refusal::Moved(3999, "n2", "127.0.0.1:7001"))), Verdict::kRedirect);
  // Over RESP, in Redis's words.
  EXPECT_EQ(Classify(resp::RespErrorToStatus("MOVED 3999 127.0.0.1:6381")), Verdict::kRedirect);
  EXPECT_EQ(Classify(ToStatus(Refusal::StaleShardEpoch("3 < 4"))), Verdict::kRedirect);
  // The RDMA path's fence check: another map epoch, a typed refusal.
  EXPECT_EQ(Classify(fence::Check({7, fence::kNoExpiry}, 6, 0)), Verdict::kRedirect);
  EXPECT_EQ(Classify(fence::Check({6, 0}, 6, 0)), Verdict::kDown);
}

TEST(ClassifyTest, AsksNameTheirNode) {
  const absl::Status grpc = ToStatus(Refusal::Ask(3999, "n3", "10.0.0.2:7001"));
  EXPECT_EQ(Classify(grpc), Verdict::kAsk);
  std::optional<AskTarget> t = ParseAsk(grpc);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->slot, 3999u);
  EXPECT_EQ(t->node_id, "n3");
  EXPECT_EQ(t->address, "10.0.0.2:7001");
  // Over RESP: the address only.
  const absl::Status resp = resp::RespErrorToStatus("ASK 7 h:1");
  EXPECT_EQ(Classify(resp), Verdict::kAsk);
  t = ParseAsk(resp);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->slot, 7u);
  EXPECT_TRUE(t->node_id.empty());
  EXPECT_EQ(t->address, "h:1");
  EXPECT_FALSE(ParseAsk(ToStatus(Refusal::Moved(5, "n", "h:1"))).has_value());
  EXPECT_FALSE(ParseAsk(absl::FailedPreconditionError("ASK 5 h:1")).has_value());
}

TEST(ClassifyTest, TryAgainAndDown) {
  EXPECT_EQ(Classify(ToStatus(Refusal::TryAgain(12, "is being handed to another shard"))),
            Verdict::kTryAgain);
  EXPECT_EQ(Classify(resp::RespErrorToStatus("TRYAGAIN Hash slot 12 is being handed")),
            Verdict::kTryAgain);
  EXPECT_EQ(Classify(ToStatus(Refusal::ClusterDown("The cluster is down"))), Verdict::kDown);
  EXPECT_EQ(Classify(resp::RespErrorToStatus("CLUSTERDOWN The cluster is down")), Verdict::kDown);
  EXPECT_EQ(Classify(ToStatus(Refusal::MapBehind("x"))), Verdict::kDown);
  EXPECT_EQ(Classify(ToStatus(Refusal::StaleServerEpoch("x"))), Verdict::kDown);
  // RESP's generic word for UNAVAILABLE is no handoff: the node is not serving.
  EXPECT_EQ(Classify(resp::RespErrorToStatus("TRYAGAIN key kept changing")), Verdict::kDown);
  EXPECT_EQ(Classify(absl::UnavailableError("connection to 127.0.0.1:1 lost")), Verdict::kDown);
}

TEST(ClassifyTest, MessagesAreNotRead) {
  // No payload: the code decides, whatever the words say.
  EXPECT_EQ(Classify(absl::FailedPreconditionError("ASK 3 h:1")), Verdict::kRedirect);
  EXPECT_EQ(Classify(absl::UnavailableError("TRYAGAIN Hash slot 1")), Verdict::kDown);
  EXPECT_EQ(Classify(absl::UnknownError("MOVED 1 h:1")), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::UnknownError("CLUSTERDOWN x")), Verdict::kFinal);
}

// A write that may have taken effect must not be sent again: every
// outcome-unknown refusal is final, whatever its kind.
TEST(ClassifyTest, OutcomeUnknownIsFinal) {
  for (const Refusal& r :
       {Refusal::Moved(1, "n", "h:1"), Refusal::Ask(1, "n", "h:1"), Refusal::TryAgain(1, "x"),
        Refusal::ClusterDown(1, "cannot drop failed backup n2"), Refusal::MapBehind("x")}) {
    EXPECT_EQ(Classify(ToStatus(r.WithUnknownEffect())), Verdict::kFinal) << ToStatus(r);
  }
  EXPECT_EQ(Classify(ToStatus(Refusal::NotPublished("INTERNAL: x"))), Verdict::kFinal);
  EXPECT_EQ(
      Classify(resp::RespErrorToStatus("UNKNOWN outcome unknown: CLUSTERDOWN Hash slot 1 fenced")),
      Verdict::kFinal);
  EXPECT_FALSE(ParseAsk(ToStatus(Refusal::Ask(1, "n", "h:1").WithUnknownEffect())).has_value());
}

// Certainly not stored (a replica's pool is full), yet final: sending it
// again at once would only meet the same full pool.
TEST(ClassifyTest, NotStoredIsFinal) {
  EXPECT_EQ(Classify(ToStatus(Refusal::NotStored("on replica n1: pool full"))), Verdict::kFinal);
  EXPECT_EQ(Classify(resp::RespErrorToStatus("OOM not stored: on replica n1: pool full")),
            Verdict::kFinal);
}

TEST(ClassifyTest, FinalAnswers) {
  EXPECT_EQ(Classify(absl::OkStatus()), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::NotFoundError("key not found")), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::InvalidArgumentError("key too long")), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::DeadlineExceededError("op_timeout")), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::UnauthenticatedError("bad token")), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::UnknownError("some other error")), Verdict::kFinal);
  // A lost session is ServerLink's to cure, not a stale map.
  EXPECT_EQ(Classify(ToStatus(Refusal::SessionLost("no live session 7: handshake again"))),
            Verdict::kFinal);
}

}  // namespace
}  // namespace client
}  // namespace kvstore
