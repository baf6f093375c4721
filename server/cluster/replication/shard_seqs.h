// Copyright 2026 The kvstore Authors.
//
// ShardSeqs: the replication sequence number of every shard this node has
// written or installed (architecture §19.3). As primary the replicator takes
// the shard's next seq for each write; as backup the installer records the
// highest seq it applied (ReplicaStatus.applied_seq, which the controller
// compares to promote the replica with the newest data). Sharing one table
// keeps a promoted backup's seqs increasing from where it left off.
//
// Thread safety: thread-safe.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_SHARD_SEQS_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_SHARD_SEQS_H_

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace server {

class ShardSeqs {
 public:
  // The shard's next seq (the last one + 1), recorded as the last.
  uint64_t Next(uint32_t shard_id) {
    absl::MutexLock lock(&mu_);
    return ++last_[shard_id];
  }
  // Records that `seq` was applied; the last seq never goes down.
  void Applied(uint32_t shard_id, uint64_t seq) {
    absl::MutexLock lock(&mu_);
    uint64_t& last = last_[shard_id];
    last = std::max(last, seq);
  }
  // The highest seq taken or applied for the shard; 0 for none.
  uint64_t Last(uint32_t shard_id) const {
    absl::MutexLock lock(&mu_);
    auto it = last_.find(shard_id);
    return it == last_.end() ? 0 : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, uint64_t> last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_SHARD_SEQS_H_
