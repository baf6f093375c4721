// Copyright 2026 The kvstore Authors.
//
// The engine keeps no thread of its own: completions are reaped by the
// threads waiting for them. Whoever sets polling_ drains the CQ and marks
// every slot it finds done; the others spin on their slot's `done` flag. This
// keeps a lone operation's latency at one poll, and many in flight share the
// polling.

#include "common/rdma/initiator/op_engine.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/protocol/commit_wire.h"
#include "common/rdma/completion_queue.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace kvstore {
namespace initiator {

// One registration for all slots: registering per operation would cost far
// more than the operation itself.
absl::StatusOr<std::unique_ptr<OpEngine>> OpEngine::Create(std::shared_ptr<RdmaContext> ctx,
                                                           uint64_t max_key_bytes) {
  std::unique_ptr<OpEngine> e(new OpEngine(ctx));
  // The commit area is rounded to 64 bytes so every area starts aligned (the
  // buckets are read as 8-byte slot words).
  const size_t commit_area = (wire::CommitBytes(max_key_bytes) + 63) / 64 * 64;
  const size_t scratch_bytes = kBucketArea + commit_area + kSmallEntryArea + kFenceArea;
  KV_ASSIGN_OR_RETURN(e->arena_, NewBlock(ctx, scratch_bytes * kSlots));
  for (int i = 0; i < kSlots; ++i) {
    OpSlot& s = e->slots_[i];
    s.index = i;
    s.buckets = e->arena_->mem.get() + i * scratch_bytes;
    s.commit = s.buckets + kBucketArea;
    s.entry = s.commit + commit_area;
    s.fence = s.entry + kSmallEntryArea;
    s.lkey = e->arena_->mr->lkey();
  }
  return e;
}

// All `n` are taken at once, never one by one, and never past the deadline
// (SlotPool has the rules).
absl::StatusOr<std::vector<OpSlot*>> OpEngine::AcquireSlots(size_t n, absl::Time deadline) {
  KV_ASSIGN_OR_RETURN(std::vector<int> taken, free_slots_.Acquire(n, deadline));
  std::vector<OpSlot*> out;
  out.reserve(taken.size());
  for (int i : taken) out.push_back(&slots_[i]);
  return out;
}

// The slots' state is left as is; the next user re-arms it.
void OpEngine::ReleaseSlots(const std::vector<OpSlot*>& slots) {
  std::vector<int> indices;
  indices.reserve(slots.size());
  for (OpSlot* x : slots) indices.push_back(x->index);
  free_slots_.Release(indices);
}

uint64_t OpEngine::NewRequest(OpSlot* s) {
  // A fresh id per commit, so a late ack for an earlier use of the slot
  // cannot complete this one.
  s->generation++;
  s->request_id = (s->generation << 16) | static_cast<uint64_t>(s->index);
  s->done.store(false, std::memory_order_relaxed);
  s->reads.store(0, std::memory_order_relaxed);
  s->ack = absl::OkStatus();
  s->wc_status = IBV_WC_SUCCESS;
  return s->request_id;
}

// Unlike NewRequest() the request id is kept: READs complete by wr_id, not
// by an ack.
void OpEngine::Arm(OpSlot* s) {
  s->done.store(false, std::memory_order_relaxed);
  s->reads.store(0, std::memory_order_relaxed);
  s->wc_status = IBV_WC_SUCCESS;
}

// Credits stand for the server's receive buffers for commits: a SEND with none
// posted would stall the queue pair in RNR retries, so a commit waits here.
absl::Status OpEngine::AcquireCredit(absl::Time deadline, int n) {
  absl::MutexLock lock(&credit_mu_);
  auto ok = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(credit_mu_) {
    return credits_used_ + n <= static_cast<int>(conn_->credits());
  };
  if (!credit_mu_.AwaitWithDeadline(absl::Condition(&ok), deadline)) {
    return absl::DeadlineExceededError("no commit credit before the deadline");
  }
  credits_used_ += n;
  return absl::OkStatus();
}

// Called once the commit's ack arrived (or the commit was never posted).
void OpEngine::ReturnCredits(int n) {
  absl::MutexLock lock(&credit_mu_);
  credits_used_ -= n;
}

// A post fails when the queue pair is in an error state or its send queue is
// full (which the slot limit is sized to prevent): the path is done either way.
absl::Status OpEngine::PostFailed(const absl::Status& s) {
  // Not MarkBroken: a failed post is reported to its caller, no need to log.
  broken_ = true;
  return absl::UnavailableError(absl::StrCat("RDMA post failed: ", s.message()));
}

// The caller set each READ's wr_id (kKindRead | slot) and which is signaled.
absl::Status OpEngine::PostReads(absl::Span<const rdma::ReadOp> reads) {
  return Post(conn_->qp().PostReads(reads));
}

// Always signaled: the READ's completion is what Wait() looks for.
absl::Status OpEngine::PostRead(absl::Span<const rdma::Sge> local, uint64_t remote_addr,
                                uint32_t rkey, const OpSlot* s) {
  return Post(conn_->qp().PostRead(local, remote_addr, rkey, kKindRead | s->index, true));
}

// Inline when it fits the QP's max_inline, so the NIC need not DMA-read the
// scratch (a DELETE's key makes it up to 40 + max_key_bytes bytes).
absl::Status OpEngine::PostSend(const rdma::Sge& sge, const OpSlot* s) {
  return Post(conn_->qp().PostSend(absl::MakeConstSpan(&sge, 1), kKindSend | s->index, true,
                                   /*inline=*/sge.length <= 64));
}

// WRITE + SEND pairs in one doorbell (see RdmaWriter::PostStaged).
absl::Status OpEngine::PostWriteSends(absl::Span<const rdma::QueuePair::WriteSendOp> ops) {
  return Post(conn_->qp().PostWriteSends(ops));
}

// Logged once per path, by whichever thread noticed first.
void OpEngine::MarkBroken(const absl::Status& why) {
  if (!broken_.exchange(true)) LOG(WARNING) << "RDMA data path broken: " << why;
}

// An ack is the server's answer to a commit SEND. A malformed one means the
// server and client disagree about the protocol: nothing on this path can be
// trusted any more.
void OpEngine::OnAck(const ibv_wc& wc) {
  const size_t i_buf = wc.wr_id & 0xffff;
  auto ack = wire::ParseAck(conn_->ack(i_buf, wc.byte_len));
  if (ack.ok() && ack->request_id != 0) {
    // The low 16 bits of a request id name its slot; the rest must match
    // the slot's current request, or the ack is stale and ignored.
    OpSlot& s = slots_[ack->request_id & 0xffff];
    if (s.request_id == ack->request_id) {
      s.ack = ack->status;
      s.ack_batch_applied = ack->batch_applied;
      s.done.store(true, std::memory_order_release);
    }
  } else if (!ack.ok()) {
    MarkBroken(ack.status());
  }
  if (!conn_->RepostAck(i_buf).ok()) MarkBroken(absl::UnavailableError("repost receive"));
}

// Up to 32 completions per call; Wait() calls again as long as its slot is
// not done. Receives (acks) and sends/READs are told apart by kRecvTag.
void OpEngine::PollOnce() {
  ibv_wc wc[32];
  const int n = conn_->cq().Poll(wc, 32);
  for (int i = 0; i < n; ++i) {
    const uint64_t id = wc[i].wr_id;
    if (id & kRecvTag) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        MarkBroken(rdma::WcStatusToStatus(wc[i], "ack receive"));
        continue;
      }
      OnAck(wc[i]);
      continue;
    }
    OpSlot& s = slots_[id & 0xffff];
    const uint64_t kind = id & kKindMask;
    if (wc[i].status != IBV_WC_SUCCESS) {
      MarkBroken(rdma::WcStatusToStatus(wc[i], kind == kKindRead ? "RDMA READ" : "RDMA SEND"));
      s.wc_status = wc[i].status;
      s.ack = absl::UnavailableError("RDMA work request failed");
      s.reads.fetch_add(kReadsFailed, std::memory_order_release);
      s.done.store(true, std::memory_order_release);
      continue;
    }
    // A successful signaled SEND (commit) is only bookkeeping: the ack
    // completes the operation.
    if (kind == kKindRead) {
      s.reads.fetch_add(1, std::memory_order_release);
      s.done.store(true, std::memory_order_release);
    }
  }
}

