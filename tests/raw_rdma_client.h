// Copyright 2026 The kvstore Authors.
//
// RawRdmaClient: a deliberately low-level RDMA client for fault tests. It
// speaks the control plane and the commit protocol by hand so a test can do
// what the real client never does: WRITE without committing, commit on a
// lease it does not own or that expired, WRITE with a stale or foreign key,
// WRITE at the index. Test-only.

#ifndef KVSTORE_TESTS_RAW_RDMA_CLIENT_H_
#define KVSTORE_TESTS_RAW_RDMA_CLIENT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/rdma/completion_queue.h"
#include "common/rdma/device.h"
#include "common/rdma/queue_pair.h"
#include "proto/kv_control.grpc.pb.h"

namespace kvstore {
namespace testing {

class RawRdmaClient {
 public:
  // Handshake + ConnectQp on `control_address` with the device named by
  // KV_RDMA_DEVICE (or the first active one). `token` (empty: none) is sent
  // as the bearer token of every call: a server's principals decide what
  // the queue pair may commit (the cluster secret makes it a peer's).
  static absl::StatusOr<std::unique_ptr<RawRdmaClient>> Connect(const std::string& control_address,
                                                                const std::string& token = "");

  const v1::HandshakeResponse& handshake() const { return hs_; }
  uint64_t connection_id() const { return connection_id_; }
  // Commits the server lets this queue pair have without an ack
  // (ConnectQpResponse.commit_credits).
  uint32_t commit_credits() const { return commit_credits_; }
  // The session the handshake opened; every QP and lease RPC names it.
  uint64_t session_id() const { return hs_.session_id(); }
  v1::KvControl::Stub* stub() { return stub_.get(); }

  // GrantLease for this connection (a write key bound to our queue pair).
  absl::StatusOr<v1::Lease> Grant(uint64_t bytes);
  absl::Status Release(uint64_t lease_id);
  // As this client's session, naming any connection: what another session
  // may try with someone else's connection id.
  absl::Status ReleaseAs(uint64_t lease_id, uint64_t connection_id);
  absl::Status RenewAs(uint64_t lease_id, uint64_t connection_id);
  absl::Status DisconnectQp(uint64_t connection_id);

  // RDMA WRITE of `bytes` to remote `addr` with `rkey`; waits for the
  // completion. kPermissionDenied for a remote access error (the queue pair
  // is then dead: Reconnect()).
  absl::Status Write(uint64_t addr, uint32_t rkey, absl::string_view bytes);
  // RDMA READ of `length` bytes.
  absl::StatusOr<std::string> Read(uint64_t addr, uint32_t rkey, size_t length);
  // Sends a PUT commit for [arena_offset, +size) in `lease_id`, returns the ack.
  absl::Status Commit(uint64_t lease_id, uint64_t arena_offset, uint64_t size);

  // Sends `message` as one SEND and waits for its send completion only:
  // receives are never reposted, so after the first the server's acks find
  // none (a client that stopped taking acks).
  absl::Status SendOnly(absl::string_view message);

  // A fresh queue pair after an error (ConnectQp again).
  absl::Status Reconnect();

  // The index region and the data region of the handshake.
  const v1::RegionDescriptor& index_region() const;
  const v1::RegionDescriptor& data_region() const;

 private:
  RawRdmaClient() = default;
  absl::Status ConnectQp();
  absl::Status WaitOne(uint64_t wr_id, ibv_wc* out);

  std::unique_ptr<v1::KvControl::Stub> stub_;
  v1::HandshakeResponse hs_;
  uint64_t connection_id_ = 0;
  uint32_t commit_credits_ = 0;
  std::optional<rdma::Device> device_;
  std::optional<rdma::ProtectionDomain> pd_;
  std::optional<rdma::CompletionQueue> cq_;
  std::string buf_;  // 32 MiB staging, registered
  std::optional<rdma::MemoryRegion> mr_;
  alignas(64) char probe_word_[64] = {};
  std::optional<rdma::MemoryRegion> probe_mr_;
  std::optional<rdma::QueuePair> qp_;
  uint64_t next_wr_ = 1;
  // Adds the bearer token, when there is one, to a call.
  void Authorize(grpc::ClientContext* ctx) const;
  std::string bearer_;
};

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_RAW_RDMA_CLIENT_H_
