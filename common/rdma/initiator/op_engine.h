// Copyright 2026 The kvstore Authors.
//
// OpEngine: runs the work requests of one RDMA path. It owns
//   - the operation slots: kSlots per path, each with registered scratch
//     memory (two buckets | a commit message | a small entry | the fence
//     words) and the state
//     the completion poller fills in (done, work-completion status, ack);
//   - the commit credits: at most RdmaConnection::credits() commits may
//     await their ack at once, one per receive the server can SEND into;
//   - completion polling: whichever waiting thread takes the poll lock drains
//     the CQ for everyone, completing slots and matching acks to requests;
//   - the "broken" state: any completion error, failed post or timed-out
//     wait breaks the path for good (the owner reconnects).
//
// Thread safety: thread-safe; any number of operations in flight, each on
// the slots it acquired.

#ifndef KVSTORE_COMMON_RDMA_INITIATOR_OP_ENGINE_H_
#define KVSTORE_COMMON_RDMA_INITIATOR_OP_ENGINE_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/protocol/layout.h"
#include "common/rdma/initiator/connection.h"
#include "common/rdma/initiator/rdma_context.h"
#include "common/rdma/initiator/slot_pool.h"
#include "common/rdma/queue_pair.h"

namespace kvstore {
namespace initiator {

// Scratch sizes per slot: both candidate buckets of a GET, and an entry small
// enough not to need a pooled buffer.
inline constexpr size_t kBucketArea = 2 * layout::kBucketBytes;
inline constexpr size_t kSmallEntryArea = 4096;
// Where a batch's fence READ lands (the 16 bytes of common/protocol/fence.h,
// rounded to a cache line).
inline constexpr size_t kFenceArea = 64;

// One operation's state and scratch memory (inside the engine's slot arena;
// all four areas share `lkey`). Owned by the thread that acquired it; the
// fields below `lkey` are also written by the poller until `done`.
struct OpSlot {
  int index = 0;
  char* buckets = nullptr;  // kBucketArea bytes
  char* commit = nullptr;   // room for any commit message
  char* entry = nullptr;    // kSmallEntryArea bytes
  char* fence = nullptr;    // kFenceArea bytes
  uint32_t lkey = 0;
  uint64_t generation = 0;  // bumped per commit; also the entry's version
  uint64_t request_id = 0;  // (generation << 16) | index: matches acks to slots
  std::atomic<bool> done{false};
  // Signaled READs of this slot completed since Arm(), plus kReadsFailed
  // once one failed: a chunked READ waits for each of its pieces in turn.
  std::atomic<uint32_t> reads{0};
  ibv_wc_status wc_status = IBV_WC_SUCCESS;
  absl::Status ack;
  uint16_t ack_batch_applied = 0;  // the ack's wire::CommitAck::batch_applied
};

// Added to OpSlot::reads by a failed work request: above any count a
// waiter asks for, so the waiter wakes, and sees the failure in wc_status.
inline constexpr uint32_t kReadsFailed = 1u << 31;

// How Wait() spends the time until a completion (see OpEngine::Wait):
// busy-poll, then yield between polls, then sleep between polls doubling
// from first_sleep to max_sleep. The defaults suit a client; a server's
// replication link spins briefly and then sleeps, since its threads share
// the server's cores.
struct WaitPolicy {
  absl::Duration busy_poll = absl::Microseconds(300);
  absl::Duration yield_until = absl::Milliseconds(2);
  absl::Duration first_sleep = absl::Microseconds(20);
  absl::Duration max_sleep = absl::Milliseconds(1);
};

class OpEngine {
 public:
  // Allocates and registers the slots' scratch for keys of up to
  // `max_key_bytes`. Errors as NewBlock. Attach() a connection before use.
  static absl::StatusOr<std::unique_ptr<OpEngine>> Create(std::shared_ptr<RdmaContext> ctx,
                                                          uint64_t max_key_bytes);
  OpEngine(const OpEngine&) = delete;
  OpEngine& operator=(const OpEngine&) = delete;

  // Runs work requests on `conn` (not owned; must outlive the engine's use).
  void Attach(RdmaConnection* conn) { conn_ = conn; }
  // Replaces the wait policy. REQUIRES: no Wait() running (set it before use).
  void set_wait_policy(const WaitPolicy& policy) { wait_ = policy; }

  // --- Slots and credits ---------------------------------------------------
  // `n` free slots (1 <= n <= kSlots), all at once, waiting until enough are
  // free or `deadline` (kDeadlineExceeded; the path stays usable). A caller
  // holding slots never asks for more: it reuses its own (see SlotPool).
  absl::StatusOr<std::vector<OpSlot*>> AcquireSlots(size_t n, absl::Time deadline);
  // Returns slots taken by AcquireSlots() (see SlotGuard).
  void ReleaseSlots(const std::vector<OpSlot*>& slots);
  // AcquireSlots(1) / ReleaseSlots() for one slot, allocating nothing (see
  // OneSlotGuard): the single-key operations' way. Inline: a slot that is
  // free costs one compare-and-swap, and every GET takes one.
  absl::StatusOr<OpSlot*> AcquireSlot(absl::Time deadline) {
    int i;
    if (!free_slots_.TryAcquireOne(&i)) {
      absl::StatusOr<int> waited = free_slots_.AcquireOne(deadline);
      if (!waited.ok()) return waited.status();
      i = *waited;
    }
    return &slots_[i];
  }
  void ReleaseSlot(OpSlot* s) { free_slots_.ReleaseOne(s->index); }
  // Starts a commit on `s`: a new request id, cleared completion state.
  uint64_t NewRequest(OpSlot* s);
  // Clears `s`'s completion state before posting a READ on it.
  void Arm(OpSlot* s);
  // Takes `n` commit credits; kDeadlineExceeded if they do not free up in time.
  absl::Status AcquireCredit(absl::Time deadline, int n = 1);
  // Gives back `n` credits taken by AcquireCredit().
  void ReturnCredits(int n = 1);
  // The total number of credits (commits that may await an ack at once).
  uint32_t credits() const { return conn_->credits(); }

