// Copyright 2026 The kvstore Authors.
//
// Move-only RAII owner of a reliable-connected queue pair (ibv_qp, IBV_QPT_RC)
// and its datapath: RDMA READ/WRITE, SEND/RECV, doorbell-batched READs and
// WRITEs, and type-2 memory-window bind/invalidate.
//
// Setup (creation, RESET->INIT->RTR->RTS, queries) is in queue_pair.cc; the
// post calls are in queue_pair_datapath.cc (style §4 rule 15).
//
// Connecting: each side creates its QP, sends local() to the peer over the
// control plane, and calls Connect() with the peer's endpoint. Nothing else
// is exchanged: the path MTU is this port's active MTU (both peers must see
// the same one, as on one RoCE subnet), and RoCE addressing uses the GRH with
// the peer's GID.
//
// Errors: any error completion on an RC QP (e.g. IBV_WC_REM_ACCESS_ERR for a
// bad rkey or an out-of-range address) moves it to the error state and every
// later WR completes with IBV_WC_WR_FLUSH_ERR. On Soft-RoCE the responder's
// QP goes to the error state too and no async event is raised. Recovery is a
// new QP pair, or Reset() + Connect() on both sides. Bounds-check every
// remote address before posting.
//
// Destruction order: a QueuePair must be destroyed before the CQs it uses
// (ibv_destroy_cq fails with EBUSY otherwise) and before the MRs its
// outstanding WRs refer to, and AFTER every memory window bound through it
// (destroying a QP with a bound type-2 window blocks ~51 s on rxe). An owner
// declares its members in the order
//   Device, ProtectionDomain, CompletionChannel, CompletionQueue,
//   MemoryRegion, QueuePair, MemoryWindow
// so that they are destroyed windows first, device last.
//
// Thread-safety: not thread-safe. One thread posts on a QP at a time (the
// memory-window bookkeeping is unsynchronised); completions are consumed from
// the CQs, possibly by another thread.

#ifndef KVSTORE_COMMON_RDMA_QUEUE_PAIR_H_
#define KVSTORE_COMMON_RDMA_QUEUE_PAIR_H_

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/rdma/completion_queue.h"
#include "common/rdma/device.h"
#include "common/rdma/memory_window.h"

namespace kvstore {
namespace rdma {

// Scatter/gather entries per WR that the datapath builds on the stack.
inline constexpr uint32_t kMaxSgePerWr = 16;

// Requested queue sizes. CreateRc clamps them to the device (ClampQpCaps) and
// caps() reports what the device granted.
struct QpCaps {
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t max_send_sge = 2;  // e.g. header+key and value of a zero-copy GET
  uint32_t max_recv_sge = 1;
  uint32_t max_inline = 64;  // bytes a SEND may carry inline
};

static_assert(QpCaps{}.max_send_wr >= 16 && QpCaps{}.max_recv_wr >= 16,
              "default queues must hold a 16-WR doorbell batch");
static_assert(QpCaps{}.max_send_sge >= 1 && QpCaps{}.max_send_sge <= kMaxSgePerWr,
              "send SGEs are built on the stack");
static_assert(QpCaps{}.max_recv_sge >= 1 && QpCaps{}.max_recv_sge <= kMaxSgePerWr,
              "receive SGEs are built on the stack");
static_assert(QpCaps{}.max_inline <= 1024, "inline data is copied into the WQE");

// `caps` with every field at most what `limits` allow (and SGEs at most
// kMaxSgePerWr, at least 1). A limit of 0 (unknown) leaves a field as is.
QpCaps ClampQpCaps(QpCaps caps, const DeviceLimits& limits);

// What the control plane exchanges so that two RC QPs can connect.
struct QpEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;               // 24 bits: the first packet sequence number this side sends
  std::array<uint8_t, 16> gid{};  // RoCE: the IPv4-mapped or IPv6 address
  uint16_t lid = 0;               // InfiniBand only; 0 on RoCE
  uint8_t port = 0;
  int gid_index = 0;  // the sender's own source GID index
};

// "qpn=0x11 psn=0x123456 gid=::ffff:10.0.2.15 lid=0 port=1 gid_index=1".
std::string QpEndpointToString(const QpEndpoint& endpoint);

// Retransmission parameters for Connect(). The defaults suit Soft-RoCE under
// emulation as well as hardware: timeout 14 is 4.096 us * 2^14 = 67 ms per
// try, 6 retries (not 7: Soft-RoCE treats retry_cnt 7 as "retry forever", so
// a dead peer would never fail a work request); rnr_retry 7 retries without
// limit while the peer has no receive posted (min_rnr_timer 12 = 0.64 ms
// between tries).
struct QpTimeouts {
  uint8_t timeout = 14;
  uint8_t retry_cnt = 6;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 12;
};

// One local buffer of a WR: `length` bytes at `addr` in an MR with `lkey`.
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// One RDMA READ (or WRITE) of a doorbell batch: remote [remote_addr, +sum of
// local lengths) under `rkey` to (from) the local SGEs.
struct RdmaOp {
  absl::Span<const Sge> local;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t wr_id = 0;
  bool signaled = false;
};
using ReadOp = RdmaOp;
using WriteOp = RdmaOp;

// The name of a QP state, e.g. "RTS", "ERR".
absl::string_view QpStateName(ibv_qp_state state);

class QueuePair {
 public:
  // Creates an RC QP (state RESET) whose send completions go to `send_cq`
  // and receive completions to `recv_cq` (may be the same CQ; both must
  // outlive the QP), with `caps` clamped to the device, using source GID
  // `gid_index` of the device's port (see FindRoceV2GidIndex). Work requests
  // are signalled only on request (sq_sig_all = 0).
  // Fails with the code of ibv_create_qp's errno (kResourceExhausted for
  // ENOMEM, kInvalidArgument for EINVAL), or of ibv_query_gid/port.
  static absl::StatusOr<QueuePair> CreateRc(const Device& device, const ProtectionDomain& pd,
                                            CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                            QpCaps caps = {}, int gid_index = 0);

