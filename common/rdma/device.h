// Copyright 2026 The kvstore Authors.
//
// Move-only RAII owners of libibverbs objects. Construction is a static
// factory returning absl::StatusOr; a missing device is kUnavailable, never a
// crash, so callers can fall back to TCP. Destructors log failed ibv_* calls.
//
// Destruction order: an owner of several of these declares them in the order
// Device, ProtectionDomain, MemoryRegion (members are destroyed in reverse),
// so MRs are deregistered before their PD is deallocated, and the PD before
// the device is closed.

#ifndef KVSTORE_COMMON_RDMA_DEVICE_H_
#define KVSTORE_COMMON_RDMA_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct ibv_context;
struct ibv_pd;
struct ibv_mr;

namespace kvstore {
namespace rdma {

// What the control plane and the allocator need to know about a device.
struct DeviceLimits {
  uint64_t max_mr_size = 0;
  uint32_t max_mr = 0;
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  uint32_t max_qp_rd_atom = 0;
  uint32_t max_mw = 0;
  // Appended for the queue-pair and completion-queue wrappers.
  uint32_t max_qp = 0;
  uint32_t max_cq = 0;
  uint32_t max_cqe = 0;
  // Outstanding RDMA READs/atomics this QP may issue (initiator depth).
  uint32_t max_qp_init_rd_atom = 0;
  // IBV_DEVICE_MEM_WINDOW_TYPE_2A or _2B is set (type-2 windows work).
  bool mw_type2 = false;
};

// One line, e.g. "max_mr_size=... max_mr=... ..." (for logs and tests).
std::string DeviceLimitsToString(const DeviceLimits& limits);

// Names of the RDMA devices libibverbs sees (may be empty).
std::vector<std::string> ListDeviceNames();

// An open RDMA device (ibv_context) and the port the datapath uses.
// Thread-safe: immutable after Open(); the verbs called on context() are
// thread-safe in libibverbs. Move-only.
class Device {
 public:
  // Opens `name`, or with an empty name the first device that has an ACTIVE
  // port. kUnavailable when there is none.
  // Always kUnavailable on failure (no device, `name` not found, no ACTIVE
  // port, or ibv_open_device/ibv_query_device failed); the message gives the
  // reason the last candidate was rejected.
  static absl::StatusOr<Device> Open(absl::string_view name);

  // A moved-from Device holds no context and closes nothing.
  Device(Device&& other) noexcept;
  Device& operator=(Device&& other) noexcept;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  // Borrowed; valid while this Device lives. Null only after a move.
  ibv_context* context() const { return context_; }
  const std::string& name() const { return name_; }
  // The first ACTIVE port at Open() time (1-based, as verbs number ports).
  uint8_t port() const { return port_; }
  // Queried once at Open(); the device's limits do not change afterwards.
  const DeviceLimits& limits() const { return limits_; }

 private:
  Device(ibv_context* context, std::string name, uint8_t port, DeviceLimits limits)
      : context_(context), name_(std::move(name)), port_(port), limits_(limits) {}

  ibv_context* context_ = nullptr;
  std::string name_;
  uint8_t port_ = 0;
  DeviceLimits limits_;
};

// A protection domain (ibv_pd). MRs, MWs and QPs created on it can only be
// used with each other. Must be destroyed after all of them and before the
// Device. Thread-safe: immutable after Create(). Move-only.
class ProtectionDomain {
 public:
  // ibv_alloc_pd on `device`, which must outlive the result. kUnavailable
  // when the verb fails.
  static absl::StatusOr<ProtectionDomain> Create(const Device& device);

  ProtectionDomain(ProtectionDomain&& other) noexcept;
  ProtectionDomain& operator=(ProtectionDomain&& other) noexcept;
  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;
  ~ProtectionDomain();

  // Borrowed; valid while this ProtectionDomain lives.
  ibv_pd* get() const { return pd_; }

 private:
  explicit ProtectionDomain(ibv_pd* pd) : pd_(pd) {}
  ibv_pd* pd_ = nullptr;
};

// A registered memory region (ibv_mr). Does not own the memory it covers:
// the caller keeps [addr, addr+length) mapped until the MemoryRegion is
// destroyed. Thread-safe: immutable after Register(). Move-only.
class MemoryRegion {
 public:
  // Registers [addr, addr+length) with `access` (IBV_ACCESS_* bits).
  // `pd` must outlive the result. kResourceExhausted when ibv_reg_mr fails
  // with ENOMEM or EPERM (usually RLIMIT_MEMLOCK is too small to pin the
  // pages); kUnavailable for any other failure.
  static absl::StatusOr<MemoryRegion> Register(const ProtectionDomain& pd, void* addr,
                                               size_t length, int access);

  MemoryRegion(MemoryRegion&& other) noexcept;
  MemoryRegion& operator=(MemoryRegion&& other) noexcept;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion();

  // Borrowed; valid while this MemoryRegion lives. The key and address
  // accessors below REQUIRE a MemoryRegion that has not been moved from.
  ibv_mr* get() const { return mr_; }
  uint32_t lkey() const;
  // The key a peer puts in RDMA READ/WRITE work requests. Only meaningful
  // when `access` included an IBV_ACCESS_REMOTE_* bit.
  uint32_t rkey() const;
  uint64_t addr() const;
  size_t length() const;

 private:
  explicit MemoryRegion(ibv_mr* mr) : mr_(mr) {}
  ibv_mr* mr_ = nullptr;
};

}  // namespace rdma
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_DEVICE_H_
