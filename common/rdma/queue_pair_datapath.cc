// Copyright 2026 The kvstore Authors.
//
// Queue pair datapath: building and posting work requests. Nothing here
// allocates for single WRs; batches of up to 16 WRs stay on the stack.

#include <infiniband/verbs.h>

#include <cstring>

#include "absl/base/optimization.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/rdma/queue_pair.h"
#include "common/rdma/verbs_status.h"

namespace kvstore {
namespace rdma {

namespace {

// Copies `local` into `out` (which has room for kMaxSgePerWr entries).
// Returns the total byte count.
uint64_t FillSges(absl::Span<const Sge> local, ibv_sge* out) {
  uint64_t total = 0;
  // REQUIRES: local.size() <= kMaxSgePerWr; callers check against
  // caps_.max_send_sge, which CreateRc() caps at kMaxSgePerWr.
  for (size_t i = 0; i < local.size(); ++i) {
    out[i].addr = local[i].addr;
    out[i].length = local[i].length;
    out[i].lkey = local[i].lkey;
    total += local[i].length;
  }
  return total;
}

absl::Status TooManySges(absl::string_view verb, size_t n, uint32_t max) {
  return absl::InvalidArgumentError(absl::StrCat(verb, ": ", n, " SGEs, the QP allows ", max));
}

// Fills wrs[0..ops.size()) and their scatter lists, packed into `sges`.
// Each WR is zeroed first: ibv_send_wr has unions and fields (imm_data,
// next) that the provider reads for some opcodes. REQUIRES: room for
// ops.size() WRs and the ops' SGEs.
void ChainRdmaOps(absl::Span<const RdmaOp> ops, ibv_wr_opcode opcode, ibv_sge* sges,
                  ibv_send_wr* wrs) {
  // Invariant: sges[0..next_sge) belong to wrs[0..i).
  size_t next_sge = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const RdmaOp& op = ops[i];
    ibv_send_wr& wr = wrs[i];
    // Value-initialised in place: the compiler zeroes it with a few vector
    // stores, where a memset call cost a GET ~30 instructions.
    wr = ibv_send_wr{};
    FillSges(op.local, sges + next_sge);
    wr.wr_id = op.wr_id;
    wr.sg_list = op.local.empty() ? nullptr : sges + next_sge;
    wr.num_sge = static_cast<int>(op.local.size());
    wr.opcode = opcode;
    wr.send_flags = op.signaled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = op.remote_addr;
    wr.wr.rdma.rkey = op.rkey;
    next_sge += op.local.size();
  }
}

// `rc` and `bad` as ibv_post_send(wrs[0..n)) returned them.
absl::Status PostChainError(int rc, const ibv_send_wr* wrs, size_t n, const ibv_send_wr* bad,
                            absl::string_view verb) {
  // ibv_post_send posts WRs in order and stops at the first it rejects;
  // `bad` points at it, so wrs[0..index) are on the send queue and will
  // complete. The caller needs that count to know which wr_ids to expect.
  if (n == 1 || bad == nullptr) {
    return rdma_internal::VerbError(absl::StrCat("ibv_post_send(", verb, ")"), rc);
  }
  const size_t index = static_cast<size_t>(bad - wrs);
  return rdma_internal::VerbError(
      absl::StrCat("ibv_post_send(", verb, " x", n, ") at WR ", index, " (wr_id 0x",
                   absl::Hex(bad->wr_id), "; the ", index, " before it were posted)"),
      rc);
}

// Batches up to this size are built on the stack (PostRdmaBatch).
constexpr size_t kStackWrs = 4;
constexpr size_t kStackSges = 8;

}  // namespace

// REQUIRES: n >= 1. Links wrs[0..n) into one list so that a single
// ibv_post_send rings the doorbell once for the whole batch.
absl::Status QueuePair::PostSendChain(ibv_send_wr* wrs, size_t n, absl::string_view verb) {
  for (size_t i = 0; i + 1 < n; ++i) wrs[i].next = &wrs[i + 1];
  wrs[n - 1].next = nullptr;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp_, wrs, &bad);
  if (rc == 0) return absl::OkStatus();
  return PostChainError(rc, wrs, n, bad, verb);
}

