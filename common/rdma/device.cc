// Copyright 2026 The kvstore Authors.

#include "common/rdma/device.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace kvstore {
namespace rdma {

namespace {

// Every device-level failure is kUnavailable so that callers treat "no
// usable RDMA" uniformly and fall back to TCP (see device.h).
absl::Status VerbError(absl::string_view verb, int err) {
  return absl::UnavailableError(absl::StrCat(verb, ": ", std::strerror(err)));
}

// The first port of `context` in state ACTIVE, or 0.
// Ports are numbered from 1; port 0 does not exist, so it doubles as
// "none". A port that fails ibv_query_port is skipped rather than fatal.
uint8_t FirstActivePort(ibv_context* context, const ibv_device_attr& attr) {
  for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
    ibv_port_attr port;
    if (ibv_query_port(context, p, &port) == 0 && port.state == IBV_PORT_ACTIVE) return p;
  }
  return 0;
}

}  // namespace

std::string DeviceLimitsToString(const DeviceLimits& limits) {
  return absl::StrCat("max_mr_size=", limits.max_mr_size, " max_mr=", limits.max_mr,
                      " max_qp_wr=", limits.max_qp_wr, " max_sge=", limits.max_sge,
                      " max_qp_rd_atom=", limits.max_qp_rd_atom,
                      " max_qp_init_rd_atom=", limits.max_qp_init_rd_atom,
                      " max_mw=", limits.max_mw, " max_qp=", limits.max_qp,
                      " max_cq=", limits.max_cq, " max_cqe=", limits.max_cqe,
                      " mw_type2=", limits.mw_type2 ? "yes" : "no");
}

// A null list (no kernel support, no devices) is reported as an empty list:
// this is for diagnostics and must not fail.
std::vector<std::string> ListDeviceNames() {
  std::vector<std::string> names;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return names;
  // The names point into the list: copy them before it is freed.
  for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return names;
}

absl::StatusOr<Device> Device::Open(absl::string_view name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    // Fails, for instance, when the ib_uverbs module is not loaded: one more
    // way of having no RDMA, reported like the others.
    return absl::UnavailableError(absl::StrCat("ibv_get_device_list: ", std::strerror(errno)));
  }
  // `last` keeps the most specific reason a candidate was rejected, so that
  // the error for a single named device says why it cannot be used.
  absl::Status last =
      absl::UnavailableError(name.empty() ? "no RDMA device with an active port"
                                          : absl::StrCat("RDMA device '", name, "' not found"));
  for (int i = 0; i < n; ++i) {
    // Invariant: every context opened in an earlier iteration has been closed.
    std::string dev_name = ibv_get_device_name(list[i]);
    if (!name.empty() && dev_name != name) continue;
    ibv_context* context = ibv_open_device(list[i]);
    if (context == nullptr) {
      last = VerbError(absl::StrCat("ibv_open_device(", dev_name, ")"), errno);
      continue;
    }
    ibv_device_attr attr;
    // ibv_query_device returns the errno value instead of setting errno.
    if (int rc = ibv_query_device(context, &attr); rc != 0) {
      last = VerbError("ibv_query_device", rc);
      ibv_close_device(context);
      continue;
    }
    // A device without an ACTIVE port cannot connect a QP, so with an empty
    // `name` the search moves on to the next device.
    uint8_t port = FirstActivePort(context, attr);
    if (port == 0) {
      last = absl::UnavailableError(absl::StrCat("RDMA device ", dev_name, " has no active port"));
      ibv_close_device(context);
      continue;
    }
    DeviceLimits limits;
    limits.max_mr_size = attr.max_mr_size;
    limits.max_mr = attr.max_mr;
    limits.max_qp_wr = attr.max_qp_wr;
    limits.max_sge = attr.max_sge;
    limits.max_qp_rd_atom = attr.max_qp_rd_atom;
    limits.max_mw = attr.max_mw;
    limits.max_qp = attr.max_qp;
    limits.max_cq = attr.max_cq;
    limits.max_cqe = attr.max_cqe;
    limits.max_qp_init_rd_atom = attr.max_qp_init_rd_atom;
    // MemoryWindow allocates only type-2 windows (bound through a QP, revoked
    // by invalidation); either 2A or 2B is enough for that.
    limits.mw_type2 = (attr.device_cap_flags &
                       (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0;
    ibv_free_device_list(list);
    // The opened context stays valid after the list is freed (ibv_open_device
    // takes its own reference on the device).
    return Device(context, std::move(dev_name), port, limits);
  }
  ibv_free_device_list(list);
  return last;
}

Device::Device(Device&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)),
      name_(std::move(other.name_)),
      port_(other.port_),
      limits_(other.limits_) {}

