// Copyright 2026 The kvstore Authors.

#include "common/rdma/initiator/shared_context.h"

#include "common/status_macros.h"

namespace kvstore {
namespace initiator {

// The lock is held across the open: a second caller waits for the first
// one's device rather than opening another.
absl::StatusOr<std::shared_ptr<RdmaContext>> SharedContext::Get(const std::string& device,
                                                                uint64_t max_value_bytes) {
  absl::MutexLock lock(&mu_);
  if (context_ == nullptr) {
    KV_ASSIGN_OR_RETURN(context_, OpenRdmaContext(device, max_value_bytes));
  }
  return context_;
}

}  // namespace initiator
}  // namespace kvstore