absl::Status QueuePair::PostRdma(absl::Span<const Sge> local, uint64_t remote_addr, uint32_t rkey,
                                 uint64_t wr_id, bool signaled, ibv_wr_opcode opcode,
                                 absl::string_view verb) {
  if (local.size() > caps_.max_send_sge) {
    return TooManySges(verb, local.size(), caps_.max_send_sge);
  }
  ibv_sge sges[kMaxSgePerWr];
  // The SGE array only has to live until ibv_post_send returns: the provider
  // copies it into the WQE, so stack storage is enough.
  FillSges(local, sges);
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sges;
  wr.num_sge = static_cast<int>(local.size());
  wr.opcode = opcode;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  // The remote address and rkey are not checked here: the responder's HCA
  // checks them against the MR or window, and a violation is reported as
  // IBV_WC_REM_ACCESS_ERR and kills the QP. Callers bounds-check first.
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  return PostSendChain(&wr, 1, verb);
}

absl::Status QueuePair::PostRead(absl::Span<const Sge> local, uint64_t remote_addr, uint32_t rkey,
                                 uint64_t wr_id, bool signaled) {
  return PostRdma(local, remote_addr, rkey, wr_id, signaled, IBV_WR_RDMA_READ, "RDMA_READ");
}

absl::Status QueuePair::PostWrite(absl::Span<const Sge> local, uint64_t remote_addr, uint32_t rkey,
                                  uint64_t wr_id, bool signaled) {
  return PostRdma(local, remote_addr, rkey, wr_id, signaled, IBV_WR_RDMA_WRITE, "RDMA_WRITE");
}

absl::Status QueuePair::PostSend(absl::Span<const Sge> local, uint64_t wr_id, bool signaled,
                                 bool inline_data) {
  if (local.size() > caps_.max_send_sge) {
    return TooManySges("SEND", local.size(), caps_.max_send_sge);
  }
  ibv_sge sges[kMaxSgePerWr];
  const uint64_t total = FillSges(local, sges);
  // Checked here because providers differ in how they fail an oversized
  // inline SEND; this gives one kInvalidArgument.
  if (inline_data && total > caps_.max_inline) {
    return absl::InvalidArgumentError(
        absl::StrCat("SEND: ", total, " bytes inline, the QP allows ", caps_.max_inline));
  }
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sges;
  wr.num_sge = static_cast<int>(local.size());
  wr.opcode = IBV_WR_SEND;
  // With IBV_SEND_INLINE the provider copies the bytes during the post and
  // ignores the lkeys, so `local` may be reused as soon as this returns.
  wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (inline_data ? IBV_SEND_INLINE : 0);
  return PostSendChain(&wr, 1, inline_data ? "SEND inline" : "SEND");
}

// One SGE per receive (QpCaps::max_recv_sge defaults to 1). The buffer
// must stay registered and untouched until the receive completes.
absl::Status QueuePair::PostRecv(const Sge& local, uint64_t wr_id) {
  ibv_sge sge;
  sge.addr = local.addr;
  sge.length = local.length;
  sge.lkey = local.lkey;
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad); rc != 0) {
    return rdma_internal::VerbError("ibv_post_recv", rc);
  }
  return absl::OkStatus();
}

