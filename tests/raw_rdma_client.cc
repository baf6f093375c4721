// Copyright 2026 The kvstore Authors.

#include "tests/raw_rdma_client.h"

#include <infiniband/verbs.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/auth/token.h"
#include "common/grpc_status.h"
#include "common/protocol/commit_wire.h"
#include "common/rdma/gid.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace kvstore {
namespace testing {

void RawRdmaClient::Authorize(grpc::ClientContext* ctx) const {
  if (!bearer_.empty()) ctx->AddMetadata("authorization", bearer_);
}

absl::StatusOr<std::unique_ptr<RawRdmaClient>> RawRdmaClient::Connect(
    const std::string& control_address, const std::string& token) {
  std::unique_ptr<RawRdmaClient> c(new RawRdmaClient());
  if (!token.empty()) c->bearer_ = auth::BearerHeader(token);
  c->stub_ = v1::KvControl::NewStub(
      grpc::CreateChannel(control_address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  c->Authorize(&ctx);
  KV_RETURN_IF_ERROR(FromGrpcStatus(c->stub_->Handshake(&ctx, v1::HandshakeRequest(), &c->hs_)));
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  KV_ASSIGN_OR_RETURN(auto device, rdma::Device::Open(dev ? dev : ""));
  c->device_.emplace(std::move(device));
  KV_ASSIGN_OR_RETURN(auto pd, rdma::ProtectionDomain::Create(*c->device_));
  c->pd_.emplace(std::move(pd));
  c->buf_.assign(32 << 20, '\0');
  KV_ASSIGN_OR_RETURN(auto mr, rdma::MemoryRegion::Register(*c->pd_, c->buf_.data(), c->buf_.size(),
                                                            IBV_ACCESS_LOCAL_WRITE));
  c->mr_.emplace(std::move(mr));
  KV_RETURN_IF_ERROR(c->ConnectQp());
  return c;
}

absl::Status RawRdmaClient::ConnectQp() {
  qp_.reset();
  cq_.reset();
  KV_ASSIGN_OR_RETURN(auto cq, rdma::CompletionQueue::Create(*device_, 1024, nullptr));
  cq_.emplace(std::move(cq));
  int gid_index = 0;
  if (auto g = rdma::FindRoceV2GidIndex(*device_, device_->port(), ""); g.ok()) gid_index = *g;
  rdma::QpCaps caps;
  caps.max_send_sge = 1;
  KV_ASSIGN_OR_RETURN(auto qp,
                      rdma::QueuePair::CreateRc(*device_, *pd_, *cq_, *cq_, caps, gid_index));
  qp_.emplace(std::move(qp));
  rdma::QpEndpoint local = qp_->local();
  v1::ConnectQpRequest req;
  req.set_epoch(hs_.epoch());
  req.set_session_id(hs_.session_id());
  req.set_client_name("raw-rdma-test-client");
  req.mutable_client()->set_qpn(local.qpn);
  req.mutable_client()->set_psn(local.psn);
  req.mutable_client()->set_gid(std::string(reinterpret_cast<const char*>(local.gid.data()), 16));
  // Like the real client: 8 bytes the server may WRITE to probe us.
  if (!probe_mr_) {
    KV_ASSIGN_OR_RETURN(
        auto probe, rdma::MemoryRegion::Register(*pd_, probe_word_, sizeof(probe_word_),
                                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    probe_mr_.emplace(std::move(probe));
  }
  req.set_probe_addr(reinterpret_cast<uint64_t>(probe_word_));
  req.set_probe_rkey(probe_mr_->rkey());
  v1::ConnectQpResponse resp;
  grpc::ClientContext ctx;
  Authorize(&ctx);
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->ConnectQp(&ctx, req, &resp)));
  connection_id_ = resp.connection_id();
  commit_credits_ = resp.commit_credits();
  rdma::QpEndpoint remote;
  remote.qpn = resp.server().qpn();
  remote.psn = resp.server().psn();
  std::memcpy(remote.gid.data(), resp.server().gid().data(), 16);
  KV_RETURN_IF_ERROR(qp_->Connect(remote, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  // One receive for the next ack, at the end of the staging buffer.
  rdma::Sge sge{reinterpret_cast<uint64_t>(buf_.data() + buf_.size() - wire::kAckBytes),
                static_cast<uint32_t>(wire::kAckBytes), mr_->lkey()};
  return qp_->PostRecv(sge, 0);
}

absl::Status RawRdmaClient::Reconnect() { return ConnectQp(); }

absl::Status RawRdmaClient::WaitOne(uint64_t wr_id, ibv_wc* out) {
  for (;;) {
    KV_ASSIGN_OR_RETURN(ibv_wc wc, cq_->PollOne(absl::Seconds(20)));
    if (wc.wr_id == wr_id || wc.status != IBV_WC_SUCCESS) {
      *out = wc;
      return rdma::WcStatusToStatus(wc);
    }
  }
}

absl::StatusOr<v1::Lease> RawRdmaClient::Grant(uint64_t bytes) {
  v1::GrantLeaseRequest req;
  req.set_epoch(hs_.epoch());
  req.set_bytes(bytes);
  req.set_client_name("raw-rdma-test-client");
  req.set_connection_id(connection_id_);
  req.set_session_id(hs_.session_id());
  v1::GrantLeaseResponse resp;
  grpc::ClientContext ctx;
  Authorize(&ctx);
  KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->GrantLease(&ctx, req, &resp)));
  return resp.lease();
}

absl::Status RawRdmaClient::Release(uint64_t lease_id) {
  return ReleaseAs(lease_id, connection_id_);
}

absl::Status RawRdmaClient::ReleaseAs(uint64_t lease_id, uint64_t connection_id) {
  v1::ReleaseLeaseRequest req;
  req.set_epoch(hs_.epoch());
  req.set_lease_id(lease_id);
  req.set_connection_id(connection_id);
  req.set_session_id(hs_.session_id());
  v1::ReleaseLeaseResponse resp;
  grpc::ClientContext ctx;
  Authorize(&ctx);
  return FromGrpcStatus(stub_->ReleaseLease(&ctx, req, &resp));
}

absl::Status RawRdmaClient::RenewAs(uint64_t lease_id, uint64_t connection_id) {
  v1::RenewLeaseRequest req;
  req.set_epoch(hs_.epoch());
  req.set_lease_id(lease_id);
  req.set_connection_id(connection_id);
  req.set_session_id(hs_.session_id());
  v1::RenewLeaseResponse resp;
  grpc::ClientContext ctx;
  Authorize(&ctx);
  return FromGrpcStatus(stub_->RenewLease(&ctx, req, &resp));
}

absl::Status RawRdmaClient::DisconnectQp(uint64_t connection_id) {
  v1::DisconnectQpRequest req;
  req.set_epoch(hs_.epoch());
  req.set_connection_id(connection_id);
  req.set_session_id(hs_.session_id());
  v1::DisconnectQpResponse resp;
  grpc::ClientContext ctx;
  Authorize(&ctx);
  return FromGrpcStatus(stub_->DisconnectQp(&ctx, req, &resp));
}

absl::Status RawRdmaClient::Write(uint64_t addr, uint32_t rkey, absl::string_view bytes) {
  if (bytes.size() > buf_.size() - wire::kAckBytes) return absl::InvalidArgumentError("too big");
  std::memcpy(buf_.data(), bytes.data(), bytes.size());
  rdma::Sge sge{reinterpret_cast<uint64_t>(buf_.data()), static_cast<uint32_t>(bytes.size()),
                mr_->lkey()};
  const uint64_t wr = next_wr_++;
  KV_RETURN_IF_ERROR(qp_->PostWrite(absl::MakeConstSpan(&sge, 1), addr, rkey, wr, true));
  ibv_wc wc;
  return WaitOne(wr, &wc);
}

absl::StatusOr<std::string> RawRdmaClient::Read(uint64_t addr, uint32_t rkey, size_t length) {
  rdma::Sge sge{reinterpret_cast<uint64_t>(buf_.data()), static_cast<uint32_t>(length),
                mr_->lkey()};
  const uint64_t wr = next_wr_++;
  KV_RETURN_IF_ERROR(qp_->PostRead(absl::MakeConstSpan(&sge, 1), addr, rkey, wr, true));
  ibv_wc wc;
  KV_RETURN_IF_ERROR(WaitOne(wr, &wc));
  return buf_.substr(0, length);
}

absl::Status RawRdmaClient::Commit(uint64_t lease_id, uint64_t arena_offset, uint64_t size) {
  wire::PutCommit commit;
  commit.request_id = next_wr_++;
  commit.lease_id = lease_id;
  commit.offset = arena_offset;
  commit.size = size;
  char* msg = buf_.data() + buf_.size() - 2 * wire::kAckBytes;
  const size_t len = wire::EncodePutCommit(commit, msg);
  rdma::Sge sge{reinterpret_cast<uint64_t>(msg), static_cast<uint32_t>(len), mr_->lkey()};
  const uint64_t wr = next_wr_++;
  KV_RETURN_IF_ERROR(qp_->PostSend(absl::MakeConstSpan(&sge, 1), wr, true));
  // Two completions: our SEND and the ack's receive (wr_id 0).
  bool got_ack = false;
  absl::Status ack_status;
  for (int i = 0; i < 2; ++i) {
    KV_ASSIGN_OR_RETURN(ibv_wc wc, cq_->PollOne(absl::Seconds(20)));
    KV_RETURN_IF_ERROR(rdma::WcStatusToStatus(wc));
    if (wc.wr_id == 0) {
      char* ack = buf_.data() + buf_.size() - wire::kAckBytes;
      KV_ASSIGN_OR_RETURN(wire::ParsedAck parsed,
                          wire::ParseAck(absl::string_view(ack, wc.byte_len)));
      ack_status = parsed.status;
      got_ack = true;
      rdma::Sge rsge{reinterpret_cast<uint64_t>(ack), static_cast<uint32_t>(wire::kAckBytes),
                     mr_->lkey()};
      KV_RETURN_IF_ERROR(qp_->PostRecv(rsge, 0));
    }
  }
  if (!got_ack) return absl::InternalError("no ack");
  return ack_status;
}

absl::Status RawRdmaClient::SendOnly(absl::string_view message) {
  char* msg = buf_.data() + buf_.size() - 2 * wire::kAckBytes;
  if (message.size() > wire::kAckBytes) return absl::InvalidArgumentError("too big");
  std::memcpy(msg, message.data(), message.size());
  rdma::Sge sge{reinterpret_cast<uint64_t>(msg), static_cast<uint32_t>(message.size()),
                mr_->lkey()};
  const uint64_t wr = next_wr_++;
  KV_RETURN_IF_ERROR(qp_->PostSend(absl::MakeConstSpan(&sge, 1), wr, true));
  ibv_wc wc;
  return WaitOne(wr, &wc);  // an ack's receive completion is skipped
}

const v1::RegionDescriptor& RawRdmaClient::index_region() const {
  for (const auto& r : hs_.regions()) {
    if (r.kind() == v1::REGION_KIND_INDEX) return r;
  }
  return hs_.regions(0);
}

const v1::RegionDescriptor& RawRdmaClient::data_region() const {
  for (const auto& r : hs_.regions()) {
    if (r.kind() == v1::REGION_KIND_DATA) return r;
  }
  return hs_.regions(0);
}

}  // namespace testing
}  // namespace kvstore
