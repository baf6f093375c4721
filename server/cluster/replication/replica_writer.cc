// Copyright 2026 The kvstore Authors.
//
// The checks here are the primary's: a write the backup would refuse for
// its shape is refused before anything is sent. Each commit's life (lease
// space, slot, staging, credit, WRITE + SEND, ack) is the initiator's
// EntryWriter, exactly as for a client's PUT.

#include "server/cluster/replication/replica_writer.h"

#include <utility>

#include "common/protocol/layout.h"
#include "common/status_macros.h"

namespace kvstore {
namespace server {
namespace {

absl::Status CheckTag(const wire::ReplicaCommit& tag) {
  if (tag.primary_node_id.empty() || tag.primary_node_id.size() > wire::kMaxReplicaNodeIdBytes) {
    return absl::InvalidArgumentError("replica commit node id length out of range");
  }
  return absl::OkStatus();
}

}  // namespace

// The writing thread is a server thread (the RESP loop, the RDMA poller, a
// gRPC handler): a short spin catches a fast NIC's ack, then it sleeps
// rather than yield, so waiting does not take cores from the server's other
// threads (on a 2-core host, or under emulation, yielding threads starved
// the very backups they waited for).
absl::StatusOr<std::unique_ptr<ReplicaWriter>> ReplicaWriter::Connect(
    std::shared_ptr<initiator::RdmaContext> context, control::ControlClient* control,
    const v1::HandshakeResponse& handshake, const std::string& name, uint64_t lease_bytes,
    absl::Duration rpc_timeout, const initiator::PathCounters& counters) {
  KV_ASSIGN_OR_RETURN(std::unique_ptr<initiator::PathCore> core,
                      initiator::PathCore::Connect(std::move(context), control, handshake, name,
                                                   lease_bytes, rpc_timeout, counters));
  initiator::WaitPolicy wait;
  wait.busy_poll = absl::Microseconds(50);
  wait.yield_until = absl::ZeroDuration();
  wait.first_sleep = absl::Microseconds(10);
  wait.max_sleep = absl::Microseconds(200);
  core->engine()->set_wait_policy(wait);
  return std::unique_ptr<ReplicaWriter>(new ReplicaWriter(std::move(core)));
}

absl::Status ReplicaWriter::Put(absl::string_view entry, const wire::ReplicaCommit& tag,
                                absl::Time deadline) {
  KV_RETURN_IF_ERROR(CheckTag(tag));
  const Limits& limits = core_->layout().limits;
  KV_ASSIGN_OR_RETURN(layout::EntryView view, layout::ParseEntryHeader(entry));
  KV_RETURN_IF_ERROR(limits.CheckKey(view.key));
  KV_RETURN_IF_ERROR(limits.CheckValueLength(view.value.size()));
  if (layout::EntryBytes(view.key.size(), view.value.size()) != entry.size()) {
    return absl::InvalidArgumentError("replicated entry lengths do not match its size");
  }
  initiator::EntryWriter* entries = core_->entries();
  return entries->Put(
      entry.size(),
      [&](initiator::OpSlot* s, const initiator::LeaseSpace& space, initiator::StagedPut* out) {
        return entries->StageBuilt(
            s, entry, space,
            [&](const wire::PutCommit& commit, char* buf) {
              return wire::EncodeReplicaPutCommit(commit, tag, buf);
            },
            out);
      },
      deadline);
}

// Whether a failed commit left this node is not asked: the replicator
// judges the link by the status alone (RdmaReplicaLink::failed) and sends
// the write again by gRPC when the link failed, which is safe either way
// (a backup applying one seq twice applies the same write twice).
absl::Status ReplicaWriter::Delete(absl::string_view key, const wire::ReplicaCommit& tag,
                                   absl::Time deadline) {
  KV_RETURN_IF_ERROR(core_->layout().limits.CheckKey(key));
  KV_RETURN_IF_ERROR(CheckTag(tag));
  return core_->entries()->SendOnly(
      [&](uint64_t request_id, char* out) {
        return wire::EncodeReplicaDeleteCommit(request_id, key, tag, out);
      },
      deadline);
}

}  // namespace server
}  // namespace kvstore
