// Copyright 2026 The kvstore Authors.
//
// CommitRights: what a queue pair may commit, fixed when it is connected
// from the principal of the control session that asked for it
// (server/control: the session's Handshake credential). A data client that
// may write commits PUTs and DELETEs; a cluster peer (a primary's replica
// link, opened with the cluster secret) commits replica PUTs and DELETEs;
// nobody else commits anything. Without this a client holding only the data
// token could send a replica commit and install or delete keys on a backup
// behind the primary's back.
//
// Errors (CheckCommitRights): kPermissionDenied naming the operation.
//
// Thread safety: a value type and a pure function.

#ifndef KVSTORE_SERVER_RDMA_COMMIT_RIGHTS_H_
#define KVSTORE_SERVER_RDMA_COMMIT_RIGHTS_H_

#include "absl/status/status.h"
#include "common/protocol/commit_wire.h"

namespace kvstore {
namespace server {

struct CommitRights {
  bool write = false;      // kPut, kDelete: a read-write data client
  bool replicate = false;  // kReplicaPut, kReplicaDelete: a cluster peer
};

// OK when `rights` allow `op`.
absl::Status CheckCommitRights(wire::CommitOp op, const CommitRights& rights);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RDMA_COMMIT_RIGHTS_H_
