// Copyright 2026 The kvstore Authors.
//
// SharedContext: the RDMA device and protection domain that every path of
// one owner uses (all of a client's server links, all of a primary's
// replication links), opened by the first path that needs it and kept for
// later ones, so registered memory survives reconnects and serves every
// server.
//
// Thread safety: thread-safe.

#ifndef KVSTORE_COMMON_RDMA_INITIATOR_SHARED_CONTEXT_H_
#define KVSTORE_COMMON_RDMA_INITIATOR_SHARED_CONTEXT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/rdma/initiator/rdma_context.h"

namespace kvstore {
namespace initiator {

class SharedContext {
 public:
  // The context, opening `device` for values of up to `max_value_bytes` on
  // first use (later calls return it whatever they pass). Errors of
  // OpenRdmaContext; a failed open is tried again by the next call.
  absl::StatusOr<std::shared_ptr<RdmaContext>> Get(const std::string& device,
                                                   uint64_t max_value_bytes);

 private:
  absl::Mutex mu_;
  std::shared_ptr<RdmaContext> context_ ABSL_GUARDED_BY(mu_);
};

}  // namespace initiator
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_INITIATOR_SHARED_CONTEXT_H_
