// Copyright 2026 The kvstore Authors.

#include "common/rdma/completion_queue.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rdma/verbs_status.h"
#include "glog/logging.h"

namespace kvstore {
namespace rdma {

using rdma_internal::VerbError;

// ---------------------------------------------------------------------------
// CompletionChannel

absl::StatusOr<CompletionChannel> CompletionChannel::Create(const Device& device) {
  ibv_comp_channel* channel = ibv_create_comp_channel(device.context());
  if (channel == nullptr) return VerbError("ibv_create_comp_channel", errno);
  CompletionChannel owner(channel);  // closes the channel on the error paths
  int flags = fcntl(channel->fd, F_GETFL);
  // Non-blocking so that WaitForEvent() can poll(2) with a timeout and then
  // call ibv_get_cq_event without risking an unbounded block after a
  // spurious wake-up.
  if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return VerbError("fcntl(comp_channel fd, O_NONBLOCK)", errno);
  }
  return std::move(owner);
}

CompletionChannel::CompletionChannel(CompletionChannel&& other) noexcept
    : channel_(std::exchange(other.channel_, nullptr)) {}

CompletionChannel& CompletionChannel::operator=(CompletionChannel&& other) noexcept {
  if (this != &other) {
    this->~CompletionChannel();
    new (this) CompletionChannel(std::move(other));
  }
  return *this;
}

CompletionChannel::~CompletionChannel() {
  if (channel_ != nullptr) {
    // Returns errno-style values directly (rdma-core 44).
    if (int rc = ibv_destroy_comp_channel(channel_); rc != 0) {
      LOG(ERROR) << "ibv_destroy_comp_channel failed: " << std::strerror(rc);
    }
  }
}

int CompletionChannel::fd() const { return channel_->fd; }

// ---------------------------------------------------------------------------
// CompletionQueue

absl::StatusOr<CompletionQueue> CompletionQueue::Create(const Device& device, int depth,
                                                        CompletionChannel* channel_or_null) {
  if (depth < 1) {
    return absl::InvalidArgumentError(absl::StrCat("CompletionQueue depth ", depth, " < 1"));
  }
  // Clamp to 2^30 before narrowing DeviceLimits' unsigned max_cqe to the int
  // that ibv_create_cq takes. A limit of 0 (unknown) leaves the request as
  // is, and the verb decides.
  int max_cqe = static_cast<int>(std::min<uint32_t>(device.limits().max_cqe, 1u << 30));
  if (max_cqe > 0 && depth > max_cqe) {
    LOG(WARNING) << "CompletionQueue depth " << depth << " clamped to the device's max_cqe "
                 << max_cqe;
    depth = max_cqe;
  }
  // comp_vector 0: every CQ uses the first interrupt vector, which every
  // device has (num_comp_vectors >= 1).
  ibv_comp_channel* channel = channel_or_null != nullptr ? channel_or_null->get() : nullptr;
  ibv_cq* cq = ibv_create_cq(device.context(), depth, /*cq_context=*/nullptr, channel,
                             /*comp_vector=*/0);
  if (cq == nullptr) return VerbError(absl::StrCat("ibv_create_cq(", depth, ")"), errno);
  // cq->cqe is what the device allocated, which may exceed `depth` (providers
  // round up); depth() reports it.
  return CompletionQueue(cq, cq->cqe, channel_or_null);
}

CompletionQueue::CompletionQueue(CompletionQueue&& other) noexcept
    : cq_(std::exchange(other.cq_, nullptr)),
      depth_(std::exchange(other.depth_, 0)),
      channel_(std::exchange(other.channel_, nullptr)) {}

CompletionQueue& CompletionQueue::operator=(CompletionQueue&& other) noexcept {
  if (this != &other) {
    this->~CompletionQueue();
    new (this) CompletionQueue(std::move(other));
  }
  return *this;
}

CompletionQueue::~CompletionQueue() {
  if (cq_ != nullptr) {
    // ibv_destroy_cq also waits until every event of the CQ has been
    // acknowledged; WaitForEvent() acks each one it consumes.
    if (int rc = ibv_destroy_cq(cq_); rc != 0) {
      LOG(ERROR) << "ibv_destroy_cq failed: " << std::strerror(rc)
                 << (rc == EBUSY ? " (a QP still uses it: destroy QPs first)" : "");
    }
  }
}

absl::StatusOr<ibv_wc> CompletionQueue::PollOne(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  ibv_wc wc;
  // Returns error completions too: the caller decides with WcStatusToStatus().
  for (int spins = 0;; ++spins) {
    int n = ibv_poll_cq(cq_, 1, &wc);
    if (n < 0) return absl::InternalError(absl::StrCat("ibv_poll_cq returned ", n));
    if (n == 1) return wc;
    // Checking the clock every poll would dominate; every 64th is plenty.
    if ((spins & 63) == 63) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("no completion within ", absl::FormatDuration(timeout)));
      }
      sched_yield();
    }
  }
}

