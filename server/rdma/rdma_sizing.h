// Copyright 2026 The kvstore Authors.
//
// The numbers that keep one RDMA client from stalling the others, in one
// place and without verbs calls, so that they are testable on any host:
//
//   * queue-pair timeouts: a finite RNR retry count. With the verbs default
//     of 7 ("retry forever") an ack SEND to a client that posts no receive
//     never completes, the connection's ack ring fills and the one commit
//     poller used to wait on it;
//   * the ack ring: twice the commit credits, so that a client that keeps
//     to its credits can never fill it (an ack's send completion may trail
//     the next commit the client sends after reading that ack). A full ring
//     means the client stopped acknowledging: the connection is failed, the
//     poller never waits;
//   * the shared receive CQ: every receive every connection has posted can
//     complete at once, so the CQ must hold max_connections x credits
//     entries; an overflowing CQ puts every queue pair on it in error.
//
// Thread safety: pure functions.

#ifndef KVSTORE_SERVER_RDMA_RDMA_SIZING_H_
#define KVSTORE_SERVER_RDMA_RDMA_SIZING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/rdma/queue_pair.h"

namespace kvstore {
namespace server {

// Timeouts for the server's queue pairs: the library defaults with
// rnr_retry 6 (7 means unlimited). 6 retries at the client's RNR timer
// (0.64 ms, QpTimeouts::min_rnr_timer) fail a SEND to a client with no
// receive posted within milliseconds.
rdma::QpTimeouts ServerQpTimeouts();

// Ack buffers per connection for `credits` commit credits.
uint32_t AckRingSlots(uint32_t credits);
// Send queue (and send CQ) depth: the ack ring plus room for the binds,
// invalidations and idle probes that share the queue.
uint32_t SendQueueDepth(uint32_t credits);

// The shared receive CQ and how many connections it can serve.
struct RecvCqPlan {
  int depth = 0;                 // CQ entries to create
  uint32_t max_connections = 0;  // connections that fit: depth / credits
};
// max_connections x credits entries, or, when the device's max_cqe is
// smaller, as many whole connections as fit (fewer than asked; the caller
// logs it). kInvalidArgument when not even one connection fits, or for
// zero credits or connections.
absl::StatusOr<RecvCqPlan> PlanRecvCq(uint32_t max_connections, uint32_t credits, uint32_t max_cqe);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RDMA_RDMA_SIZING_H_