  QueuePair(QueuePair&& other) noexcept;
  QueuePair& operator=(QueuePair&& other) noexcept;
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;
  // ibv_destroy_qp; logs a failure, and a warning when it took over a second
  // (a memory window was still bound to it).
  ~QueuePair();

  // Setup ------------------------------------------------------------------

  // This side's endpoint, to send to the peer. Stable for the QP's lifetime
  // (Reset() keeps the PSN).
  QpEndpoint local() const;

  // Connects to `remote` (the peer's local()): RESET (if needed) -> INIT with
  // qp_access_flags = `access_flags` (what the PEER may do to this side's
  // memory through this QP: IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE
  // for a responder, 0 for a pure requester; rkeys still decide per MR/MW)
  // -> RTR (path MTU = the port's active MTU, GRH to remote.gid,
  // max_dest_rd_atomic = min(max_qp_rd_atom, 16)) -> RTS
  // (max_rd_atomic = min(max_qp_init_rd_atom, 16), `timeouts`).
  // Completions of an earlier connection may still be in the CQs: drain them
  // before reusing the QP. Fails with the failing transition named
  // ("ibv_modify_qp(RTR): Invalid argument"); the QP is then left in the
  // state reached so far.
  absl::Status Connect(const QpEndpoint& remote, int access_flags, const QpTimeouts& timeouts = {});

  // Moves the QP to RESET (from any state, e.g. ERR after a remote access
  // error), dropping outstanding WRs without completions. Connect() it again
  // afterwards; the peer must Reset()+Connect() too. Fails with the code of
  // ibv_modify_qp's error (see VerbError in verbs_status.h).
  absl::Status Reset();

  // The QP's current state (ibv_query_qp). Fails with the code of the
  // verb's error; the state may change right after, e.g. to ERR when an
  // outstanding WR fails.
  absl::StatusOr<ibv_qp_state> state() const;

  uint32_t qp_num() const { return qp_->qp_num; }
  // What the device granted (at least the clamped request).
  const QpCaps& caps() const { return caps_; }
  int gid_index() const { return gid_index_; }
  // Borrowed; valid while this QueuePair lives. Null after a move, when
  // every other method but destruction and assignment is invalid.
  ibv_qp* get() const { return qp_; }

  // Datapath (queue_pair_datapath.cc) ----------------------------------------
  //
  // Every Post* returns OK when the WR(s) were queued; the outcome arrives
  // later as a completion (see WcStatusToStatus). A failed post is
  // kInvalidArgument for arguments checked here (too many SGEs or WRs, inline
  // data too long) or the code of ibv_post_send's errno (kResourceExhausted
  // when the send queue is full).
  //
  // Selective signalling: an unsignalled WR produces no completion (unless it
  // fails), and its send-queue slot is freed only when a later signalled WR
  // completes. Signal at least once every caps().max_send_wr WRs. RC
  // completes WRs in order, so a signalled completion implies that every
  // earlier WR of the QP completed successfully.

  // RDMA READ of remote [remote_addr, +total length) under `rkey` into `local`.
  absl::Status PostRead(absl::Span<const Sge> local, uint64_t remote_addr, uint32_t rkey,
                        uint64_t wr_id, bool signaled);
  // RDMA WRITE of `local` to remote [remote_addr, +total length) under `rkey`.
  absl::Status PostWrite(absl::Span<const Sge> local, uint64_t remote_addr, uint32_t rkey,
                         uint64_t wr_id, bool signaled);
  // SEND of `local`; the peer needs a posted receive large enough. With
  // `inline_data` the bytes are copied into the WQE at post time (lkeys are
  // ignored; total length at most caps().max_inline) and the buffers may be
  // reused as soon as this returns.
  absl::Status PostSend(absl::Span<const Sge> local, uint64_t wr_id, bool signaled,
                        bool inline_data = false);
  // Posts a receive buffer (needs LOCAL_WRITE on its MR). Always completes.
  absl::Status PostRecv(const Sge& local, uint64_t wr_id);

