// Copyright 2026 The kvstore Authors.
//
// The rights check every RDMA commit passes (no NIC needed); the path that
// applies it to a real queue pair runs in tests/rdma_auth_test (VM).

#include "server/rdma/commit_rights.h"

#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

using wire::CommitOp;

TEST(CommitRightsTest, ReplicaCommitsNeedAPeersQueuePair) {
  const CommitRights client{/*write=*/true, /*replicate=*/false};
  const CommitRights peer{/*write=*/false, /*replicate=*/true};
  const CommitRights reader{};
  for (CommitOp op : {CommitOp::kReplicaPut, CommitOp::kReplicaDelete}) {
    EXPECT_EQ(CheckCommitRights(op, client).code(), absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(CheckCommitRights(op, reader).code(), absl::StatusCode::kPermissionDenied);
    EXPECT_TRUE(CheckCommitRights(op, peer).ok());
  }
  for (CommitOp op : {CommitOp::kPut, CommitOp::kDelete}) {
    EXPECT_TRUE(CheckCommitRights(op, client).ok());
    EXPECT_EQ(CheckCommitRights(op, reader).code(), absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(CheckCommitRights(op, peer).code(), absl::StatusCode::kPermissionDenied);
  }
  EXPECT_FALSE(CheckCommitRights(static_cast<CommitOp>(9), peer).ok());
}

}  // namespace
}  // namespace server
}  // namespace kvstore
