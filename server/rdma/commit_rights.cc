// Copyright 2026 The kvstore Authors.

#include "server/rdma/commit_rights.h"

namespace kvstore {
namespace server {

absl::Status CheckCommitRights(wire::CommitOp op, const CommitRights& rights) {
  switch (op) {
    case wire::CommitOp::kPut:
    case wire::CommitOp::kDelete:
      if (rights.write) return absl::OkStatus();
      return absl::PermissionDeniedError(
          "this queue pair's session may not write (a read-only user or a cluster peer)");
    case wire::CommitOp::kReplicaPut:
    case wire::CommitOp::kReplicaDelete:
    case wire::CommitOp::kReplicaPutBatch:
      if (rights.replicate) return absl::OkStatus();
      return absl::PermissionDeniedError(
          "replica commit on a queue pair that is not a cluster peer's (its session was not "
          "opened with the cluster secret)");
  }
  return absl::InvalidArgumentError("unknown commit op");
}

}  // namespace server
}  // namespace kvstore