  // All `ops` as RDMA READs (WRITEs) chained into one ibv_post_send: one
  // doorbell. Each op says whether it is signalled. At most caps().max_send_wr
  // ops. On a failed post, the ops before the one named in the message were
  // posted and will complete.
  absl::Status PostReads(absl::Span<const ReadOp> ops);
  absl::Status PostWrites(absl::Span<const WriteOp> ops);

  // The commit pattern: for each op an RDMA WRITE and then a SEND, all
  // chained into one ibv_post_send (one doorbell). On an RC queue pair the
  // receiver sees each SEND only after the WRITEs posted before it landed.
  struct WriteSendOp {
    WriteOp write;  // write.signaled is honoured (usually false)
    absl::Span<const Sge> send;
    uint64_t send_wr_id = 0;
    bool send_signaled = false;
    bool send_inline = false;
    // False: the op is the WRITE alone (several WRITEs that one later SEND
    // announces, as a replica batch commit does).
    bool post_send = true;
  };
  // At most caps().max_send_wr WRs (two per op, one for an op without its
  // SEND). Argument errors (SGE count, inline length) are found before
  // anything is posted.
  absl::Status PostWriteSends(absl::Span<const WriteSendOp> ops);

  // Binds type-2 window `mw` to this QP over [addr, addr+length) of `mr`
  // with `access` (IBV_ACCESS_REMOTE_WRITE / _READ / _ATOMIC), under a new
  // rkey (ibv_inc_rkey of the window's current one), which it returns; `mw`
  // records it (rkey(), bound()). The WR is always signalled and the caller
  // must poll its completion (IBV_WC_BIND_MW): only then is the rkey valid;
  // if it fails, call mw.RollbackBind(). `mr` must have been registered with
  // IBV_ACCESS_MW_BIND (and LOCAL_WRITE for a writable window).
  // kFailedPrecondition when `mw` is bound (binding a bound type-2 window
  // kills the QP); kInvalidArgument when the range is empty or not inside
  // `mr`.
  absl::StatusOr<uint32_t> PostBindMw(MemoryWindow& mw, const MemoryRegion& mr, uint64_t addr,
                                      uint64_t length, int access, uint64_t wr_id);

  // IBV_WR_LOCAL_INV of `rkey` (a window bound through this QP): once it
  // completes (IBV_WC_LOCAL_INV), the rkey no longer grants access and the
  // window can be bound again. Always signalled.
  absl::Status PostLocalInvalidate(uint32_t rkey, uint64_t wr_id);
  // Same for `mw`'s current rkey; marks `mw` unbound (mw.RollbackInvalidate()
  // if the completion fails). kFailedPrecondition when `mw` is not bound.
  absl::Status PostLocalInvalidate(MemoryWindow& mw, uint64_t wr_id);

 private:
  QueuePair(ibv_qp* qp, ibv_context* context, uint8_t port, int gid_index, QpCaps caps,
            uint32_t psn, std::array<uint8_t, 16> gid, uint16_t lid, uint8_t max_rd_atomic,
            uint8_t max_dest_rd_atomic)
      : qp_(qp),
        context_(context),
        port_(port),
        gid_index_(gid_index),
        caps_(caps),
        psn_(psn),
        gid_(gid),
        lid_(lid),
        max_rd_atomic_(max_rd_atomic),
        max_dest_rd_atomic_(max_dest_rd_atomic) {}

  absl::Status Modify(ibv_qp_attr& attr, int mask, absl::string_view what);
  // Posts the chain `wrs[0..n)` linked by `next`; names `verb` in errors.
  absl::Status PostSendChain(ibv_send_wr* wrs, size_t n, absl::string_view verb);
  absl::Status PostRdmaBatch(absl::Span<const RdmaOp> ops, ibv_wr_opcode opcode,
                             absl::string_view verb);
  absl::Status PostRdma(absl::Span<const Sge> local, uint64_t remote_addr, uint32_t rkey,
                        uint64_t wr_id, bool signaled, ibv_wr_opcode opcode,
                        absl::string_view verb);

  ibv_qp* qp_ = nullptr;
  ibv_context* context_ = nullptr;  // not owned
  uint8_t port_ = 0;
  int gid_index_ = 0;
  QpCaps caps_;
  uint32_t psn_ = 0;
  std::array<uint8_t, 16> gid_{};
  uint16_t lid_ = 0;
  uint8_t max_rd_atomic_ = 1;
  uint8_t max_dest_rd_atomic_ = 1;
};

}  // namespace rdma
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_QUEUE_PAIR_H_
