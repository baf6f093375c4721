// Copyright 2026 The kvstore Authors.
//
// Classify(): the servers' redirect and CLUSTERDOWN wordings over every
// transport, and the answers that must stay final.

#include "client/internal/cluster/cluster_errors.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace client {
namespace {

TEST(ClassifyTest, Redirects) {
  // RESP, as Redis writes it: the TCP path reports the whole text, kUnknown.
  EXPECT_EQ(Classify(absl::UnknownError("MOVED 3999 127.0.0.1:6381")), Verdict::kRedirect);
  EXPECT_EQ(Classify(absl::UnknownError("ASK 3999 127.0.0.1:6381")), Verdict::kRedirect);
  // Through KvStore's own code words, and over gRPC.
  EXPECT_EQ(Classify(absl::FailedPreconditionError("MOVED 3999 127.0.0.1:6381")),
            Verdict::kRedirect);
  EXPECT_EQ(Classify(absl::UnknownError("PRECONDITION MOVED 1 h:1")), Verdict::kRedirect);
  // The RDMA path's fence check, a stale shard epoch.
  EXPECT_EQ(Classify(absl::FailedPreconditionError("fence word names map epoch 7, client has 6")),
            Verdict::kRedirect);
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
