// Copyright 2026 The kvstore Authors.
//
// Classify(): the servers' redirect and CLUSTERDOWN wordings over every
// transport, and the answers that must stay final.

#include "client/internal/cluster/cluster_errors.h"

#include <optional>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

TEST(ClassifyTest, Redirects) {
  // RESP, as Redis writes it: the TCP path reports the whole text, kUnknown.
  EXPECT_EQ(Classify(absl::UnknownError("MOVED 3999 127.0.0.1:6381")), Verdict::kRedirect);
  // Through KvStore's own code words, and over gRPC.
  EXPECT_EQ(Classify(absl::FailedPreconditionError("MOVED 3999 127.0.0.1:6381")),
            Verdict::kRedirect);
  EXPECT_EQ(Classify(absl::UnknownError("PRECONDITION MOVED 1 h:1")), Verdict::kRedirect);
  // The RDMA path's fence check, a stale shard epoch.
  EXPECT_EQ(Classify(absl::FailedPreconditionError("fence word names map epoch 7, client has 6")),
            Verdict::kRedirect);
}

TEST(ClassifyTest, Ask) {
  // RESP (the TCP path: kUnknown, the whole text), gRPC, KvStore's words.
  EXPECT_EQ(Classify(absl::UnknownError("ASK 3999 127.0.0.1:6381")), Verdict::kAsk);
  EXPECT_EQ(Classify(absl::FailedPreconditionError("ASK 3999 127.0.0.1:7001")), Verdict::kAsk);
  EXPECT_EQ(Classify(absl::UnknownError("PRECONDITION ASK 12 h:1")), Verdict::kAsk);
  EXPECT_EQ(Classify(absl::UnknownError("TRYAGAIN ASK 12 h:1")), Verdict::kAsk);
  std::optional<AskTarget> t = ParseAsk(absl::FailedPreconditionError("ASK 3999 10.0.0.2:7001"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->slot, 3999u);
  EXPECT_EQ(t->address, "10.0.0.2:7001");
  t = ParseAsk(absl::UnknownError("PRECONDITION ASK 7 h:1"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->slot, 7u);
  EXPECT_EQ(t->address, "h:1");
  // No address: the slot is still read (the client then asks the map).
  t = ParseAsk(absl::FailedPreconditionError("ASK 5"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->address, "");
  EXPECT_FALSE(ParseAsk(absl::FailedPreconditionError("ASK x h:1")).has_value());
  EXPECT_FALSE(ParseAsk(absl::FailedPreconditionError("MOVED 5 h:1")).has_value());
  EXPECT_FALSE(ParseAsk(absl::OkStatus()).has_value());
}

TEST(ClassifyTest, TryAgain) {
  // gRPC slow path (control_service.cc RouteKey) and the write hook's text.
  EXPECT_EQ(
      Classify(absl::UnavailableError("TRYAGAIN hash slot 12 is being handed to another shard")),
      Verdict::kTryAgain);
  EXPECT_EQ(Classify(absl::UnavailableError("TRYAGAIN")), Verdict::kTryAgain);
  // RESP: "-TRYAGAIN Hash slot 12 ..." as the TCP path reports it (the word
  // became the code), and as a kUnknown text.
  EXPECT_EQ(Classify(absl::UnavailableError(
                "Hash slot 12 is being handed to another shard; retry shortly")),
            Verdict::kTryAgain);
  EXPECT_EQ(Classify(absl::UnknownError("TRYAGAIN Hash slot 12 is being handed")),
            Verdict::kTryAgain);
  // TRYAGAIN as KvStore's code word for kUnavailable in front of another
  // cluster word is that word's verdict.
  EXPECT_EQ(Classify(absl::UnknownError("TRYAGAIN CLUSTERDOWN no primary")), Verdict::kDown);
  EXPECT_EQ(Classify(absl::UnknownError("TRYAGAIN MOVED 1 h:1")), Verdict::kRedirect);
  // Not every kUnavailable is a TRYAGAIN: an unreachable node is kDown.
  EXPECT_EQ(Classify(absl::UnavailableError("slot 12 unreachable")), Verdict::kDown);
}

TEST(ClassifyTest, DownAndUnreachable) {
  EXPECT_EQ(Classify(absl::UnavailableError("CLUSTERDOWN shard 2 has no primary")), Verdict::kDown);
  EXPECT_EQ(Classify(absl::UnknownError("CLUSTERDOWN The cluster is down")), Verdict::kDown);
  EXPECT_EQ(Classify(absl::UnavailableError("connection to 127.0.0.1:1 lost")), Verdict::kDown);
}

TEST(ClassifyTest, FinalAnswers) {
  EXPECT_EQ(Classify(absl::OkStatus()), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::NotFoundError("key not found")), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::InvalidArgumentError("key too long")), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::DeadlineExceededError("op_timeout")), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::UnauthenticatedError("bad token")), Verdict::kFinal);
  EXPECT_EQ(Classify(absl::UnknownError("some other error")), Verdict::kFinal);
  // A lost session is ServerLink's to cure, not a stale map.
  EXPECT_EQ(Classify(absl::FailedPreconditionError("no live session: handshake again")),
            Verdict::kFinal);
}

}  // namespace
}  // namespace client
}  // namespace kvstore
