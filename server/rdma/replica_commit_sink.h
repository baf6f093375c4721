// Copyright 2026 The kvstore Authors.
//
// ReplicaCommitSink: what a backup does with a replica commit that arrived
// over RDMA (common/protocol/commit_wire.h kReplicaPut / kReplicaDelete;
// architecture §19.3). RdmaService parses the message and, for a put, checks
// the lease (holder, liveness, range) as for a client's PUT; the sink makes
// the replication checks (shard epoch, sender, this node's role, per-key
// order while syncing) and installs. In cluster mode the ReplicaInstaller is
// the sink; without one, replica commits are refused.
//
// Thread safety: implementations are called from the RDMA poller thread
// and must be thread-safe against their other callers.

#ifndef KVSTORE_SERVER_RDMA_REPLICA_COMMIT_SINK_H_
#define KVSTORE_SERVER_RDMA_REPLICA_COMMIT_SINK_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace server {

// One replicated write as the wire carries it; views borrow the message
// (and, for a put, the entry bytes in the lease chunk).
struct ReplicaCommit {
  uint32_t shard_id = 0;
  uint64_t shard_epoch = 0;
  uint64_t seq = 0;
  absl::string_view primary_node_id;
  uint64_t primary_incarnation = 0;
  bool is_delete = false;
  absl::string_view key;    // a delete's key (a put's is in its entry)
  absl::string_view entry;  // a put's entry, in place in the lease chunk
};

class ReplicaCommitSink {
 public:
  virtual ~ReplicaCommitSink() = default;
  // Checks `commit` and applies it: a put by calling `install` (which
  // publishes the entry in place), a delete by unpublishing its key. Returns
  // the status acknowledged to the primary: OK; the refusals of a Replicate
  // RPC (a kMapBehind or kStaleShardEpoch refusal, common/cluster/refusal.h;
  // kFailedPrecondition for a sender or role mismatch); `install`'s error.
  virtual absl::Status ApplyReplicaCommit(const ReplicaCommit& commit,
                                          absl::FunctionRef<absl::Status()> install) = 0;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RDMA_REPLICA_COMMIT_SINK_H_