  // --- Posting: a failed post breaks the path and returns kUnavailable -------
  // READs in one doorbell; the caller sets wr_ids and which are signaled.
  absl::Status PostReads(absl::Span<const rdma::ReadOp> reads);
  // One signaled READ of `local` from (remote_addr, rkey), completing `s`.
  absl::Status PostRead(absl::Span<const rdma::Sge> local, uint64_t remote_addr, uint32_t rkey,
                        const OpSlot* s);
  // One signaled SEND of `sge` for `s` (a DELETE commit); inlined if small.
  absl::Status PostSend(const rdma::Sge& sge, const OpSlot* s);
  // WRITE + commit SEND pairs in one doorbell (RdmaWriter).
  absl::Status PostWriteSends(absl::Span<const rdma::QueuePair::WriteSendOp> ops);

  // Waits until `s` completes (a signaled READ or the ack of its commit),
  // polling the CQ while no other thread does. kUnavailable when the path is
  // or becomes broken, or when `s`'s work request failed;
  // kDeadlineExceeded (and the path breaks) past `deadline`.
  absl::Status Wait(OpSlot* s, absl::Time deadline);
  // Waits until `n` signaled READs posted on `s` since Arm() have completed
  // (for a READ in pieces, each signaled, checked as it lands). Errors as
  // Wait(); a failed READ ends the wait with kUnavailable.
  absl::Status WaitReads(OpSlot* s, uint32_t n, absl::Time deadline);

  // True once the path broke; every later operation fails with kUnavailable.
  bool broken() const { return broken_.load(); }
  // Breaks the path, logging `why` the first time.
  void MarkBroken(const absl::Status& why);

 private:
  explicit OpEngine(std::shared_ptr<RdmaContext> ctx) : ctx_(std::move(ctx)) {}

  WaitPolicy wait_;

  // A post's outcome as the engine reports it: ok as it is (inline, since
  // every GET passes here: the call cost ~20 instructions), a failure marks
  // the path broken (PostFailed).
  absl::Status Post(absl::Status s) {
    if (ABSL_PREDICT_TRUE(s.ok())) return s;
    return PostFailed(s);
  }
  absl::Status PostFailed(const absl::Status& s);
  // Wait() and WaitReads(): polls (busy, then yielding, then sleeping) until
  // `ready()`; then reports `s`'s work-request status.
  template <typename Ready>
  absl::Status WaitUntil(OpSlot* s, absl::Time deadline, Ready ready);
  // Drains the CQ once. REQUIRES: this thread set polling_.
  void PollOnce();
  // Matches the ack in receive `i` to its slot and posts the receive again.
  // REQUIRES: this thread set polling_.
  void OnAck(const ibv_wc& wc);

  const std::shared_ptr<RdmaContext> ctx_;
  RdmaConnection* conn_ = nullptr;
  std::unique_ptr<Block> arena_;

  OpSlot slots_[kSlots];
  SlotPool free_slots_{kSlots};
  static_assert(kSlots <= SlotPool::kMaxSize, "one free bit per slot");
  absl::Mutex credit_mu_;
  int credits_used_ ABSL_GUARDED_BY(credit_mu_) = 0;
  // Set by the one waiter draining the CQ. A try-lock, never waited for,
  // so a flag (exchange to take, release store to give back) does what a
  // mutex did at a third of the instructions per wait.
  std::atomic<bool> polling_{false};
  std::atomic<bool> broken_{false};
};

// Returns slots to the engine when an operation ends.
class SlotGuard {
 public:
  SlotGuard(OpEngine* e, std::vector<OpSlot*> s) : e_(e), s_(std::move(s)) {}
  ~SlotGuard() { e_->ReleaseSlots(s_); }
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;

 private:
  OpEngine* e_;
  std::vector<OpSlot*> s_;
};

// Returns one slot taken by AcquireSlot() when an operation ends.
class OneSlotGuard {
 public:
  OneSlotGuard(OpEngine* e, OpSlot* s) : e_(e), s_(s) {}
  ~OneSlotGuard() { e_->ReleaseSlot(s_); }
  OneSlotGuard(const OneSlotGuard&) = delete;
  OneSlotGuard& operator=(const OneSlotGuard&) = delete;

 private:
  OpEngine* e_;
  OpSlot* s_;
};

// Returns commit credits to the engine when a commit's wait ends.
class CreditGuard {
 public:
  explicit CreditGuard(OpEngine* e, int n = 1) : e_(e), n_(n) {}
  ~CreditGuard() { e_->ReturnCredits(n_); }
  CreditGuard(const CreditGuard&) = delete;
  CreditGuard& operator=(const CreditGuard&) = delete;

 private:
  OpEngine* e_;
  int n_;
};

}  // namespace initiator
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_INITIATOR_OP_ENGINE_H_
