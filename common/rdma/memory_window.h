// Copyright 2026 The kvstore Authors.
//
// Move-only RAII owner of a type-2 memory window (ibv_mw). A window gives a
// remote peer access to a range of a MemoryRegion through one QP, under an
// rkey of its own that the owner can revoke (invalidate) and re-issue.
//
// A window is bound and invalidated with work requests on a QP:
// QueuePair::PostBindMw() and QueuePair::PostLocalInvalidate() (see
// queue_pair.h); this class keeps the window's current rkey, because
// libibverbs does not update ibv_mw::rkey after a type-2 bind and the next
// bind needs the key the device currently holds.
//
// Facts from Soft-RoCE (rxe, kernel 6.1), established with probe programs
// while the RDMA service was built:
//  * rxe checks a window access against the underlying MR's range, not the
//    window's: give every lease an MR of its own (LOCAL_WRITE | MW_BIND, no
//    REMOTE_WRITE) and bind the window over the whole MR.
//  * Binding a window that is still bound fails with IBV_WC_MW_BIND_ERR and
//    moves the QP to the error state; PostBindMw() refuses that up front.
//  * Destroying a QP while a window is bound to it blocks for ~51 s in the
//    kernel. Deallocate (or invalidate) every window before destroying its QP.
//  * ibv_dereg_mr fails with EINVAL while a window is bound on the MR.
//
// Destruction order: the window is destroyed BEFORE its QP and its MR. An
// owner of several resources declares them in the order
//   Device, ProtectionDomain, CompletionChannel, CompletionQueue,
//   MemoryRegion, QueuePair, MemoryWindow
// so that windows go first, then QPs, then MRs, CQs, the PD and the device.
// (Style §4 rule 14 lists "mr, mw, qp", which would destroy the QP while
// windows are still bound: the ~51 s hang above. Windows last is the order
// that works on rxe and is also correct on real HCAs.)
//
// Thread-safety: not thread-safe; the QP that binds/invalidates the window
// and the window itself must be used from one thread (or under one lock).

#ifndef KVSTORE_COMMON_RDMA_MEMORY_WINDOW_H_
#define KVSTORE_COMMON_RDMA_MEMORY_WINDOW_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/rdma/device.h"

struct ibv_mw;

namespace kvstore {
namespace rdma {

class QueuePair;

class MemoryWindow {
 public:
  // ibv_alloc_mw(pd, IBV_MW_TYPE_2). The window starts unbound. Fails with
  // kUnavailable/kInvalidArgument (from errno) when the device has no type-2
  // windows, kResourceExhausted when max_mw is reached.
  static absl::StatusOr<MemoryWindow> Alloc(const ProtectionDomain& pd);

  MemoryWindow(MemoryWindow&& other) noexcept;
  MemoryWindow& operator=(MemoryWindow&& other) noexcept;
  MemoryWindow(const MemoryWindow&) = delete;
  MemoryWindow& operator=(const MemoryWindow&) = delete;
  // ibv_dealloc_mw, which also revokes a bound window (logs a failure).
  ~MemoryWindow();

  // Borrowed; valid while this MemoryWindow lives.
  ibv_mw* get() const { return mw_; }

  // The window's current rkey: the one installed by the last PostBindMw(),
  // i.e. what a client must use. Meaningful only while bound().
  uint32_t rkey() const { return rkey_; }

  // True from a PostBindMw() until PostLocalInvalidate(window) or
  // MarkInvalidated(). Bookkeeping of what was posted: the device state
  // changes only when the WR completes successfully (see Rollback*).
  bool bound() const { return bound_; }
  // The QP number, start address and length of the current binding (0 when
  // unbound).
  uint32_t bound_qp_num() const { return bound_ ? qp_num_ : 0; }
  uint64_t bound_addr() const { return bound_ ? addr_ : 0; }
  uint64_t bound_length() const { return bound_ ? length_ : 0; }

  // The bind WR posted by the last PostBindMw() completed with an error (or
  // was flushed): restore the rkey and bound() to their values before that
  // call (unbound), so that bookkeeping matches the device again. (The QP is in the
  // error state then; the simplest recovery is a fresh window.)
  void RollbackBind();
  // Same for a failed PostLocalInvalidate(window): the window is still bound.
  void RollbackInvalidate();
  // The window was invalidated remotely: a receive completion carried
  // invalidated_rkey == rkey() (the peer's SEND_WITH_INV; read the field, rxe
  // does not set IBV_WC_WITH_INV in wc_flags).
  void MarkInvalidated() { bound_ = false; }

 private:
  friend class QueuePair;

  MemoryWindow(ibv_mw* mw, uint32_t rkey) : mw_(mw), rkey_(rkey) {}

  // Bookkeeping for QueuePair::PostBindMw / PostLocalInvalidate, called after
  // the WR was posted successfully.
  void OnBindPosted(uint32_t new_rkey, uint32_t qp_num, uint64_t addr, uint64_t length);
  void OnInvalidatePosted();

  ibv_mw* mw_ = nullptr;
  uint32_t rkey_ = 0;
  bool bound_ = false;
  uint32_t qp_num_ = 0;
  uint64_t addr_ = 0;
  uint64_t length_ = 0;
  // The rkey before the last bind, for RollbackBind().
  uint32_t prev_rkey_ = 0;
};

}  // namespace rdma
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_MEMORY_WINDOW_H_
