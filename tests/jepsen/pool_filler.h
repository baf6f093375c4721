// Copyright 2026 The kvstore Authors.
//
// PoolFiller: the load half of the full-pool fault. A kvserver restarted
// with a small --pool_size copies its shards back and is in sync again;
// then this client writes large values (512 KiB) under keys "fill-<n>" of
// the shards where that node is an in-sync backup (not the primary), so
// its pool runs full while its primaries' (the usual size) do not: the
// backup answers pool-full to replicated writes, and the primary must then
// refuse them or leave them unknown — never acknowledge a write the backup
// does not hold. The filler's own writes are not in the checked history;
// the workload's writes to those shards are, and the replica comparison at
// quiescence sees a backup that missed an acknowledged write.
//
// It writes from a thread of its own until Stop() or `max_bytes`, then
// Stop() deletes what it wrote (best effort: the keys are not checked).
//
// Thread safety: Start/Stop from one thread.

#ifndef KVSTORE_TESTS_JEPSEN_POOL_FILLER_H_
#define KVSTORE_TESTS_JEPSEN_POOL_FILLER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "proto/kv_cluster.pb.h"

namespace kvstore {
namespace jepsen {

class PoolFiller {
 public:
  // `seeds`: control addresses for the client; `map`: the current map, to
  // find the shards `node_id` backs.
  PoolFiller(std::vector<std::string> seeds, const v1::ClusterMap& map, std::string node_id,
             uint64_t max_bytes);
  ~PoolFiller();

  // kFailedPrecondition when the node backs no shard that owns slots.
  absl::Status Start();
  void Stop();
  // "N written (B bytes), R refused, U unknown; first error: ...".
  std::string Summary() const;

 private:
  void Run();

  const std::vector<std::string> seeds_;
  std::vector<std::string> keys_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> attempted_{0}, written_{0}, refused_{0}, unknown_{0};
  std::string first_error_;  // written by the thread, read after join
};

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_POOL_FILLER_H_
