// Copyright 2026 The kvstore Authors.

#include "common/rdma/initiator/rdma_context.h"

#include <infiniband/verbs.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kvstore {
namespace initiator {

absl::StatusOr<std::shared_ptr<RdmaContext>> OpenRdmaContext(const std::string& device,
                                                             uint64_t max_value_bytes) {
  // Every registration pins memory: the slot arenas, bounce buffers for
  // values up to the limit (cached, up to twice), and the caller's own
  // registered buffers. Refuse early with the fix rather than fail mid-PUT.
  rlimit lim;
  if (geteuid() != 0 && getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    const uint64_t need = 2 * max_value_bytes + (16ull << 20);
    if (lim.rlim_cur < need) {
      return absl::UnavailableError(
          absl::StrCat("RLIMIT_MEMLOCK is ", lim.rlim_cur, " bytes; an RDMA client needs about ",
                       need, " to pin its buffers (`ulimit -l unlimited`, or --transport=tcp)"));
    }
  }
  KV_ASSIGN_OR_RETURN(auto dev, rdma::Device::Open(device));
  KV_ASSIGN_OR_RETURN(auto pd, rdma::ProtectionDomain::Create(dev));
  return std::make_shared<RdmaContext>(std::move(dev), std::move(pd));
}

// Zeroed: scratch and ack buffers start in a known state, never with stale
// heap bytes.
absl::StatusOr<std::unique_ptr<Block>> NewBlock(const std::shared_ptr<RdmaContext>& ctx,
                                                size_t size) {
  auto b = std::make_unique<Block>();
  // Page-aligned and page-sized: registration pins whole pages anyway.
  b->size = (size + 4095) / 4096 * 4096;
  b->mem.reset(static_cast<char*>(std::aligned_alloc(4096, b->size)));
  if (!b->mem)
    return absl::ResourceExhaustedError(absl::StrCat("out of memory for ", size, " bytes"));
  std::memset(b->mem.get(), 0, b->size);
  b->context = ctx;
  KV_ASSIGN_OR_RETURN(auto mr, rdma::MemoryRegion::Register(ctx->pd, b->mem.get(), b->size,
                                                            IBV_ACCESS_LOCAL_WRITE));
  b->mr.emplace(std::move(mr));
  return b;
}

// Cached blocks of the class are reused first (most recently released).
absl::StatusOr<std::unique_ptr<Block>> BufferPool::Acquire(size_t bytes) {
  // Power-of-two classes from 64 KiB keep the number of distinct sizes (and
  // so of cached blocks nobody can use) small.
  size_t cls = 64 * 1024;
  while (cls < bytes) cls *= 2;
  {
    absl::MutexLock lock(&mu_);
    auto& list = free_[cls];
    if (!list.empty()) {
      auto b = std::move(list.back());
      list.pop_back();
      cached_ -= b->size;
      return b;
    }
  }
  // Registered outside the lock: it takes milliseconds.
  return NewBlock(ctx_, cls);
}

// A block that would push the cache over kMaxCached is freed instead, so a
// burst of huge values does not pin memory for good.
void BufferPool::Release(std::unique_ptr<Block> b) {
  absl::MutexLock lock(&mu_);
  if (cached_ + b->size > kMaxCached) return;  // dropped: deregistered
  cached_ += b->size;
  free_[b->size].push_back(std::move(b));
}

}  // namespace initiator
}  // namespace kvstore