// A timed-out wait breaks the path: the work request may still complete
// later, into a slot that has been reused, so the queue pair cannot be
// trusted either.
absl::Status OpEngine::Wait(OpSlot* s, absl::Time deadline) {
  return WaitUntil(s, deadline, [s] { return s->done.load(std::memory_order_acquire); });
}

absl::Status OpEngine::WaitReads(OpSlot* s, uint32_t n, absl::Time deadline) {
  return WaitUntil(s, deadline, [s, n] { return s->reads.load(std::memory_order_acquire) >= n; });
}

template <typename Ready>
absl::Status OpEngine::WaitUntil(OpSlot* s, absl::Time deadline, Ready ready) {
  // Three phases, so that a wait costs CPU in proportion to how fast the
  // answer usually comes:
  //  * busy-poll for kBusyPoll: a READ completes within tens of µs, and a
  //    yield (a system call, perhaps a context switch) costs as much as the
  //    READ itself on a loaded host;
  //  * then yield between polls until kYieldFor: a commit's ack needs the
  //    server's thread to run;
  //  * then sleep between polls, doubling from kFirstSleep to kMaxSleep.
  //    A thread that yields forever stays runnable and takes a full share
  //    of a core: with a few such waiters on a small or emulated machine
  //    (Soft-RoCE in a VM) they starved the servers and etcd they were
  //    waiting for.
  // The durations are the WaitPolicy's (defaults: 300 µs, 2 ms, 20 µs, 1 ms).
  // The phases are timed from the 65th poll, not from the call: most waits
  // (every READ on an idle connection) end within a few polls, and reading
  // the clock and converting the policy's durations cost more than those
  // polls do.
  std::chrono::steady_clock::time_point start;
  std::chrono::nanoseconds busy_poll{0}, yield_for{0};
  enum class Phase { kSpin, kYield, kSleep } phase = Phase::kSpin;
  absl::Duration sleep = wait_.first_sleep;
  int idle = 0;
  while (!ready()) {
    if (broken_) return absl::UnavailableError("RDMA data path broken; reconnecting");
    // One poller at a time; the others spin on their own slot's flag, which
    // the poller sets for them.
    // Acquire and release order one poller's reaping before the next's.
    if (!polling_.load(std::memory_order_relaxed) &&
        !polling_.exchange(true, std::memory_order_acquire)) {
      PollOnce();
      polling_.store(false, std::memory_order_release);
    }
    if (ready()) break;
    if (++idle <= 64) continue;
    if (idle == 65) {
      start = std::chrono::steady_clock::now();
      busy_poll = absl::ToChronoNanoseconds(wait_.busy_poll);
      yield_for = absl::ToChronoNanoseconds(wait_.yield_until);
    }
    switch (phase) {
      case Phase::kSpin:
        // The steady clock is cheap (vDSO); still, read it every 16 rounds.
        if ((idle & 15) == 0 && std::chrono::steady_clock::now() - start > busy_poll) {
          phase = Phase::kYield;
        }
        continue;
      case Phase::kYield:
        std::this_thread::yield();
        if ((idle & 63) == 0 && std::chrono::steady_clock::now() - start > yield_for) {
          phase = Phase::kSleep;
        }
        break;
      case Phase::kSleep:
        absl::SleepFor(sleep);
        sleep = std::min(sleep * 2, wait_.max_sleep);
        break;
    }
    // absl::Now() costs more than a poll: read it every 64 rounds, or on
    // every sleep (a sleep is already far longer).
    if ((phase == Phase::kSleep || (idle & 63) == 0) && absl::Now() > deadline) {
      MarkBroken(absl::DeadlineExceededError("operation timed out"));
      return absl::DeadlineExceededError("RDMA operation did not complete before the deadline");
    }
  }
  if (s->wc_status != IBV_WC_SUCCESS) {
    return absl::UnavailableError(
        absl::StrCat("RDMA work request failed: ", ibv_wc_status_str(s->wc_status)));
  }
  return absl::OkStatus();
}

}  // namespace initiator
}  // namespace kvstore
