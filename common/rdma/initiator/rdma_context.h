// Copyright 2026 The kvstore Authors.
//
// The verbs resources an RDMA initiator shares across its paths: the device and
// protection domain (RdmaContext), and registered memory carved from it
// (Block, BufferPool). A path that breaks is replaced by a new one on the
// same context, so memory the caller registered stays valid.

#ifndef KVSTORE_COMMON_RDMA_INITIATOR_RDMA_CONTEXT_H_
#define KVSTORE_COMMON_RDMA_INITIATOR_RDMA_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/rdma/device.h"

namespace kvstore {
namespace initiator {

// The device and protection domain, shared (by shared_ptr) by every path of
// an initiator and by everything registered with them. Immutable once built;
// thread-safe.
class RdmaContext {
 public:
  RdmaContext(rdma::Device d, rdma::ProtectionDomain p) : device(std::move(d)), pd(std::move(p)) {}
  rdma::Device device;
  rdma::ProtectionDomain pd;  // declared after the device: destroyed first
};

// Opens `device` ("" = the first with an active port) for an initiator whose
// values are at most `max_value_bytes`. kUnavailable when there is none, or
// when RLIMIT_MEMLOCK is too small for the buffers such an initiator pins (the
// message names the fix).
absl::StatusOr<std::shared_ptr<RdmaContext>> OpenRdmaContext(const std::string& device,
                                                             uint64_t max_value_bytes);

// A page-aligned, zeroed allocation registered for local access. The MR is
// declared after the memory so it is deregistered first; `context` keeps
// the PD alive for the MR. Not thread-safe; owned by one user at a time.
struct Block {
  std::unique_ptr<char, decltype(&std::free)> mem{nullptr, &std::free};
  size_t size = 0;
  std::optional<rdma::MemoryRegion> mr;
  std::shared_ptr<RdmaContext> context;
};

// A Block of at least `size` bytes (rounded up to 4 KiB).
// kResourceExhausted when the memory cannot be allocated; the verbs error
// when it cannot be registered.
absl::StatusOr<std::unique_ptr<Block>> NewBlock(const std::shared_ptr<RdmaContext>& ctx,
                                                size_t size);

// Registered buffers for entries too large for an operation slot's scratch,
// reused by power-of-two size class, because registration is far too slow
// to do per operation. Keeps at most 512 MiB cached.
//
// Thread safety: thread-safe.
class BufferPool {
 public:
  explicit BufferPool(std::shared_ptr<RdmaContext> ctx) : ctx_(std::move(ctx)) {}

  // A block of at least `bytes` (64 KiB minimum), cached or new; errors as
  // NewBlock. The caller owns it until Release().
  absl::StatusOr<std::unique_ptr<Block>> Acquire(size_t bytes);
  // Returns `b` to the cache, or frees (deregisters) it when the cache is full.
  void Release(std::unique_ptr<Block> b);

 private:
  static constexpr size_t kMaxCached = 512ull << 20;
  const std::shared_ptr<RdmaContext> ctx_;
  absl::Mutex mu_;
  std::map<size_t, std::vector<std::unique_ptr<Block>>> free_ ABSL_GUARDED_BY(mu_);
  size_t cached_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace initiator
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_INITIATOR_RDMA_CONTEXT_H_
