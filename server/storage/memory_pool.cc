// Copyright 2026 The kvstore Authors.

#include "server/storage/memory_pool.h"

#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace server {

namespace {

constexpr uint64_t kHugePage = 2ull << 20;

uint64_t RoundUp(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

// Writes one byte (its own value, 0) to every page of [p, p + bytes).
// Some virtual machines back guest memory lazily: after the guest kernel has
// faulted a page in (MAP_POPULATE, MADV_POPULATE_WRITE), the first write to
// it still costs microseconds on the host (5.9 us per 4 KiB page measured on
// this project's VMs, 0.2 us afterwards), and a server's requests would pay
// it one page at a time. A write per page here pays it at start instead;
// where memory is backed up front it costs tens of nanoseconds a page.
void WriteEveryPage(char* p, uint64_t bytes) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  for (uint64_t off = 0; off < bytes; off += page) static_cast<volatile char*>(p)[off] = 0;
}

// Faults in every page of [p, p + bytes) for writing. MADV_POPULATE_WRITE
// (Linux 5.14) does it in one call; older kernels get a write per page.
void Populate(char* p, uint64_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
  WriteEveryPage(p, bytes);
}

absl::StatusOr<char*> MapArena(uint64_t bytes, bool hugepages, bool thp, bool prefault,
                               const char* what) {
  // Anonymous private memory: nothing else maps it, and ibv_reg_mr pins it
  // in place. Prefaulting every page now means the first requests and the
  // registration do not pay for page faults.
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (hugepages) flags |= MAP_HUGETLB;
  // Transparent huge pages must be asked for before the pages are faulted
  // in, so then MAP_POPULATE gives way to Populate() after the advice.
  thp = thp && !hugepages;
  if (prefault && !thp) flags |= MAP_POPULATE;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p != MAP_FAILED && thp) {
    // Advice only: where THP is "never" it fails or is ignored, and the
    // arena works the same on 4 KiB pages.
    madvise(p, bytes, MADV_HUGEPAGE);
    if (prefault) Populate(static_cast<char*>(p), bytes);
  }
  if (p != MAP_FAILED && prefault) WriteEveryPage(static_cast<char*>(p), bytes);
  if (p == MAP_FAILED) {
    int err = errno;
    // MAP_HUGETLB draws from the preallocated huge-page pool and fails
    // (ENOMEM) when it is too small, rather than falling back to small pages.
    if (hugepages) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "mmap of ", bytes, " bytes of huge pages for the ", what, " failed (", std::strerror(err),
          "); reserve pages with `sysctl vm.nr_hugepages=", bytes / kHugePage,
          "` or run without --hugepages"));
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of ", bytes, " bytes for the ", what, " failed: ", std::strerror(err)));
  }
  return static_cast<char*>(p);
}

}  // namespace

absl::Status CheckMemlockLimit(uint64_t bytes) {
  rlimit lim;
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_MEMLOCK): ", std::strerror(errno)));
  }
  // Checked up front because ibv_reg_mr over the limit fails with a bare
  // ENOMEM/EPERM, far from the flag that would fix it.
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= bytes) return absl::OkStatus();
  // Root has CAP_IPC_LOCK, which lifts the limit for registration.
  if (geteuid() == 0) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "RLIMIT_MEMLOCK is ", lim.rlim_cur,
      " bytes but registering the pool, the index and the "
      "lease chunks pins up to ",
      bytes,
      " bytes; raise it (`ulimit -l unlimited`, LimitMEMLOCK=infinity in systemd, "
      "`--ulimit memlock=-1` in docker), shrink --pool_size, or run with --transport=tcp"));
}

absl::StatusOr<std::unique_ptr<MemoryPool>> MemoryPool::Create(const MemoryPoolOptions& options) {
  if (options.data_bytes == 0 || options.index_bytes == 0) {
    return absl::InvalidArgumentError("pool and index sizes must be positive");
  }
  std::unique_ptr<MemoryPool> pool(new MemoryPool());
  // mmap lengths are whole pages; the extra bytes are mapped but not part of
  // data_bytes_/index_bytes_, and munmap uses the mapped sizes.
  const uint64_t align = options.hugepages ? kHugePage : static_cast<uint64_t>(getpagesize());
  pool->hugepages_ = options.hugepages;
  pool->data_bytes_ = options.data_bytes;
  pool->data_mapped_ = RoundUp(options.data_bytes, align);
  pool->index_bytes_ = options.index_bytes;
  pool->index_mapped_ = RoundUp(options.index_bytes, align);
  // On an error return `pool` is destroyed, which unmaps what was mapped.
  KV_ASSIGN_OR_RETURN(pool->data_,
                      MapArena(pool->data_mapped_, options.hugepages, options.transparent_hugepages,
                               options.prefault, "pool"));
  KV_ASSIGN_OR_RETURN(
      pool->index_, MapArena(pool->index_mapped_, options.hugepages, options.transparent_hugepages,
                             options.prefault, "index"));
  // Anonymous mappings are zero-filled: every slot word starts empty.
  return pool;
}

MemoryPool::~MemoryPool() {
  // MRs pin the pages; deregister them before the memory is unmapped.
  Deregister();
  if (data_ != nullptr) munmap(data_, data_mapped_);
  if (index_ != nullptr) munmap(index_, index_mapped_);
}

absl::StatusOr<absl::Duration> MemoryPool::Register(const rdma::ProtectionDomain& pd,
                                                    uint64_t max_mr_size, uint64_t align) {
  const absl::Time start = absl::Now();
  // REMOTE_READ for one-sided GETs. No REMOTE_WRITE: clients write only
  // through their lease windows, on MRs of their own (memory_window.h).
  // LOCAL_WRITE lets local work requests (a RECV, an RDMA READ's
  // destination) write into the arenas.
  constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  // Chunks are whole segments, so no entry straddles two MRs unless it is
  // larger than a segment; clients send GETs of such entries to the server.
  if (align == 0) align = 4096;
  uint64_t chunk =
      max_mr_size == 0 || max_mr_size >= data_bytes_ ? data_bytes_ : max_mr_size / align * align;
  // A max_mr_size smaller than one segment rounds down to 0: registering
  // would never make progress.
  if (chunk == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("max MR size ", max_mr_size, " is below one segment (", align, " bytes)"));
  }
  uint32_t id = 0;
  // Invariant: [0, off) of the data arena is covered by regions_, in order,
  // with region ids 0, 1, ... matching their position.
  for (uint64_t off = 0; off < data_bytes_; off += chunk) {
    uint64_t len = std::min(chunk, data_bytes_ - off);
    KV_ASSIGN_OR_RETURN(auto mr, rdma::MemoryRegion::Register(pd, data_ + off, len, kAccess));
    regions_.push_back({id++, false, off, len, mr.addr(), mr.rkey()});
    mrs_.push_back(std::move(mr));
  }
  // The index is registered as a single MR: a client READs a whole bucket
  // with one rkey, and buckets are never split across MRs.
  if (index_bytes_ > chunk) {
    return absl::FailedPreconditionError(absl::StrCat(
        "index of ", index_bytes_, " bytes exceeds the device's max_mr_size ", max_mr_size));
  }
  KV_ASSIGN_OR_RETURN(auto mr, rdma::MemoryRegion::Register(pd, index_, index_bytes_, kAccess));
  regions_.push_back({id++, true, 0, index_bytes_, mr.addr(), mr.rkey()});
  mrs_.push_back(std::move(mr));
  return absl::Now() - start;
}

void MemoryPool::Deregister() {
  mrs_.clear();
  regions_.clear();
}

}  // namespace server
}  // namespace kvstore
