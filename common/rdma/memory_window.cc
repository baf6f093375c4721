// Copyright 2026 The kvstore Authors.

#include "common/rdma/memory_window.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/rdma/verbs_status.h"
#include "glog/logging.h"

namespace kvstore {
namespace rdma {

absl::StatusOr<MemoryWindow> MemoryWindow::Alloc(const ProtectionDomain& pd) {
  // Type 2 only: a type-2 window is tied to the QP it was bound through and
  // revoked with a local (or remote) invalidate, which is how write leases
  // are granted and taken back. A type-1 window is not tied to a QP, so any
  // connection could use its rkey, and no work request invalidates it.
  ibv_mw* mw = ibv_alloc_mw(pd.get(), IBV_MW_TYPE_2);
  if (mw == nullptr) return rdma_internal::VerbError("ibv_alloc_mw(IBV_MW_TYPE_2)", errno);
  // The initial rkey is the base that the first PostBindMw() increments.
  return MemoryWindow(mw, mw->rkey);
}

MemoryWindow::MemoryWindow(MemoryWindow&& other) noexcept
    // `other` ends unbound and without a handle, so its destructor neither
    // deallocates nor warns about a binding it no longer owns.
    : mw_(std::exchange(other.mw_, nullptr)),
      rkey_(other.rkey_),
      bound_(std::exchange(other.bound_, false)),
      qp_num_(other.qp_num_),
      addr_(other.addr_),
      length_(other.length_),
      prev_rkey_(other.prev_rkey_) {}

MemoryWindow& MemoryWindow::operator=(MemoryWindow&& other) noexcept {
  if (this != &other) {
    this->~MemoryWindow();
    new (this) MemoryWindow(std::move(other));
  }
  return *this;
}

MemoryWindow::~MemoryWindow() {
  if (mw_ != nullptr) {
    // Deallocating also revokes a bound window; done before the QP and MR go
    // (see the destruction order in memory_window.h).
    if (int rc = ibv_dealloc_mw(mw_); rc != 0) {
      LOG(ERROR) << "ibv_dealloc_mw(rkey 0x" << std::hex << rkey_ << std::dec
                 << ") failed: " << std::strerror(rc)
                 << (bound_ ? " (still bound: destroying its QP will block ~51 s on rxe)" : "");
    }
  }
}

void MemoryWindow::OnBindPosted(uint32_t new_rkey, uint32_t qp_num, uint64_t addr,
                                uint64_t length) {
  // Kept for RollbackBind(): a failed bind leaves the device's key unchanged.
  prev_rkey_ = rkey_;
  rkey_ = new_rkey;
  // rxe passes ibv_mw::rkey as the key the device must currently hold on the
  // next bind; libibverbs leaves it stale after a type-2 bind.
  mw_->rkey = new_rkey;
  bound_ = true;
  qp_num_ = qp_num;
  addr_ = addr;
  length_ = length;
}

// Marked unbound at post time; RollbackInvalidate() undoes it if the
// completion fails.
void MemoryWindow::OnInvalidatePosted() { bound_ = false; }

void MemoryWindow::RollbackBind() {
  rkey_ = prev_rkey_;
  mw_->rkey = prev_rkey_;
  // PostBindMw() refuses a bound window, so it was unbound before.
  bound_ = false;
}

void MemoryWindow::RollbackInvalidate() { bound_ = true; }

}  // namespace rdma
}  // namespace kvstore
