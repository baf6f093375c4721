// Copyright 2026 The kvstore Authors.
//
// RdmaConnection: queue-pair setup. Creates the completion queue and the RC
// queue pair, exchanges endpoints with the server through ConnectQp, and
// posts one receive per commit credit for the server's acks. Owns those verbs
// resources for the life of one RDMA path.
//
// Thread safety: after Open(), qp() may be posted to from many threads (verbs
// posting is thread-safe); RepostAck() is called by the one thread that holds
// the owner's poll lock. Disconnect() once, at the end.

#ifndef KVSTORE_COMMON_RDMA_INITIATOR_CONNECTION_H_
#define KVSTORE_COMMON_RDMA_INITIATOR_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/control/control_client.h"
#include "common/rdma/completion_queue.h"
#include "common/rdma/initiator/rdma_context.h"
#include "common/rdma/initiator/server_layout.h"
#include "common/rdma/queue_pair.h"

namespace kvstore {
namespace initiator {

// Operations in flight per queue pair (and so operation slots per path).
inline constexpr int kSlots = 64;
// Work requests one slot may have on the send queue at once, which sizes
// it: a WRITE + commit SEND, or a GET's entry READ in up to 4 pieces and
// its fence READ (a reader that splits READs checks that its pieces fit),
// and one to spare.
inline constexpr int kSendWorkRequestsPerSlot = 6;

// Work request ids: bit 63 marks a receive (bits 0..15: the ack buffer);
// otherwise bits 0..15 are the operation slot and bits 16..17 the kind.
inline constexpr uint64_t kRecvTag = uint64_t{1} << 63;
inline constexpr uint64_t kKindRead = uint64_t{1} << 16;
inline constexpr uint64_t kKindWrite = uint64_t{2} << 16;
inline constexpr uint64_t kKindSend = uint64_t{3} << 16;
inline constexpr uint64_t kKindMask = uint64_t{3} << 16;

class RdmaConnection {
 public:
  // Connects a queue pair to the server of `layout` through `control`
  // (which must outlive the connection). Errors: the verbs error when a
  // resource cannot be created, ConnectQp's status, kFailedPrecondition
  // when the server's commit buffers are smaller than the key limit.
  static absl::StatusOr<std::unique_ptr<RdmaConnection>> Open(std::shared_ptr<RdmaContext> ctx,
                                                              control::ControlClient* control,
                                                              const ServerLayout& layout,
                                                              const std::string& client_name,
                                                              absl::Duration rpc_timeout);

  RdmaConnection(const RdmaConnection&) = delete;
  RdmaConnection& operator=(const RdmaConnection&) = delete;

  // Best effort, for a healthy path only: tells the server to close the
  // connection now rather than when it notices. Waits at most 2 s.
  void Disconnect();

  // The connected RC queue pair, and the one CQ both its queues report to.
  rdma::QueuePair& qp() { return *qp_; }
  rdma::CompletionQueue& cq() { return *cq_; }
  // The server's name for this connection; it scopes the write leases.
  uint64_t connection_id() const { return connection_id_; }
  // Commits that may be outstanding at once: one per posted ack receive.
  uint32_t credits() const { return credits_; }
  // The largest commit message the server's receive buffers hold, and
  // whether it takes kReplicaPutBatch commits (ConnectQpResponse).
  uint32_t max_commit_bytes() const { return max_commit_bytes_; }
  bool replica_batch_commits() const { return replica_batch_commits_; }

  // The ack that arrived in receive buffer `i` (wr_id & 0xffff), clipped to
  // `byte_len`; valid until RepostAck(i).
  absl::string_view ack(size_t i, uint32_t byte_len) const;
  // Posts receive buffer `i` again for the next ack.
  absl::Status RepostAck(size_t i);

 private:
  RdmaConnection(std::shared_ptr<RdmaContext> ctx, control::ControlClient* control,
                 control::SessionScope scope)
      : ctx_(std::move(ctx)), control_(control), scope_(scope) {}

  // Creates the CQ and the QP; then ConnectQp and moving the QP to RTS.
  absl::Status CreateQueuePair(rdma::QpCaps* caps);
  absl::Status Exchange(const ServerLayout& layout, const std::string& client_name,
                        absl::Duration rpc_timeout);
  // Registers the ack buffers and posts a receive on each.
  absl::Status PostAckReceives(uint32_t max_recv_wr);

  const std::shared_ptr<RdmaContext> ctx_;
  control::ControlClient* const control_;
  // The epoch and session of the handshake this connection belongs to.
  const control::SessionScope scope_;
  uint64_t connection_id_ = 0;
  uint32_t credits_ = 0;
  uint32_t max_commit_bytes_ = 0;
  bool replica_batch_commits_ = false;

  // Verbs resources in destruction-safe order: the QP (declared last) goes
  // first, then the registered buffers, then the CQ.
  std::optional<rdma::CompletionQueue> cq_;
  std::unique_ptr<Block> ack_arena_;
  // 8 bytes the server may WRITE to check we are alive (idle probes).
  std::unique_ptr<uint64_t[]> probe_word_;
  std::optional<rdma::MemoryRegion> probe_mr_;
  std::optional<rdma::QueuePair> qp_;
};

}  // namespace initiator
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_INITIATOR_CONNECTION_H_