absl::Status QueuePair::PostRdmaBatch(absl::Span<const RdmaOp> ops, ibv_wr_opcode opcode,
                                      absl::string_view verb) {
  if (ops.empty()) return absl::OkStatus();
  // A chain longer than the send queue can never be posted whole; reject it
  // before building anything. (A shorter one can still fail with
  // kResourceExhausted when earlier WRs occupy the queue.)
  if (ops.size() > caps_.max_send_wr) {
    return absl::InvalidArgumentError(absl::StrCat(
        verb, ": batch of ", ops.size(), " WRs, the send queue holds ", caps_.max_send_wr));
  }
  size_t total_sges = 0;
  for (const RdmaOp& op : ops) {
    if (op.local.size() > caps_.max_send_sge) {
      return TooManySges(verb, op.local.size(), caps_.max_send_sge);
    }
    total_sges += op.local.size();
  }
  // A GET posts one or two WRs (its entry READ and the fence READ): those go
  // from arrays on the stack, zeroed only as far as used. The
  // InlinedVectors that any size needs cost a GET more than the loop
  // filling them (measured with callgrind: ~40 of ~140 instructions).
  if (ops.size() <= kStackWrs && total_sges <= kStackSges) {
    ibv_sge sges[kStackSges];
    ibv_send_wr wrs[kStackWrs];
    ChainRdmaOps(ops, opcode, sges, wrs);
    // Posted here rather than through PostSendChain(), whose call and
    // linking loop cost a GET ~40 instructions; PostChainError names a
    // failure as PostSendChain() would.
    for (size_t i = 0; i + 1 < ops.size(); ++i) wrs[i].next = &wrs[i + 1];
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(qp_, wrs, &bad);
    if (ABSL_PREDICT_TRUE(rc == 0)) return absl::OkStatus();
    return PostChainError(rc, wrs, ops.size(), bad, verb);
  }
  // Sized up front: the WRs point into `sges`, which must not reallocate.
  absl::InlinedVector<ibv_sge, 32> sges(total_sges);
  absl::InlinedVector<ibv_send_wr, 16> wrs(ops.size());
  ChainRdmaOps(ops, opcode, sges.data(), wrs.data());
  return PostSendChain(wrs.data(), wrs.size(), verb);
}

absl::Status QueuePair::PostReads(absl::Span<const ReadOp> ops) {
  return PostRdmaBatch(ops, IBV_WR_RDMA_READ, "RDMA_READ");
}

absl::Status QueuePair::PostWrites(absl::Span<const WriteOp> ops) {
  return PostRdmaBatch(ops, IBV_WR_RDMA_WRITE, "RDMA_WRITE");
}

absl::Status QueuePair::PostWriteSends(absl::Span<const WriteSendOp> ops) {
  if (ops.empty()) return absl::OkStatus();
  // Each op posts a WRITE and, unless it has none, its SEND.
  size_t total_wrs = 0;
  size_t total_sges = 0;
  for (const WriteSendOp& op : ops) {
    if (op.write.local.size() > caps_.max_send_sge) {
      return TooManySges("RDMA_WRITE", op.write.local.size(), caps_.max_send_sge);
    }
    if (op.send.size() > caps_.max_send_sge) {
      return TooManySges("SEND", op.send.size(), caps_.max_send_sge);
    }
    total_wrs += op.post_send ? 2 : 1;
    total_sges += op.write.local.size() + (op.post_send ? op.send.size() : 0);
  }
  if (total_wrs > caps_.max_send_wr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WRITE+SEND: batch of ", total_wrs, " WRs, the send queue holds ", caps_.max_send_wr));
  }
  // Sized up front: the WRs point into `sges`, which must not reallocate.
  absl::InlinedVector<ibv_sge, 64> sges(total_sges);
  // Each op's WRITE, then its SEND. The order within the chain is the
  // point: RC executes a QP's WRs in order, so the SEND that announces a
  // write reaches the peer only after the written bytes.
  absl::InlinedVector<ibv_send_wr, 32> wrs(total_wrs);
  size_t next_sge = 0;
  size_t next_wr = 0;
  for (const WriteSendOp& op : ops) {
    ibv_send_wr& w = wrs[next_wr++];
    std::memset(&w, 0, sizeof w);
    FillSges(op.write.local, sges.data() + next_sge);
    w.wr_id = op.write.wr_id;
    w.sg_list = op.write.local.empty() ? nullptr : sges.data() + next_sge;
    w.num_sge = static_cast<int>(op.write.local.size());
    w.opcode = IBV_WR_RDMA_WRITE;
    w.send_flags = op.write.signaled ? IBV_SEND_SIGNALED : 0;
    w.wr.rdma.remote_addr = op.write.remote_addr;
    w.wr.rdma.rkey = op.write.rkey;
    next_sge += op.write.local.size();
    if (!op.post_send) continue;

    ibv_send_wr& s = wrs[next_wr++];
    std::memset(&s, 0, sizeof s);
    // Returning here posts nothing: the chain is handed over only at the end.
    const uint64_t bytes = FillSges(op.send, sges.data() + next_sge);
    if (op.send_inline && bytes > caps_.max_inline) {
      return absl::InvalidArgumentError(
          absl::StrCat("SEND: ", bytes, " bytes inline, the QP allows ", caps_.max_inline));
    }
    s.wr_id = op.send_wr_id;
    s.sg_list = op.send.empty() ? nullptr : sges.data() + next_sge;
    s.num_sge = static_cast<int>(op.send.size());
    s.opcode = IBV_WR_SEND;
    s.send_flags =
        (op.send_signaled ? IBV_SEND_SIGNALED : 0) | (op.send_inline ? IBV_SEND_INLINE : 0);
    next_sge += op.send.size();
  }
  return PostSendChain(wrs.data(), wrs.size(), "RDMA_WRITE+SEND");
}

