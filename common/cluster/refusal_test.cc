// Copyright 2026 The kvstore Authors.
//
// The refusal codec: every kind through absl::Status, through a gRPC hop
// (common/grpc_status), and through RESP text; the exact Redis Cluster
// wording; what the effect says and who may resend. The RESP encoder's and
// the RDMA ack's use of the codec are tested beside them
// (common/protocol/resp_test.cc, commit_wire_test.cc).

#include "common/cluster/refusal.h"

#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "common/grpc_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace cluster {
namespace {

using ::testing::StartsWith;

// One refusal of every kind, as the producers make them.
std::vector<Refusal> EveryKind() {
  return {
      Refusal::Moved(12, "n2", "10.0.0.2:6379"),
      Refusal::Ask(16383, "n3", "[::1]:7001"),
      Refusal::TryAgain(7, "is being handed to another shard; retry shortly"),
      Refusal::ClusterDown("The cluster is down"),
      Refusal::ClusterDown(5, "not served: its shard has no primary"),
      Refusal::ClusterDown(""),
      Refusal::MapBehind("shard 3 epoch 9 not in this node's map (epoch 4)"),
      Refusal::StaleShardEpoch("3 < 4 of shard 1; refresh the map"),
      Refusal::SessionLost("no live session 77 (expired or never opened): handshake again"),
      Refusal::StaleServerEpoch("stale epoch 41, server epoch 42: handshake again"),
      Refusal::NotPublished("RESOURCE_EXHAUSTED: index full"),
      Refusal::NotClustered("this server is not in a cluster"),
      Refusal::NotStored("on replica n1: RESOURCE_EXHAUSTED: pool full"),
  };
}

std::vector<Refusal> EveryKindAndEffect() {
  std::vector<Refusal> out;
  for (const Refusal& r : EveryKind()) {
    out.push_back(r);
    out.push_back(r.WithUnknownEffect());
  }
  return out;
}

TEST(Refusal, FactoriesSayNoEffectExceptNotPublished) {
  for (const Refusal& r : EveryKind()) {
    EXPECT_EQ(r.effect, r.kind == RefusalKind::kNotPublished ? Effect::kUnknown : Effect::kNone)
        << ToStatus(r);
  }
  EXPECT_EQ(Refusal::Moved(1, "n", "h:1").WithUnknownEffect().effect, Effect::kUnknown);
}

TEST(Refusal, RoundTripsThroughStatus) {
  for (const Refusal& r : EveryKindAndEffect()) {
    const absl::Status s = ToStatus(r);
    EXPECT_FALSE(s.ok());
    std::optional<Refusal> back = FromStatus(s);
    ASSERT_TRUE(back.has_value()) << s;
    EXPECT_EQ(*back, r) << s;
    EXPECT_TRUE(IsRefusal(s, r.kind));
  }
}

TEST(Refusal, StatusCodesAndTextFollowTheTable) {
  absl::Status moved = ToStatus(Refusal::Moved(12, "n2", "10.0.0.2:6379"));
  EXPECT_EQ(moved.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(moved.message(), "MOVED 12 10.0.0.2:6379");
  absl::Status ask = ToStatus(Refusal::Ask(3, "n3", "h:1"));
  EXPECT_EQ(ask.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ask.message(), "ASK 3 h:1");
  absl::Status again = ToStatus(Refusal::TryAgain(7, "retry shortly"));
  EXPECT_EQ(again.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(again.message(), "Hash slot 7 retry shortly");  // RESP adds the word
  absl::Status down = ToStatus(Refusal::ClusterDown(5, "no primary"));
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(down.message(), "CLUSTERDOWN Hash slot 5 no primary");
  EXPECT_EQ(ToStatus(Refusal::MapBehind("x")).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ToStatus(Refusal::MapBehind("x")).message(), "map behind: x");
  EXPECT_EQ(ToStatus(Refusal::StaleShardEpoch("y")).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ToStatus(Refusal::SessionLost("z")).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ToStatus(Refusal::StaleServerEpoch("w")).code(), absl::StatusCode::kUnavailable);
  // Every outcome-unknown refusal: UNKNOWN, and a message that says so.
  for (const Refusal& r : EveryKind()) {
    const absl::Status s = ToStatus(r.WithUnknownEffect());
    EXPECT_EQ(s.code(), absl::StatusCode::kUnknown) << s;
    EXPECT_THAT(std::string(s.message()), StartsWith("outcome unknown: ")) << s;
  }
}

TEST(Refusal, OnlyThePayloadIsRead) {
  // The words alone are not a refusal any more: no classifier reads text.
  EXPECT_FALSE(FromStatus(absl::FailedPreconditionError("MOVED 12 10.0.0.2:6379")).has_value());
  EXPECT_FALSE(FromStatus(absl::UnavailableError("CLUSTERDOWN The cluster is down")).has_value());
  EXPECT_FALSE(FromStatus(absl::OkStatus()).has_value());
  absl::Status junk = absl::UnavailableError("x");
  junk.SetPayload(kRefusalPayload, absl::Cord("\xff\xff\xff not a proto"));
  EXPECT_FALSE(FromStatus(junk).has_value());
  // A kind from a newer build is no refusal here.
  absl::Status newer = absl::UnavailableError("x");
  newer.SetPayload(kRefusalPayload, absl::Cord(std::string("\x08\x63", 2)));  // kind = 99
  EXPECT_FALSE(FromStatus(newer).has_value());
}

TEST(Refusal, RoundTripsThroughGrpcBothWays) {
  for (const Refusal& r : EveryKindAndEffect()) {
    const absl::Status s = ToStatus(r);
    const grpc::Status wire = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(wire.error_code()), static_cast<int>(s.code()));
    EXPECT_EQ(wire.error_message(), s.message());
    EXPECT_FALSE(wire.error_details().empty());
    const absl::Status back = FromGrpcStatus(wire);
    EXPECT_EQ(back.code(), s.code());
    EXPECT_EQ(back.message(), s.message());
    ASSERT_TRUE(FromStatus(back).has_value()) << back;
    EXPECT_EQ(*FromStatus(back), r);
    // And once more, as a server passes on a peer's answer.
    EXPECT_EQ(FromStatus(FromGrpcStatus(ToGrpcStatus(back))), r);
  }
}

TEST(Refusal, RespTextIsRedisClustersWording) {
  EXPECT_EQ(RespText(Refusal::Moved(12, "n2", "10.0.0.2:6379")), "MOVED 12 10.0.0.2:6379");
  EXPECT_EQ(RespText(Refusal::Ask(12, "n2", "10.0.0.2:6379")), "ASK 12 10.0.0.2:6379");
  EXPECT_EQ(RespText(Refusal::TryAgain(9, "is being handed to another shard; retry shortly")),
            "TRYAGAIN Hash slot 9 is being handed to another shard; retry shortly");
  EXPECT_EQ(RespText(Refusal::ClusterDown("The cluster is down")),
            "CLUSTERDOWN The cluster is down");
  EXPECT_EQ(RespText(Refusal::ClusterDown(4, "cannot drop failed backup n2").WithUnknownEffect()),
            "UNKNOWN outcome unknown: CLUSTERDOWN Hash slot 4 cannot drop failed backup n2");
  EXPECT_EQ(RespText(Refusal::NotPublished("INTERNAL: x")),
            "UNKNOWN outcome unknown: not published: INTERNAL: x");
  // A replica that could not store a write: RESP's word for a memory
  // refusal, the one any RESOURCE_EXHAUSTED gets.
  EXPECT_EQ(RespText(Refusal::NotStored("on replica n1: RESOURCE_EXHAUSTED: pool full")),
            "OOM not stored: on replica n1: RESOURCE_EXHAUSTED: pool full");
  EXPECT_EQ(RespText(Refusal::NotStored("x").WithUnknownEffect()),
            "UNKNOWN outcome unknown: not stored: x");
  // Peer and control-plane kinds have no RESP form of their own.
  EXPECT_FALSE(RespText(Refusal::MapBehind("x")).has_value());
  EXPECT_FALSE(RespText(Refusal::StaleShardEpoch("x")).has_value());
  EXPECT_FALSE(RespText(Refusal::SessionLost("x")).has_value());
  EXPECT_FALSE(RespText(Refusal::StaleServerEpoch("x")).has_value());
}

TEST(Refusal, RoundTripsThroughRespTextWithoutTheNodeId) {
  for (const Refusal& r : EveryKindAndEffect()) {
    std::optional<std::string> text = RespText(r);
    if (!text.has_value()) continue;
    Refusal expected = r;
    expected.node_id.clear();  // RESP names the address only
    EXPECT_EQ(ParseRespText(*text), expected) << *text;
  }
}

TEST(Refusal, ParsesWhatRedisAndOlderServersSend) {
  EXPECT_EQ(ParseRespText("MOVED 3999 127.0.0.1:6381"), Refusal::Moved(3999, "", "127.0.0.1:6381"));
  EXPECT_EQ(ParseRespText("ASK 5"), Refusal::Ask(5, "", ""));
  EXPECT_EQ(ParseRespText("CLUSTERDOWN The cluster is down"),
            Refusal::ClusterDown("The cluster is down"));
  EXPECT_EQ(ParseRespText("CLUSTERDOWN"), Refusal::ClusterDown(""));
  EXPECT_EQ(ParseRespText("TRYAGAIN Hash slot 12 is being handed"),
            Refusal::TryAgain(12, "is being handed"));
}

TEST(Refusal, ParseRejectsEverythingElse) {
  for (absl::string_view text : {"TRYAGAIN busy",
                                 "TRYAGAIN",
                                 "TRYAGAIN Hash slot x",
                                 "MOVED x h:1",
                                 "MOVED 5 h:1 extra",
                                 "MOVED",
                                 "ASK",
                                 "ERR MOVED 1 h:1",
                                 "PRECONDITION MOVED 1 h:1",
                                 "UNKNOWN something",
                                 "UNKNOWN outcome unknown: nothing we know",
                                 "WRONGTYPE x",
                                 "",
                                 "map behind: x",
                                 "MOVEDX 1 h:1",
                                 "CLUSTERDOWNX",
                                 "MOVED 07 h:1",
                                 "TRYAGAIN Hash slot 5 ",
                                 "CLUSTERDOWN ",
                                 "UNKNOWN outcome unknown: map behind: ",
                                 "OOM command not allowed when used memory > 'maxmemory'",
                                 "OOM map behind: x",
                                 "OOM not stored: "}) {
    EXPECT_FALSE(ParseRespText(text).has_value()) << text;
  }
}

TEST(Refusal, OnlyANoEffectRefusalMaySendAWriteAgain) {
  for (const Refusal& r : EveryKind()) {
    EXPECT_EQ(CertainlyNoEffect(ToStatus(r)), r.kind != RefusalKind::kNotPublished) << ToStatus(r);
    EXPECT_FALSE(CertainlyNoEffect(ToStatus(r.WithUnknownEffect()))) << ToStatus(r);
  }
  // Errors without a refusal may have taken effect (a broken connection,
  // a timeout, a store error after replication).
  EXPECT_FALSE(CertainlyNoEffect(absl::UnavailableError("connection reset")));
  EXPECT_FALSE(CertainlyNoEffect(absl::DeadlineExceededError("timeout")));
  EXPECT_FALSE(CertainlyNoEffect(absl::OkStatus()));
}

TEST(Refusal, OutcomeUnknownKeepsTheKindOrNamesTheError) {
  const absl::Status down = OutcomeUnknown(ToStatus(Refusal::ClusterDown(3, "fenced")));
  EXPECT_EQ(down.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(FromStatus(down), Refusal::ClusterDown(3, "fenced").WithUnknownEffect());
  const absl::Status store = OutcomeUnknown(absl::ResourceExhaustedError("index full"));
  EXPECT_EQ(store.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(FromStatus(store), Refusal::NotPublished("RESOURCE_EXHAUSTED: index full"));
  EXPECT_EQ(store.message(), "outcome unknown: not published: RESOURCE_EXHAUSTED: index full");
  EXPECT_TRUE(OutcomeUnknown(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace cluster
}  // namespace kvstore