// Destroy-then-construct in place: releases our context first, then takes
// over `other`'s, so the move constructor is the only place that transfers
// ownership. The same pattern is used by every owner in this directory.
Device& Device::operator=(Device&& other) noexcept {
  if (this != &other) {
    this->~Device();
    new (this) Device(std::move(other));
  }
  return *this;
}

Device::~Device() {
  // Errors in destructors cannot be returned; they are logged and the handle
  // is abandoned.
  if (context_ != nullptr && ibv_close_device(context_) != 0) {
    LOG(ERROR) << "ibv_close_device(" << name_ << ") failed: " << std::strerror(errno);
  }
}

absl::StatusOr<ProtectionDomain> ProtectionDomain::Create(const Device& device) {
  ibv_pd* pd = ibv_alloc_pd(device.context());
  if (pd == nullptr) return VerbError("ibv_alloc_pd", errno);
  return ProtectionDomain(pd);
}

ProtectionDomain::ProtectionDomain(ProtectionDomain&& other) noexcept
    : pd_(std::exchange(other.pd_, nullptr)) {}

ProtectionDomain& ProtectionDomain::operator=(ProtectionDomain&& other) noexcept {
  if (this != &other) {
    this->~ProtectionDomain();
    new (this) ProtectionDomain(std::move(other));
  }
  return *this;
}

ProtectionDomain::~ProtectionDomain() {
  if (pd_ != nullptr) {
    // EBUSY here means an MR, MW or QP on this PD is still alive: the owner
    // destroyed its members in the wrong order.
    if (int rc = ibv_dealloc_pd(pd_); rc != 0) {
      LOG(ERROR) << "ibv_dealloc_pd failed: " << std::strerror(rc);
    }
  }
}

absl::StatusOr<MemoryRegion> MemoryRegion::Register(const ProtectionDomain& pd, void* addr,
                                                    size_t length, int access) {
  ibv_mr* mr = ibv_reg_mr(pd.get(), addr, length, access);
  if (mr == nullptr) {
    int err = errno;
    absl::Status s = VerbError(absl::StrCat("ibv_reg_mr(", length, " bytes)"), err);
    // Pinning pages counts against RLIMIT_MEMLOCK; with a small limit the
    // kernel reports ENOMEM or EPERM rather than a dedicated error, so the
    // message carries the usual fix.
    if (err == ENOMEM || err == EPERM) {
      return absl::ResourceExhaustedError(absl::StrCat(
          s.message(), " (is RLIMIT_MEMLOCK large enough? try `ulimit -l unlimited`)"));
    }
    return s;
  }
  return MemoryRegion(mr);
}

MemoryRegion::MemoryRegion(MemoryRegion&& other) noexcept
    : mr_(std::exchange(other.mr_, nullptr)) {}

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& other) noexcept {
  if (this != &other) {
    this->~MemoryRegion();
    new (this) MemoryRegion(std::move(other));
  }
  return *this;
}

MemoryRegion::~MemoryRegion() {
  if (mr_ != nullptr) {
    // Fails (EINVAL on rxe) while a memory window is still bound on this MR:
    // windows must be deallocated first (memory_window.h).
    if (int rc = ibv_dereg_mr(mr_); rc != 0) {
      LOG(ERROR) << "ibv_dereg_mr failed: " << std::strerror(rc);
    }
  }
}

// The provider filled these in at registration; lkey goes into local SGEs,
// rkey and addr are what a peer needs to address the region.
uint32_t MemoryRegion::lkey() const { return mr_->lkey; }
uint32_t MemoryRegion::rkey() const { return mr_->rkey; }
uint64_t MemoryRegion::addr() const { return reinterpret_cast<uint64_t>(mr_->addr); }
size_t MemoryRegion::length() const { return mr_->length; }

}  // namespace rdma
}  // namespace kvstore
