// Copyright 2026 The kvstore Authors.

#include "common/rdma/initiator/path_core.h"

#include <utility>

#include "common/rdma/initiator/connection.h"
#include "common/status_macros.h"

namespace kvstore {
namespace initiator {

PathCore::PathCore(std::shared_ptr<RdmaContext> ctx, ServerLayout layout)
    : ctx_(std::move(ctx)), layout_(std::move(layout)) {}

// Order: layout (pure validation) -> pool and slot scratch (local memory) ->
// connection (the first thing the server sees) -> the parts that use them ->
// the lease thread last, once everything it calls exists.
absl::StatusOr<std::unique_ptr<PathCore>> PathCore::Connect(
    std::shared_ptr<RdmaContext> context, control::ControlClient* control,
    const v1::HandshakeResponse& handshake, const std::string& name, uint64_t lease_bytes,
    absl::Duration rpc_timeout, const PathCounters& counters) {
  // Validate what the server publishes before allocating anything.
  KV_ASSIGN_OR_RETURN(ServerLayout layout, ServerLayout::FromHandshake(handshake));
  std::unique_ptr<PathCore> p(new PathCore(std::move(context), std::move(layout)));
  p->pool_ = std::make_unique<BufferPool>(p->ctx_);
  KV_ASSIGN_OR_RETURN(p->engine_, OpEngine::Create(p->ctx_, p->layout_.limits.max_key_bytes));
  KV_ASSIGN_OR_RETURN(p->conn_,
                      RdmaConnection::Open(p->ctx_, control, p->layout_, name, rpc_timeout));
  p->engine_->Attach(p->conn_.get());
  p->leases_ = std::make_unique<LeaseManager>(
      control, p->engine_.get(), counters.leases,
      control::SessionScope{p->layout_.epoch, p->layout_.session_id}, p->conn_->connection_id(),
      name, lease_bytes, p->layout_.lease_ttl, rpc_timeout);
  p->entries_ = std::make_unique<EntryWriter>(p->engine_.get(), p->pool_.get(), p->leases_.get(),
                                              counters.lease_aborts);
  p->leases_->Start();
  return p;
}

PathCore::~PathCore() {
  // Only a fully built core gets here with all parts; Connect() fails
  // before it has a lease manager, and the connection cleans up itself.
  const bool healthy = engine_ != nullptr && !engine_->broken();
  if (leases_ != nullptr) leases_->Shutdown(/*release=*/healthy);
  if (conn_ != nullptr && healthy) conn_->Disconnect();
}

}  // namespace initiator
}  // namespace kvstore