absl::Status CompletionQueue::RequestNotify() {
  if (channel_ == nullptr) {
    return absl::FailedPreconditionError("RequestNotify on a CQ without a completion channel");
  }
  // solicited_only=0: any completion fires the channel, not only SENDs with
  // the solicited bit.
  if (int rc = ibv_req_notify_cq(cq_, /*solicited_only=*/0); rc != 0) {
    return VerbError("ibv_req_notify_cq", rc);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CompletionQueue::WaitForEvent(absl::Duration timeout) {
  if (channel_ == nullptr) {
    return absl::FailedPreconditionError("WaitForEvent on a CQ without a completion channel");
  }
  const absl::Time deadline = absl::Now() + timeout;
  // Each iteration consumes at most one event. Loops only on EINTR, a
  // spurious wake-up, or an event for a different CQ, and gives up at the
  // deadline in each of those cases.
  for (;;) {
    absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    // Round up so that a sub-millisecond remainder still waits.
    int ms = static_cast<int>(
        std::min<int64_t>(absl::ToInt64Milliseconds(left + absl::Microseconds(999)), 1 << 30));
    pollfd pfd{channel_->fd(), POLLIN, 0};
    int n = poll(&pfd, 1, ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return VerbError("poll(comp_channel fd)", errno);
    }
    if (n == 0) return false;  // timeout
    ibv_cq* ev_cq = nullptr;
    void* ev_context = nullptr;
    if (ibv_get_cq_event(channel_->get(), &ev_cq, &ev_context) != 0) {
      // The fd is non-blocking: a spurious wake-up leaves nothing to read.
      if (errno == EAGAIN || errno == EINTR) {
        if (absl::Now() >= deadline) return false;
        continue;
      }
      return VerbError("ibv_get_cq_event", errno);
    }
    // Every event must be acknowledged before the CQ can be destroyed. One
    // ack per event costs a mutex in libibverbs, which is fine off the
    // busy-poll path.
    ibv_ack_cq_events(ev_cq, 1);
    // Re-arm before the caller drains the CQ: a completion that arrives
    // between the drain and the next wait still fires the channel, so no
    // wake-up is lost. Arming is one-shot, hence once per event.
    if (int rc = ibv_req_notify_cq(ev_cq, /*solicited_only=*/0); rc != 0) {
      return VerbError("ibv_req_notify_cq", rc);
    }
    if (ev_cq == cq_) return true;
    LOG_EVERY_N(WARNING, 100) << "completion event for another CQ on this channel; "
                                 "sharing a channel between CQs is not supported by WaitForEvent";
    if (absl::Now() >= deadline) return false;
  }
}

// ---------------------------------------------------------------------------
// Work completions

absl::string_view WcOpcodeName(ibv_wc_opcode opcode) {
  switch (opcode) {
    case IBV_WC_SEND:
      return "SEND";
    case IBV_WC_RDMA_WRITE:
      return "RDMA_WRITE";
    case IBV_WC_RDMA_READ:
      return "RDMA_READ";
    case IBV_WC_COMP_SWAP:
      return "COMP_SWAP";
    case IBV_WC_FETCH_ADD:
      return "FETCH_ADD";
    case IBV_WC_BIND_MW:
      return "BIND_MW";
    case IBV_WC_LOCAL_INV:
      return "LOCAL_INV";
    case IBV_WC_TSO:
      return "TSO";
    case IBV_WC_RECV:
      return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM:
      return "RECV_RDMA_WITH_IMM";
    default:
      return "UNKNOWN_OPCODE";
  }
}

absl::Status WcStatusToStatus(const ibv_wc& wc, absl::string_view operation) {
  if (wc.status == IBV_WC_SUCCESS) return absl::OkStatus();
  // wc.opcode is undefined on error completions (rxe leaves it 0 = SEND).
  std::string what = operation.empty()
                         ? absl::StrCat("work request (reported opcode ", WcOpcodeName(wc.opcode),
                                        ", unreliable on errors)")
                         : std::string(operation);
  std::string message =
      absl::StrFormat("%s: %s (ibv_wc_status %d, vendor_err 0x%x, wr_id 0x%x, qp_num 0x%x)", what,
                      ibv_wc_status_str(wc.status), static_cast<int>(wc.status), wc.vendor_err,
                      wc.wr_id, wc.qp_num);
  switch (wc.status) {
    // The peer refused the access (bad or revoked rkey, range outside the
    // window), e.g. after the window was invalidated.
    case IBV_WC_REM_ACCESS_ERR:
      return absl::PermissionDeniedError(message);
    // The remaining cases are failures of the connection or the peer, or (a
    // flush) the aftermath of an earlier error: this QP is unusable, but a new
    // connection may succeed.
    case IBV_WC_WR_FLUSH_ERR:
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR:
      return absl::UnavailableError(message);
    default:
      // Everything else is a local misuse of verbs (bad lkey, length, opcode,
      // MW bind): a bug, not a transient condition.
      return absl::InternalError(message);
  }
}

}  // namespace rdma
}  // namespace kvstore
