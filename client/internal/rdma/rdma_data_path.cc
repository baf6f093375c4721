// Copyright 2026 The kvstore Authors.
//
// The facade: builds the parts in dependency order and forwards each
// DataPath call to the part that does that job. No verbs work happens here
// except Register(), which only touches the shared context.

#include "client/internal/rdma/rdma_data_path.h"

#include <infiniband/verbs.h>

#include "client/internal/buffer_access.h"
#include "client/internal/rdma/reader.h"
#include "client/internal/rdma/writer.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

namespace {

// The client's names for the series the shared parts count into.
initiator::PathCounters ClientCounters(metrics::Registry* r) {
  initiator::PathCounters c;
  c.leases.granted = r->AddCounter("kvstore_client_leases_granted_total",
                                   "RDMA write leases granted to this client (gRPC).");
  c.leases.released = r->AddCounter("kvstore_client_leases_released_total",
                                    "Write leases this client gave back and the server confirmed.");
  c.leases.renewed = r->AddCounter("kvstore_client_leases_renewed_total",
                                   "Write lease renewals the server accepted.");
  c.lease_aborts =
      r->AddCounter("kvstore_client_lease_aborts_total",
                    "RDMA commits refused because their write lease had expired (each is redone).");
  return c;
}

}  // namespace

RdmaDataPath::RdmaDataPath(std::unique_ptr<initiator::PathCore> core) : core_(std::move(core)) {}

// Registering returns the client's existing counters when an earlier path
// already did, so a reconnect keeps counting on the same series.
absl::StatusOr<std::unique_ptr<RdmaDataPath>> RdmaDataPath::Connect(
    std::shared_ptr<initiator::RdmaContext> context, control::ControlClient* control,
    const v1::HandshakeResponse& handshake, const std::string& client_name, uint64_t lease_bytes,
    absl::Duration rpc_timeout, metrics::Registry* registry, const ReadOptions& read) {
  KV_ASSIGN_OR_RETURN(
      std::unique_ptr<initiator::PathCore> core,
      initiator::PathCore::Connect(std::move(context), control, handshake, client_name, lease_bytes,
                                   rpc_timeout, ClientCounters(registry)));
  std::unique_ptr<RdmaDataPath> p(new RdmaDataPath(std::move(core)));
  initiator::PathCore& c = *p->core_;
  p->reader_ =
      std::make_unique<RdmaReader>(&c.layout(), c.engine(), c.pool(), control, registry, read);
  p->writer_ = std::make_unique<RdmaWriter>(&c.layout(), c.engine(), c.leases(), c.entries());
  p->control_ = control;
  return p;
}

// The core releases the leases and disconnects (on a healthy path) when it
// goes, after the reader and the writer.
RdmaDataPath::~RdmaDataPath() = default;

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

absl::Status RdmaDataPath::PutWithTtl(absl::string_view key, absl::string_view value,
                                      absl::Duration ttl, absl::Time deadline) {
  absl::Status s = control_->PutWithTtl(key, value, ttl, deadline);
  reader_->Forget(key);
  return s;
}

absl::StatusOr<bool> RdmaDataPath::Expire(absl::string_view key, absl::Duration ttl,
                                          absl::Time deadline) {
  absl::StatusOr<bool> s = control_->Expire(key, ttl, deadline);
  reader_->Forget(key);  // the entry was rewritten elsewhere
  return s;
}

absl::StatusOr<absl::Duration> RdmaDataPath::Ttl(absl::string_view key, absl::Time deadline) {
  return control_->Ttl(key, deadline);
}

absl::Status RdmaDataPath::Delete(absl::string_view key, absl::Time deadline) {
  absl::Status s = writer_->Delete(key, deadline);
  reader_->Forget(key);
  return s;
}

absl::StatusOr<bool> RdmaDataPath::Exists(absl::string_view key, absl::Time deadline) {
  return reader_->Exists(key, deadline);
}

absl::StatusOr<std::vector<absl::StatusOr<std::string>>> RdmaDataPath::MultiGet(
    absl::Span<const std::string> keys, absl::Time deadline) {
  return reader_->MultiGet(keys, deadline);
}

absl::StatusOr<std::vector<absl::Status>> RdmaDataPath::MultiPut(
    absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time deadline) {
  absl::StatusOr<std::vector<absl::Status>> s = writer_->MultiPut(pairs, deadline);
  for (const auto& kv : pairs) reader_->Forget(kv.first);
  return s;
}

// Local write access only: the NIC writes GET values into the buffer and
// reads PUT values from it; the server never accesses it remotely.
absl::StatusOr<RegisteredBuffer> RdmaDataPath::Register(void* data, size_t size) {
  if (data == nullptr || size == 0) return absl::InvalidArgumentError("empty buffer");
  KV_ASSIGN_OR_RETURN(auto mr, rdma::MemoryRegion::Register(core_->context()->pd, data, size,
                                                            IBV_ACCESS_LOCAL_WRITE));
  // The registration holds the context: the PD must outlive the MR, and a
  // buffer may outlive this path (it survives reconnects).
  struct Registration {
    std::shared_ptr<initiator::RdmaContext> ctx;
    rdma::MemoryRegion mr;
  };
  const uint32_t lkey = mr.lkey();
  auto reg = std::make_shared<Registration>(Registration{core_->context(), std::move(mr)});
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
bool RdmaDataPath::broken() const { return core_->broken(); }

}  // namespace client
}  // namespace kvstore
