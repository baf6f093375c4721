// Copyright 2026 The kvstore Authors.
//
// ReplicaWriter: a primary's RDMA writes to one backup (architecture
// §19.3), on the initiator the client's data path uses too
// (common/rdma/initiator). The backup treats the primary as an RDMA client
// of its own: the same handshake, session, queue pair and write leases.
//
//   Put     WRITE of `entry`, a whole entry the primary committed (header,
//           version and checksum kept byte for byte), into a write lease
//           on the backup, then a kReplicaPut commit tagged with the
//           write's shard, epoch, seq and primary
//           (common/protocol/commit_wire.h); redone once with a fresh
//           lease after a lease abort.
//   Delete  a kReplicaDelete commit naming the key.
//
// The backup's poller checks the tag and installs the entry in place
// (ReplicaInstaller::ApplyReplicaCommit), then acks: no gRPC call, no
// protobuf, no copy on the backup.
//
// Thread safety: thread-safe; many writes in flight on one queue pair.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_WRITER_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/control/control_client.h"
#include "common/protocol/commit_wire.h"
#include "common/rdma/initiator/path_core.h"
#include "common/rdma/initiator/rdma_context.h"
#include "proto/kv_control.pb.h"

namespace kvstore {
namespace server {

class ReplicaWriter {
 public:
  // Connects to the backup that answered `handshake`, through `control`
  // (which must outlive the writer), on the device and PD of `context`;
  // `name` names this primary in the backup's logs and leases; leases are
  // of `lease_bytes`; `rpc_timeout` bounds each control-plane call. The
  // counters (owned by the server's registry) must outlive the writer.
  // Errors as initiator::PathCore::Connect.
  static absl::StatusOr<std::unique_ptr<ReplicaWriter>> Connect(
      std::shared_ptr<initiator::RdmaContext> context, control::ControlClient* control,
      const v1::HandshakeResponse& handshake, const std::string& name, uint64_t lease_bytes,
      absl::Duration rpc_timeout, const initiator::PathCounters& counters);

  // Refused before anything is sent: kInvalidArgument for a tag whose node
  // id is outside 1..wire::kMaxReplicaNodeIdBytes, an entry whose lengths
  // do not add up to its size, or a key or value over the backup's limits;
  // ParseEntryHeader's kDataLoss for an entry that does not parse.
  // Otherwise the backup's ack (its replication refusals included),
  // kUnavailable once the path is broken, kDeadlineExceeded.
  absl::Status Put(absl::string_view entry, const wire::ReplicaCommit& tag, absl::Time deadline);
  // As Put(), for a delete of `key`.
  absl::Status Delete(absl::string_view key, const wire::ReplicaCommit& tag, absl::Time deadline);

  // One write of a PutBatch(): its entry and tag in (both must stay valid
  // for the call), its status out.
  struct BatchPut {
    absl::string_view entry;
    wire::ReplicaCommit tag;
    absl::Status status;
  };
  // Put() of every write of `puts` at once: each is checked as Put() checks
  // it; those that pass are staged in a lease each and posted in one
  // doorbell. To a backup that takes batch commits
  // (batch_commits() > 1) that is the WRITEs and one kReplicaPutBatch SEND
  // for up to batch_commits() of them, one ack for all; to one that does
  // not, WRITE + commit SEND pairs (up to the path's commit credits at a
  // time) and an ack each. A commit refused because its lease expired
  // (kAborted: nothing was installed), and the writes of a batch after one
  // the backup refused (it stops there), are redone alone by Put(). Each
  // write's status goes to its `status`, as Put() would return it.
  void PutBatch(absl::Span<BatchPut> puts, absl::Time deadline);

  // One delete of a DeleteBatch(): its key and tag in (valid for the
  // call), its status out.
  struct BatchDelete {
    absl::string_view key;
    wire::ReplicaCommit tag;
    absl::Status status;
  };
  // Delete() of every delete of `deletes` at once: each is checked as
  // Delete() checks it; the commits of those that pass are all posted
  // (up to the path's commit credits at a time) before any ack is awaited,
  // so a batch of deletes costs one round trip, not one each. The backup
  // takes them in order (one queue pair, one lane). Each status as
  // Delete() would return it.
  void DeleteBatch(absl::Span<BatchDelete> deletes, absl::Time deadline);

  // Most writes one batch commit carries to this backup for a primary
  // named by `node_len` bytes; 0 when the backup takes no batch commits.
  size_t batch_commits(size_t node_len) const;

  // True once a completion error, failed post or timeout broke the QP.
  bool broken() const { return core_->broken(); }

 private:
  explicit ReplicaWriter(std::unique_ptr<initiator::PathCore> core) : core_(std::move(core)) {}
  // Put()'s checks of a write's shape, before anything is sent.
  absl::Status Check(absl::string_view entry, const wire::ReplicaCommit& tag) const;
  // Lease space (into `spaces`) and an operation slot for each write of
  // `todo`; on failure nothing stays taken and each of them has the error.
  absl::StatusOr<std::vector<initiator::OpSlot*>> Reserve(
      absl::Span<BatchPut> puts, const std::vector<size_t>& todo, absl::Time deadline,
      std::vector<initiator::LeaseSpace>* spaces);
  // PutBatch() of at most the path's credits of checked writes (`todo`
  // indexes `puts`): lease space, slots, staging, one post, the acks.
  void PostBatch(absl::Span<BatchPut> puts, const std::vector<size_t>& todo, absl::Time deadline);
  // DeleteBatch() of at most the path's credits of checked deletes.
  void PostDeletes(absl::Span<BatchDelete> deletes, const std::vector<size_t>& todo,
                   absl::Time deadline);
  // As PostBatch(), with one kReplicaPutBatch commit for all of `todo`
  // (at most batch_commits(), one primary's). The writes the backup did not
  // get to (after a refused one) are added to `redo`, their status unset.
  void PostBatchCommit(absl::Span<BatchPut> puts, const std::vector<size_t>& todo,
                       absl::Time deadline, std::vector<size_t>* redo);
  const std::unique_ptr<initiator::PathCore> core_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_WRITER_H_
