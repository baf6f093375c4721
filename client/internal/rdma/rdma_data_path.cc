// Copyright 2026 The kvstore Authors.
//
// The facade: builds the parts in dependency order and forwards each
// DataPath call to the part that does that job. No verbs work happens here
// except Register(), which only touches the shared context.

#include "client/internal/rdma/rdma_data_path.h"

#include <infiniband/verbs.h>

#include "client/internal/buffer_access.h"
#include "client/internal/rdma/connection.h"
#include "client/internal/rdma/lease_manager.h"
#include "client/internal/rdma/op_engine.h"
#include "client/internal/rdma/reader.h"
#include "client/internal/rdma/writer.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

RdmaDataPath::RdmaDataPath(std::shared_ptr<RdmaContext> ctx, ServerLayout layout)
    : ctx_(std::move(ctx)), layout_(std::move(layout)) {}

// Order: layout (pure validation) -> pool and slot scratch (local memory) ->
// connection (the first thing the server sees) -> the parts that use them ->
// the lease thread last, once everything it calls exists.
absl::StatusOr<std::unique_ptr<RdmaDataPath>> RdmaDataPath::Connect(
    std::shared_ptr<RdmaContext> context, ControlClient* control,
    const v1::HandshakeResponse& handshake, const std::string& client_name, uint64_t lease_bytes,
    absl::Duration rpc_timeout, metrics::Registry* registry, const ReadOptions& read) {
  // Validate what the server publishes before allocating anything.
  KV_ASSIGN_OR_RETURN(ServerLayout layout, ServerLayout::FromHandshake(handshake));
  std::unique_ptr<RdmaDataPath> p(new RdmaDataPath(std::move(context), std::move(layout)));
  p->pool_ = std::make_unique<BufferPool>(p->ctx_);
  KV_ASSIGN_OR_RETURN(p->engine_, OpEngine::Create(p->ctx_, p->layout_.limits.max_key_bytes));
  KV_ASSIGN_OR_RETURN(p->conn_,
                      RdmaConnection::Open(p->ctx_, control, p->layout_, client_name, rpc_timeout));
  p->engine_->Attach(p->conn_.get());
  p->leases_ = std::make_unique<LeaseManager>(
      control, p->engine_.get(), registry, SessionScope{p->layout_.epoch, p->layout_.session_id},
      p->conn_->connection_id(), client_name, lease_bytes, p->layout_.lease_ttl, rpc_timeout);
  p->reader_ = std::make_unique<RdmaReader>(&p->layout_, p->engine_.get(), p->pool_.get(), control,
                                            registry, read);
  p->writer_ = std::make_unique<RdmaWriter>(&p->layout_, p->engine_.get(), p->pool_.get(),
                                            p->leases_.get(), registry);
  p->leases_->Start();
  return p;
}

RdmaDataPath::~RdmaDataPath() {
  // Only a fully built path gets here with all parts; Connect() fails
  // before it has a lease manager, and the connection cleans up itself.
  const bool healthy = engine_ != nullptr && !engine_->broken();
  if (leases_ != nullptr) leases_->Shutdown(/*release=*/healthy);
  if (conn_ != nullptr && healthy) conn_->Disconnect();
}

// --- Data operations: straight to the reader or the writer -------------------

absl::StatusOr<std::string> RdmaDataPath::Get(absl::string_view key, absl::Time deadline) {
  return reader_->Get(key, deadline);
}

absl::Status RdmaDataPath::Put(absl::string_view key, absl::string_view value,
                               absl::Time deadline) {
  absl::Status s = writer_->Put(key, value, deadline);
  // After the write, whatever its outcome: a GET racing it may have cached
  // the old location meanwhile (harmless, the server marked it retired, but
  // it would cost a stale hit).
  reader_->Forget(key);
  return s;
}

absl::Status RdmaDataPath::Delete(absl::string_view key, absl::Time deadline) {
  absl::Status s = writer_->Delete(key, deadline);
  reader_->Forget(key);
  return s;
}

void RdmaDataPath::set_wait_policy(const WaitPolicy& policy) { engine_->set_wait_policy(policy); }

absl::Status RdmaDataPath::ReplicatePut(absl::string_view entry, const wire::ReplicaCommit& tag,
                                        absl::Time deadline) {
  return writer_->ReplicatePut(entry, tag, deadline);
}

absl::Status RdmaDataPath::ReplicateDelete(absl::string_view key, const wire::ReplicaCommit& tag,
                                           absl::Time deadline) {
  return writer_->ReplicateDelete(key, tag, deadline);
}

absl::StatusOr<bool> RdmaDataPath::Exists(absl::string_view key, absl::Time deadline) {
  return reader_->Exists(key, deadline);
}

absl::StatusOr<std::vector<absl::StatusOr<std::string>>> RdmaDataPath::MultiGet(
    absl::Span<const std::string> keys, absl::Time deadline) {
  return reader_->MultiGet(keys, deadline);
}

absl::Status RdmaDataPath::MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs,
                                    absl::Time deadline) {
  absl::Status s = writer_->MultiPut(pairs, deadline);
  for (const auto& kv : pairs) reader_->Forget(kv.first);
  return s;
}

// Local write access only: the NIC writes GET values into the buffer and
// reads PUT values from it; the server never accesses it remotely.
absl::StatusOr<RegisteredBuffer> RdmaDataPath::Register(void* data, size_t size) {
  if (data == nullptr || size == 0) return absl::InvalidArgumentError("empty buffer");
  KV_ASSIGN_OR_RETURN(auto mr,
                      rdma::MemoryRegion::Register(ctx_->pd, data, size, IBV_ACCESS_LOCAL_WRITE));
  // The registration holds the context: the PD must outlive the MR, and a
  // buffer may outlive this path (it survives reconnects).
  struct Registration {
    std::shared_ptr<RdmaContext> ctx;
    rdma::MemoryRegion mr;
  };
  const uint32_t lkey = mr.lkey();
  auto reg = std::make_shared<Registration>(Registration{ctx_, std::move(mr)});
  return KvClientInternal::MakeBuffer(static_cast<char*>(data), size, reg, lkey);
}

// lkey 0: memory no RDMA device knows (registered while the client used
// TCP); the NIC cannot use it, so the value is copied as over TCP.
absl::StatusOr<size_t> RdmaDataPath::GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                             size_t offset, size_t capacity, absl::Time deadline) {
  if (KvClientInternal::lkey(buffer) == 0) {
    return DataPath::GetInto(key, buffer, offset, capacity, deadline);
  }
  return reader_->GetInto(key, buffer, offset, capacity, deadline);
}

// As GetInto(): zero copy only for memory this device knows.
absl::Status RdmaDataPath::PutFrom(absl::string_view key, const RegisteredBuffer& buffer,
                                   size_t offset, size_t length, absl::Time deadline) {
  if (KvClientInternal::lkey(buffer) == 0) {
    return DataPath::PutFrom(key, buffer, offset, length, deadline);
  }
  absl::Status s = writer_->PutFrom(key, buffer, offset, length, deadline);
  reader_->Forget(key);
  return s;
}

// The reader is the one part that checks fence words.
void RdmaDataPath::SetMapEpoch(uint64_t epoch) { reader_->SetMapEpoch(epoch); }

// The engine sees every completion, so it is the one to know.
bool RdmaDataPath::broken() const { return engine_->broken(); }

}  // namespace client
}  // namespace kvstore
