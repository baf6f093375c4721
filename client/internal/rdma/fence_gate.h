// Copyright 2026 The kvstore Authors.
//
// FenceGate: a one-sided reader's check of the fence words it READ in the
// same doorbell batch as its bucket READs (docs/architecture.md §19.5,
// common/protocol/fence.h). A NIC answers READs for a server that is frozen
// or has lost its lease, so the reader, not the server, must refuse such
// data: the gate holds the cluster map epoch the reader routes by and
// applies fence::Check to the words at the reader's wall clock.
//
// Refusals are counted in the client's registry as
// kvstore_client_fence_refusals_total{reason="fenced"|"lease_lapsed"|"map_epoch"}
// (registering again returns the same series, so a rebuilt path adds to it).
//
// Thread safety: thread-safe; the epoch is an atomic, the counters are.

#ifndef KVSTORE_CLIENT_INTERNAL_RDMA_FENCE_GATE_H_
#define KVSTORE_CLIENT_INTERNAL_RDMA_FENCE_GATE_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "common/metrics/registry.h"
#include "common/protocol/fence.h"

namespace kvstore {
namespace client {

class FenceGate {
 public:
  // `registry` (not owned) must outlive the gate.
  explicit FenceGate(metrics::Registry* registry);
  FenceGate(const FenceGate&) = delete;
  FenceGate& operator=(const FenceGate&) = delete;

  // The cluster map epoch the caller routes by (0: single-node).
  void set_map_epoch(uint64_t epoch) { map_epoch_.store(epoch, std::memory_order_relaxed); }
  uint64_t map_epoch() const { return map_epoch_.load(std::memory_order_relaxed); }

  // Whether data READ no later than `words` may be used at `now_unix_ms`:
  // fence::Check's answer for the current map epoch. kUnavailable (fenced,
  // or the lease lapsed) and kFailedPrecondition (another map epoch) are
  // counted by reason. `now_unix_ms` must be read after the READs carrying
  // the data completed: the data is then no newer than that moment.
  absl::Status Admit(const fence::FenceWords& words, int64_t now_unix_ms);
  // Admit() at the wall clock now.
  absl::Status Admit(const fence::FenceWords& words);

 private:
  std::atomic<uint64_t> map_epoch_{0};
  // Owned by the registry.
  metrics::Counter* const fenced_;
  metrics::Counter* const lease_lapsed_;
  metrics::Counter* const map_epoch_mismatch_;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_RDMA_FENCE_GATE_H_
