// Copyright 2026 The kvstore Authors.
//
// Move-only RAII owners of completion channels (ibv_comp_channel) and
// completion queues (ibv_cq), and the conversion of work completions to
// absl::Status.
//
// Destruction order: a CompletionChannel must outlive every CompletionQueue
// created on it, and a CompletionQueue every QueuePair that uses it
// (ibv_destroy_cq fails with EBUSY while a QP still refers to the CQ). An
// owner of several declares them in the order
//   Device, ProtectionDomain, CompletionChannel, CompletionQueue,
//   MemoryRegion, QueuePair, MemoryWindow
// (members are destroyed in reverse: windows first, see memory_window.h).

#ifndef KVSTORE_COMMON_RDMA_COMPLETION_QUEUE_H_
#define KVSTORE_COMMON_RDMA_COMPLETION_QUEUE_H_

#include <infiniband/verbs.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/rdma/device.h"

namespace kvstore {
namespace rdma {

// A completion channel: the file descriptor that signals "a CQ armed with
// RequestNotify() has a new completion". The fd is non-blocking.
// Thread-safety: the object is immutable after Create(); concurrent use of
// the fd is up to the caller.
class CompletionChannel {
 public:
  // ibv_create_comp_channel + O_NONBLOCK on its fd. kUnavailable (or another
  // code derived from errno) when the verb fails.
  static absl::StatusOr<CompletionChannel> Create(const Device& device);

  CompletionChannel(CompletionChannel&& other) noexcept;
  CompletionChannel& operator=(CompletionChannel&& other) noexcept;
  CompletionChannel(const CompletionChannel&) = delete;
  CompletionChannel& operator=(const CompletionChannel&) = delete;
  // Logs a failed ibv_destroy_comp_channel (EBUSY while a CQ still uses it).
  ~CompletionChannel();

  ibv_comp_channel* get() const { return channel_; }
  // The channel's fd, for poll(2)/epoll; readable when an event is pending.
  int fd() const;

 private:
  explicit CompletionChannel(ibv_comp_channel* channel) : channel_(channel) {}
  ibv_comp_channel* channel_ = nullptr;
};

// A completion queue with room for `depth()` completions. Size it for every
// signalled WR and every posted receive of the QPs that use it: a CQ overrun
// moves those QPs to the error state.
// Thread-safety: Poll() may be called from one thread at a time per CQ
// (libibverbs locks internally, but completions would be split between
// callers); RequestNotify/WaitForEvent from one thread.
class CompletionQueue {
 public:
  // ibv_create_cq with at least `depth` entries (clamped to the device's
  // max_cqe). With a non-null `channel` (which must outlive the CQ), the CQ
  // can sleep in WaitForEvent(); with null it is polled only.
  // kInvalidArgument for depth < 1.
  static absl::StatusOr<CompletionQueue> Create(const Device& device, int depth,
                                                CompletionChannel* channel_or_null);

  CompletionQueue(CompletionQueue&& other) noexcept;
  CompletionQueue& operator=(CompletionQueue&& other) noexcept;
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  // Logs a failed ibv_destroy_cq (EBUSY while a QP still uses the CQ).
  ~CompletionQueue();

  ibv_cq* get() const { return cq_; }
  // The number of entries the device actually allocated (>= the request).
  int depth() const { return depth_; }
  bool has_channel() const { return channel_ != nullptr; }

  // Datapath. Polls up to `n` completions into wc[0..n). Returns how many
  // (0 when the CQ is empty), or a negative value when ibv_poll_cq fails,
  // which only happens when the CQ itself is broken (e.g. overrun). Each
  // returned completion may carry an error status: see WcStatusToStatus().
  int Poll(ibv_wc* wc, int n) { return ibv_poll_cq(cq_, n, wc); }

  // Busy-polls (yielding the CPU between attempts) until one completion
  // arrives, and returns it whatever its status. kDeadlineExceeded after
  // `timeout`; kInternal when ibv_poll_cq fails. For setup paths and tests,
  // not for the datapath.
  absl::StatusOr<ibv_wc> PollOne(absl::Duration timeout);

  // Arms the CQ: the channel fires once for the next completion
  // (ibv_req_notify_cq, any completion). kFailedPrecondition without a
  // channel.
  absl::Status RequestNotify();

  // Waits up to `timeout` for the channel to fire (poll(2) on its fd), then
  // consumes and acknowledges the event (ibv_get_cq_event, ibv_ack_cq_events)
  // and re-arms the CQ. Returns true when an event arrived, false on timeout.
  // The caller must then drain the CQ with Poll(): the event only says that
  // completions may be there. Typical loop:
  //   RequestNotify();
  //   for (;;) { while ((n = Poll(wc, k)) > 0) Handle(wc, n);
  //              WaitForEvent(deadline); }
  // REQUIRES: RequestNotify() was called once before the first wait, and this
  // CQ is the only one on its channel (an event for another CQ is
  // acknowledged, that CQ re-armed, and the wait goes on).
  // kFailedPrecondition without a channel; kUnavailable when poll(2) or a
  // verb fails.
  absl::StatusOr<bool> WaitForEvent(absl::Duration timeout);

 private:
  CompletionQueue(ibv_cq* cq, int depth, CompletionChannel* channel)
      : cq_(cq), depth_(depth), channel_(channel) {}

  ibv_cq* cq_ = nullptr;
  int depth_ = 0;
  CompletionChannel* channel_ = nullptr;  // not owned
};

// The name of a completion opcode, e.g. "RDMA_WRITE", "RECV", "BIND_MW".
// ibv_poll_cq(3) leaves wc.opcode undefined on error completions, and rxe
// indeed reports 0 (SEND) there, e.g. for a failed RDMA WRITE.
absl::string_view WcOpcodeName(ibv_wc_opcode opcode);

// OK for IBV_WC_SUCCESS; otherwise a Status whose message names the
// operation, ibv_wc_status_str(status), the vendor error, wr_id and qp_num.
// The operation is `operation` when non-empty (callers know what the wr_id
// was), else the reported opcode, marked as unreliable. Codes:
//   IBV_WC_REM_ACCESS_ERR                         -> kPermissionDenied
//   IBV_WC_WR_FLUSH_ERR (the QP is in error)      -> kUnavailable
//   transport/peer failures (RETRY_EXC, RNR_RETRY_EXC, REM_OP, REM_ABORT,
//   REM_INV_REQ, RESP_TIMEOUT, REM_INV_RD_REQ)    -> kUnavailable
//   local programming errors (LOC_LEN, LOC_QP_OP, LOC_PROT, LOC_ACCESS,
//   MW_BIND, BAD_RESP, FATAL, GENERAL, ...)       -> kInternal
// After any error completion on an RC QP the QP is in the error state and
// every later WR completes with IBV_WC_WR_FLUSH_ERR.
absl::Status WcStatusToStatus(const ibv_wc& wc, absl::string_view operation = {});

}  // namespace rdma
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_COMPLETION_QUEUE_H_
