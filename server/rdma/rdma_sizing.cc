// Copyright 2026 The kvstore Authors.

#include "server/rdma/rdma_sizing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace server {

rdma::QpTimeouts ServerQpTimeouts() {
  rdma::QpTimeouts t;
  t.rnr_retry = 6;
  return t;
}

uint32_t AckRingSlots(uint32_t credits) { return 2 * credits; }

// 16: at most one bind or invalidation in flight (each is waited for) plus
// idle probes, of which there is one per probe period.
uint32_t SendQueueDepth(uint32_t credits) { return AckRingSlots(credits) + 16; }

absl::StatusOr<RecvCqPlan> PlanRecvCq(uint32_t max_connections, uint32_t credits,
                                      uint32_t max_cqe) {
  if (max_connections == 0 || credits == 0) {
    return absl::InvalidArgumentError("RDMA connections and commit credits must be positive");
  }
  if (credits > max_cqe) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdma_commit_credits=", credits, " exceeds the device's completion queue (",
                     max_cqe, " entries): not one connection would fit"));
  }
  RecvCqPlan plan;
  plan.max_connections = std::min<uint64_t>(max_connections, max_cqe / credits);
  plan.depth = static_cast<int>(uint64_t{plan.max_connections} * credits);
  return plan;
}

}  // namespace server
}  // namespace kvstore
