// Copyright 2026 The kvstore Authors.
//
// RdmaService::Connection: one client's queue pair, its buffers and send
// bookkeeping, and the tags of the work requests on its send queue. Private
// to server/rdma: the service, its lease windows and its fencing share it
// (split from rdma_service.cc by job).

#ifndef KVSTORE_SERVER_RDMA_RDMA_CONNECTION_H_
#define KVSTORE_SERVER_RDMA_RDMA_CONNECTION_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rdma/completion_queue.h"
#include "common/rdma/device.h"
#include "common/rdma/queue_pair.h"
#include "server/rdma/rdma_service.h"

namespace kvstore {
namespace server {
namespace rdma_internal {

// Send-queue work request ids on a connection's own send CQ. The top two
// bits say what the work request was, so a completion can be told apart.
inline constexpr uint64_t kAckTag = uint64_t{1} << 62;
inline constexpr uint64_t kBindTag = uint64_t{2} << 62;
inline constexpr uint64_t kInvalidateTag = uint64_t{3} << 62;
// Probes reuse the invalidate tag space with the top bit of the counter set.
inline constexpr uint64_t kProbeTag = kInvalidateTag | (uint64_t{1} << 61);
inline constexpr uint64_t kTagMask = uint64_t{3} << 62;

// How long a bind or an invalidation may take before the connection is
// declared dead.
inline constexpr absl::Duration kSendTimeout = absl::Seconds(5);

}  // namespace rdma_internal

// One client queue pair. Shared by the connection table, the poller while it
// handles a completion, and every LeaseWindow bound on it: the last of them
// to let go destroys the QP, so a window never outlives the QP it is bound
// to (destroying a QP with a bound type-2 window blocks for about a minute).
// Members are declared in destruction-safe order: the QP (last) goes first,
// then its buffers' MRs, then its send CQ.
struct RdmaService::Connection {
  // Fixed by Connect() before the connection is published; read freely.
  uint64_t id = 0;
  std::string owner;
  // What its session's principal may commit through it (commit_rights.h).
  CommitRights rights;
  uint32_t credits = 0;
  uint64_t probe_addr = 0;  // client memory for idle probes (rkey 0: none)
  uint32_t probe_rkey = 0;
  std::optional<rdma::CompletionQueue> send_cq;
  // `credits` commit receive buffers, and `ack_slots` ack send buffers
  // (AckRingSlots: more than a client keeping to its credits can fill).
  uint32_t ack_slots = 0;
  std::vector<char> recv_mem;
  std::optional<rdma::MemoryRegion> recv_mr;
  std::vector<char> ack_mem;
  std::optional<rdma::MemoryRegion> ack_mr;
  std::optional<rdma::QueuePair> qp;

  // Serializes posting on qp's send queue and polling send_cq.
  absl::Mutex send_mu;
  uint32_t ack_next ABSL_GUARDED_BY(send_mu) = 0;     // next ack buffer of the ring
  int send_outstanding ABSL_GUARDED_BY(send_mu) = 0;  // acks posted, not yet reaped
  uint64_t next_wr ABSL_GUARDED_BY(send_mu) = 0;      // counter for bind/invalidate/probe ids
  // Completions of binds and invalidations reaped by any poller of send_cq,
  // kept until the thread waiting for that work request picks its own up.
  absl::flat_hash_map<uint64_t, ibv_wc> finished ABSL_GUARDED_BY(send_mu);
  // Set once anything on the QP failed or timed out; never cleared. A dead
  // connection gets no more sends and is torn down by the poller.
  std::atomic<bool> dead{false};
  std::atomic<int64_t> last_activity_ns{0};  // absl::ToUnixNanos
  // Client commits of this connection the commit workers' dispatch took
  // (started on the poller, or in the connection's lane, waiting or
  // running) whose ack has not been posted: what its commit credits bound.
  // Given back just before the ack is posted, so a client that sends only
  // after an ack never finds it at its credits.
  std::atomic<uint32_t> unanswered{0};
  // A counted commit's ack is about to be posted.
  void Answered() { unanswered.fetch_sub(1, std::memory_order_acq_rel); }

  // Records activity (connect, commit, bind, probe) for the idle prober.
  void Touch() {
    last_activity_ns.store(absl::ToUnixNanos(absl::Now()), std::memory_order_relaxed);
  }

  // Waits for the completion of the posted bind or invalidation `wr_id` (at
  // most kSendTimeout), reaping other completions on the way. Its status,
  // or kDeadlineExceeded (the connection is then dead). send_mu is taken
  // for each poll only, never across the wait: the commit poller posts acks
  // on this connection meanwhile.
  // REQUIRES: send_mu not held.
  absl::Status WaitSend(uint64_t wr_id) ABSL_LOCKS_EXCLUDED(send_mu);

  // Reaps the send completions there are, without waiting.
  // REQUIRES: send_mu held.
  void ReapSends() ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu);

 private:
  // Accounts for one send completion: a finished ack frees a ring slot, a
  // failed one kills the connection.
  // REQUIRES: send_mu held.
  void Account(const ibv_wc& wc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu) {
    const uint64_t tag = wc.wr_id & rdma_internal::kTagMask;
    if (tag == rdma_internal::kAckTag) send_outstanding--;
    // A bind or an invalidation (not a probe): someone is waiting for it.
    if (tag == rdma_internal::kBindTag ||
        (tag == rdma_internal::kInvalidateTag &&
         (wc.wr_id & rdma_internal::kProbeTag) != rdma_internal::kProbeTag)) {
      finished[wc.wr_id] = wc;
    }
    if (wc.status != IBV_WC_SUCCESS) dead = true;
  }
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RDMA_RDMA_CONNECTION_H_