absl::StatusOr<uint32_t> QueuePair::PostBindMw(MemoryWindow& mw, const MemoryRegion& mr,
                                               uint64_t addr, uint64_t length, int access,
                                               uint64_t wr_id) {
  if (mw.bound()) {
    return absl::FailedPreconditionError(
        absl::StrCat("BIND_MW: window rkey 0x", absl::Hex(mw.rkey()), " is still bound (to QP 0x",
                     absl::Hex(mw.bound_qp_num()), "); invalidate it first"));
  }
  // The range check matters beyond tidiness: rxe checks window accesses
  // against the MR, not the window (memory_window.h), and a bind outside the
  // MR fails only at completion time, after the QP has gone to ERR.
  // Overflow-safe: addr - mr.addr() <= mr.length() - length.
  if (length == 0 || length > mr.length() || addr < mr.addr() ||
      addr - mr.addr() > mr.length() - length) {
    return absl::InvalidArgumentError(absl::StrCat("BIND_MW: [0x", absl::Hex(addr), ", +", length,
                                                   ") is empty or not inside MR [0x",
                                                   absl::Hex(mr.addr()), ", +", mr.length(), ")"));
  }
  // A fresh key per bind: ibv_inc_rkey changes the low 8 bits (the key
  // part), so a client still holding the previous rkey is refused even
  // though the window index is the same.
  const uint32_t new_rkey = ibv_inc_rkey(mw.rkey());
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  // Always signalled: the caller learns only from this completion whether
  // the new rkey is live, and must roll the bookkeeping back otherwise.
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw.get();
  wr.bind_mw.rkey = new_rkey;
  wr.bind_mw.bind_info.mr = mr.get();
  wr.bind_mw.bind_info.addr = addr;
  wr.bind_mw.bind_info.length = length;
  wr.bind_mw.bind_info.mw_access_flags = static_cast<unsigned int>(access);
  if (absl::Status s = PostSendChain(&wr, 1, "BIND_MW"); !s.ok()) return s;
  // Bookkeeping is updated only after a successful post; a failed post
  // leaves the window as it was.
  mw.OnBindPosted(new_rkey, qp_->qp_num, addr, length);
  return new_rkey;
}

absl::Status QueuePair::PostLocalInvalidate(uint32_t rkey, uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  // Always signalled: the window may be bound again only after this
  // completes successfully.
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = rkey;
  return PostSendChain(&wr, 1, "LOCAL_INV");
}

absl::Status QueuePair::PostLocalInvalidate(MemoryWindow& mw, uint64_t wr_id) {
  if (!mw.bound()) {
    return absl::FailedPreconditionError(
        absl::StrCat("LOCAL_INV: window rkey 0x", absl::Hex(mw.rkey()), " is not bound"));
  }
  if (absl::Status s = PostLocalInvalidate(mw.rkey(), wr_id); !s.ok()) return s;
  mw.OnInvalidatePosted();
  return absl::OkStatus();
}

}  // namespace rdma
}  // namespace kvstore
