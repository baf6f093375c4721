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

class Device {
 public:
  // Opens `name`, or with an empty name the first device that has an ACTIVE
  // port. kUnavailable when there is none.
  static absl::StatusOr<Device> Open(absl::string_view name);

  Device(Device&& other) noexcept;
  Device& operator=(Device&& other) noexcept;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  ibv_context* context() const { return context_; }
  const std::string& name() const { return name_; }
  uint8_t port() const { return port_; }
  const DeviceLimits& limits() const { return limits_; }

 private:
  Device(ibv_context* context, std::string name, uint8_t port, DeviceLimits limits)
      : context_(context), name_(std::move(name)), port_(port), limits_(limits) {}

  ibv_context* context_ = nullptr;
  std::string name_;
  uint8_t port_ = 0;
  DeviceLimits limits_;
};

class ProtectionDomain {
 public:
  static absl::StatusOr<ProtectionDomain> Create(const Device& device);

  ProtectionDomain(ProtectionDomain&& other) noexcept;
  ProtectionDomain& operator=(ProtectionDomain&& other) noexcept;
  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;
  ~ProtectionDomain();

  ibv_pd* get() const { return pd_; }

 private:
  explicit ProtectionDomain(ibv_pd* pd) : pd_(pd) {}
  ibv_pd* pd_ = nullptr;
};

class MemoryRegion {
 public:
  // Registers [addr, addr+length) with `access` (IBV_ACCESS_* bits).
  static absl::StatusOr<MemoryRegion> Register(const ProtectionDomain& pd, void* addr,
                                               size_t length, int access);

  MemoryRegion(MemoryRegion&& other) noexcept;
  MemoryRegion& operator=(MemoryRegion&& other) noexcept;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion();

  ibv_mr* get() const { return mr_; }
  uint32_t lkey() const;
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
