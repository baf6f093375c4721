// Copyright 2026 The kvstore Authors.
//
// MemoryPool: the server's two page-aligned arenas.
//   data:  entries (key + value), handed out in segments by SegmentAllocator.
//   index: the bucket array of KvIndex.
// Both are registered with the RDMA device when one is present, each in MRs
// of its own with REMOTE_READ only: nothing here is remotely writable. The
// data arena is split into several MRs when the device's max_mr_size is
// smaller than the arena.
//
// Thread safety: Register() and Deregister() need one owner with no
// concurrent readers of regions(); otherwise immutable after
// Create()/Register(), and the memory itself is synchronised by its users.

#ifndef KVSTORE_SERVER_STORAGE_MEMORY_POOL_H_
#define KVSTORE_SERVER_STORAGE_MEMORY_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rdma/device.h"

namespace kvstore {
namespace server {

struct MemoryPoolOptions {
  uint64_t data_bytes = 512ull << 20;
  uint64_t index_bytes = 8ull << 20;
  // Back the arenas with 2 MiB huge pages (MAP_HUGETLB); fail if unavailable.
  bool hugepages = false;
  // Without `hugepages`: ask for transparent huge pages (MADV_HUGEPAGE), so
  // random accesses over a large pool miss the TLB far less. Advice only
  // (plain pages where THP is off); with `prefault`, start-up waits for the
  // kernel to assemble the huge pages, which can take seconds per GiB on a
  // host with fragmented memory.
  bool transparent_hugepages = false;
  // Fault every page in and write to it up front, so that the first
  // requests neither fault nor pay a virtual machine's lazy backing of guest
  // memory (memory_pool.cc, WriteEveryPage).
  bool prefault = true;
};

// One registered piece of a pool, as published to clients.
struct PoolRegion {
  uint32_t region_id = 0;
  bool is_index = false;
  uint64_t pool_offset = 0;  // offset within its arena
  uint64_t length = 0;
  uint64_t addr = 0;  // virtual address on the server
  uint32_t rkey = 0;  // remote-read key
};

// Fails with kResourceExhausted naming the fix when RLIMIT_MEMLOCK cannot
// cover `bytes` of pinned memory (root with CAP_IPC_LOCK passes).
absl::Status CheckMemlockLimit(uint64_t bytes);

// Owns both mappings and their MRs; data() and index() are borrowed
// pointers, valid for the pool's lifetime.
class MemoryPool {
 public:
  // Maps both arenas (sizes rounded up to the page or huge-page size),
  // zero-filled. kInvalidArgument when either size is 0; kResourceExhausted
  // when mmap fails (with the sysctl to run for huge pages). Does not
  // register anything: see Register().
  static absl::StatusOr<std::unique_ptr<MemoryPool>> Create(const MemoryPoolOptions& options);
  // Deregisters the MRs, then unmaps the arenas.
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // Registers both arenas with `pd` (REMOTE_READ | LOCAL_WRITE), splitting
  // the data arena into MRs of at most `max_mr_size` bytes, each a multiple
  // of `align` (the segment size, so only an entry larger than a segment can
  // straddle two MRs). Returns the time it took. kFailedPrecondition when
  // `max_mr_size` is below `align`, or when the index does not fit in one
  // data MR's size; kResourceExhausted or kUnavailable from
  // MemoryRegion::Register. On failure the MRs registered so far stay
  // registered until Deregister().
  // REQUIRES: called at most once; `pd` outlives this pool's registrations,
  // which Deregister() (or the destructor) releases.
  absl::StatusOr<absl::Duration> Register(const rdma::ProtectionDomain& pd, uint64_t max_mr_size,
                                          uint64_t align = 4096);
  // Deregisters every MR and forgets regions(); the memory stays mapped.
  // Idempotent. A client still using the old rkeys gets remote access
  // errors from then on.
  void Deregister();

  char* data() const { return data_; }
  uint64_t data_bytes() const { return data_bytes_; }
  char* index() const { return index_; }
  uint64_t index_bytes() const { return index_bytes_; }
  bool hugepages() const { return hugepages_; }
  bool registered() const { return !mrs_.empty(); }
  // What clients are told: data regions in arena order, then the index.
  const std::vector<PoolRegion>& regions() const { return regions_; }

 private:
  MemoryPool() = default;

  char* data_ = nullptr;
  uint64_t data_bytes_ = 0;
  uint64_t data_mapped_ = 0;
  char* index_ = nullptr;
  uint64_t index_bytes_ = 0;
  uint64_t index_mapped_ = 0;
  bool hugepages_ = false;
  std::vector<rdma::MemoryRegion> mrs_;
  std::vector<PoolRegion> regions_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_STORAGE_MEMORY_POOL_H_
