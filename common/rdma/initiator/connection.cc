// Copyright 2026 The kvstore Authors.
//
// Setup order matters to verbs: CQ, then QP (RESET -> INIT on creation), then
// the endpoint exchange, then INIT -> RTR -> RTS in Connect(). Receives may be
// posted from INIT on, and must be before the server can SEND an ack.

#include "common/rdma/initiator/connection.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/protocol/commit_wire.h"
#include "common/rdma/gid.h"
#include "common/status_macros.h"

namespace kvstore {
namespace initiator {

// The object is built first so that its destructor frees whatever a failed
// step left behind.
absl::StatusOr<std::unique_ptr<RdmaConnection>> RdmaConnection::Open(
    std::shared_ptr<RdmaContext> ctx, control::ControlClient* control, const ServerLayout& layout,
    const std::string& client_name, absl::Duration rpc_timeout) {
  std::unique_ptr<RdmaConnection> c(new RdmaConnection(
      std::move(ctx), control, control::SessionScope{layout.epoch, layout.session_id}));
  if (absl::Status s = c->Exchange(layout, client_name, rpc_timeout); !s.ok()) {
    // The server may already hold the connection (a failure after
    // ConnectQp): let it go now rather than at its idle timeout.
    c->Disconnect();
    return s;
  }
  return c;
}

// One CQ for sends and receives: one poller reaps everything. The RoCE v2
// GID is preferred (routable); index 0 otherwise (InfiniBand, or none found).
absl::Status RdmaConnection::CreateQueuePair(rdma::QpCaps* caps) {
  // Room for every slot's work requests (a GET posts two bucket READs and
  // the fence READ, then an entry READ) plus the acks' receives.
  KV_ASSIGN_OR_RETURN(auto cq,
                      rdma::CompletionQueue::Create(ctx_->device, 4 * kSlots + 512, nullptr));
  cq_.emplace(std::move(cq));
  int gid_index = 0;
  auto found = rdma::FindRoceV2GidIndex(ctx_->device, ctx_->device.port(), "");
  if (found.ok()) gid_index = *found;
  // kSendWorkRequestsPerSlot per slot, and room to spare.
  caps->max_send_wr = kSendWorkRequestsPerSlot * kSlots + 64;
  caps->max_recv_wr = 256;
  caps->max_send_sge = 3;  // zero-copy GET: header+key, the caller's buffer, padding
  caps->max_recv_sge = 1;
  caps->max_inline = 64;
  KV_ASSIGN_OR_RETURN(
      auto qp, rdma::QueuePair::CreateRc(ctx_->device, ctx_->pd, *cq_, *cq_, *caps, gid_index));
  qp_.emplace(std::move(qp));
  return absl::OkStatus();
}

// The server learns our QP and probe word; we learn its QP, the connection
// id (which scopes our leases) and how many commits it can buffer.
absl::Status RdmaConnection::Exchange(const ServerLayout& layout, const std::string& client_name,
                                      absl::Duration rpc_timeout) {
  rdma::QpCaps caps;
  KV_RETURN_IF_ERROR(CreateQueuePair(&caps));
  // ConnectQp: exchange endpoints over the control plane.
  const rdma::QpEndpoint local = qp_->local();
  v1::ConnectQpRequest req;
  req.set_client_name(client_name);
  req.mutable_client()->set_qpn(local.qpn);
  req.mutable_client()->set_psn(local.psn);
  req.mutable_client()->set_gid(std::string(reinterpret_cast<const char*>(local.gid.data()), 16));
  req.mutable_client()->set_lid(local.lid);
  // The probe word is the only client memory remotely writable, and only
  // by this connection.
  probe_word_ = std::make_unique<uint64_t[]>(8);
  KV_ASSIGN_OR_RETURN(auto probe_mr, rdma::MemoryRegion::Register(
                                         ctx_->pd, probe_word_.get(), 64,
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  probe_mr_.emplace(std::move(probe_mr));
  req.set_probe_addr(reinterpret_cast<uint64_t>(probe_word_.get()));
  req.set_probe_rkey(probe_mr_->rkey());
  KV_ASSIGN_OR_RETURN(v1::ConnectQpResponse resp,
                      control_->ConnectQp(scope_, std::move(req), absl::Now() + rpc_timeout));
  connection_id_ = resp.connection_id();
  credits_ = std::max<uint32_t>(1, resp.commit_credits());
  max_commit_bytes_ = resp.max_commit_bytes();
  replica_batch_commits_ = resp.replica_batch_commits();
  if (resp.max_commit_bytes() < wire::CommitBytes(layout.limits.max_key_bytes)) {
    return absl::FailedPreconditionError("server commit buffers are smaller than the key limit");
  }
  rdma::QpEndpoint remote;
  remote.qpn = resp.server().qpn();
  remote.psn = resp.server().psn();
  std::memcpy(remote.gid.data(), resp.server().gid().data(),
              std::min<size_t>(16, resp.server().gid().size()));
  remote.lid = static_cast<uint16_t>(resp.server().lid());
  KV_RETURN_IF_ERROR(qp_->Connect(remote, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  return PostAckReceives(caps.max_recv_wr);
}

// The ack buffers live in one registered block, kAckBytes apart; a receive's
// wr_id names its buffer.
absl::Status RdmaConnection::PostAckReceives(uint32_t max_recv_wr) {
  // One receive per commit credit (a QP takes receives from INIT on;
  // nothing is sent before this), capped by the receive queue.
  const size_t acks = std::min<uint32_t>(credits_, max_recv_wr);
  KV_ASSIGN_OR_RETURN(ack_arena_, NewBlock(ctx_, acks * wire::kAckBytes));
  for (size_t i = 0; i < acks; ++i) {
    rdma::Sge sge{reinterpret_cast<uint64_t>(ack_arena_->mem.get() + i * wire::kAckBytes),
                  static_cast<uint32_t>(wire::kAckBytes), ack_arena_->mr->lkey()};
    KV_RETURN_IF_ERROR(qp_->PostRecv(sge, kRecvTag | i));
  }
  credits_ = static_cast<uint32_t>(acks);
  return absl::OkStatus();
}

// byte_len comes from the completion; clipped in case the NIC reports more
// than the buffer (it would have failed the receive instead, but be safe).
absl::string_view RdmaConnection::ack(size_t i, uint32_t byte_len) const {
  return absl::string_view(ack_arena_->mem.get() + i * wire::kAckBytes,
                           std::min<uint32_t>(byte_len, wire::kAckBytes));
}

// Same buffer, same wr_id: the receive queue always holds one per credit.
absl::Status RdmaConnection::RepostAck(size_t i) {
  rdma::Sge sge{reinterpret_cast<uint64_t>(ack_arena_->mem.get() + i * wire::kAckBytes),
                static_cast<uint32_t>(wire::kAckBytes), ack_arena_->mr->lkey()};
  return qp_->PostRecv(sge, kRecvTag | i);
}

// The status is ignored: the server closes idle connections itself.
void RdmaConnection::Disconnect() {
  if (connection_id_ == 0) return;  // ConnectQp never succeeded
  (void)control_->DisconnectQp(scope_, connection_id_, absl::Now() + absl::Seconds(2));
}

}  // namespace initiator
}  // namespace kvstore
