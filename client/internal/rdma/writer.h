// Copyright 2026 The kvstore Authors.
//
// RdmaWriter: PUT, MultiPut and DELETE by WRITE + commit.
//
//   PUT     reserve the entry's room in a write lease (LeaseManager) -> RDMA
//           WRITE of header + key + value (gathered; the value straight from
//           the caller's registered buffer in PutFrom) -> SEND a commit on
//           the same queue pair -> wait for the server's ack. RC ordering
//           puts the WRITE's bytes in place before the commit arrives. A
//           commit refused because the lease expired (kAborted) is redone
//           once with a fresh lease.
//   DELETE  a commit naming the key.
//
// Every commit holds one commit credit (an ack receive) until its ack.
//
// Thread safety: thread-safe; each call uses the operation slots it acquires.

#ifndef KVSTORE_CLIENT_INTERNAL_RDMA_WRITER_H_
#define KVSTORE_CLIENT_INTERNAL_RDMA_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/internal/rdma/lease_manager.h"
#include "client/internal/rdma/op_engine.h"
#include "client/internal/rdma/rdma_context.h"
#include "client/internal/rdma/server_layout.h"
#include "client/registered_buffer.h"
#include "common/metrics/registry.h"
#include "common/protocol/commit_wire.h"

namespace kvstore {
namespace client {

class RdmaWriter {
 public:
  // Every pointer must outlive the writer. Registers the lease-abort
  // counter in `registry` (the client's: a rebuilt path reuses the series).
  RdmaWriter(const ServerLayout* layout, OpEngine* engine, BufferPool* pool, LeaseManager* leases,
             metrics::Registry* registry);

  // Stores key -> value. kInvalidArgument for a key or value over a limit,
  // the server's ack status (kResourceExhausted when full, ...), kUnavailable
  // once the path is broken, kDeadlineExceeded.
  absl::Status Put(absl::string_view key, absl::string_view value, absl::Time deadline);
  // Put() of buffer[offset, offset+length), WRITTEN from the caller's memory
  // (zero copy); kInvalidArgument for a range outside the buffer.
  // REQUIRES: `buffer` registered with this path's device (lkey != 0).
  absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                       size_t length, absl::Time deadline);
  // kNotFound when the key was absent. A failure before the commit left this
  // client carries kNotSentPayload (the caller may retry it).
  absl::Status Delete(absl::string_view key, absl::Time deadline);
  // All-or-error: on failure some pairs may have been stored.
  absl::Status MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs,
                        absl::Time deadline);

  // Server-to-server replication (a primary sending to a backup,
  // architecture §19.3). ReplicatePut WRITEs `entry`, a whole entry the
  // primary committed (header, version and checksum kept byte for byte),
  // into a lease and commits it as kReplicaPut tagged `tag`; redone once
  // after a lease abort, as Put(). ReplicateDelete commits a
  // kReplicaDelete of `key`. kInvalidArgument for an entry that does not
  // parse, a key over the limits or a node id outside
  // 1..wire::kMaxReplicaNodeIdBytes; otherwise as Put() / Delete(), the ack
  // carrying the backup's replication refusals.
  absl::Status ReplicatePut(absl::string_view entry, const wire::ReplicaCommit& tag,
                            absl::Time deadline);
  absl::Status ReplicateDelete(absl::string_view key, const wire::ReplicaCommit& tag,
                               absl::Time deadline);

 private:
  // One PUT ready to post: where the entry's bytes are, and its commit.
  struct StagedPut {
    OpSlot* slot = nullptr;
    rdma::Sge write_sges[2];
    int nwrite = 0;
    rdma::Sge send_sge;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    std::unique_ptr<Block> big;  // staging when the slot's scratch is too small
  };

  absl::Status ReplicatePutOnce(absl::string_view entry, const wire::ReplicaCommit& tag,
                                absl::Time deadline);
  // Encodes a commit with `encode` (request id, the slot's commit buffer;
  // returns its length) and SENDs it: DELETE and replica DELETE.
  absl::Status SendOnly(absl::FunctionRef<size_t(uint64_t, char*)> encode, absl::Time deadline);
  // Checked PUT with the one redo after a lease abort. `value_lkey` != 0:
  // the value is in registered caller memory.
  absl::Status PutImpl(absl::string_view key, absl::string_view value, uint32_t value_lkey,
                       absl::Time deadline);
  absl::Status PutOnce(absl::string_view key, absl::string_view value, uint32_t value_lkey,
                       absl::Time deadline);
  // Writes the entry's header (and key, and the value unless it is sent
  // straight from the caller's registered buffer) and the commit message.
  absl::Status Stage(OpSlot* s, absl::string_view key, absl::string_view value, uint32_t value_lkey,
                     const LeaseSpace& space, StagedPut* out);
  // Posts the WRITE + commit SEND pairs of `puts` with one doorbell; only the
  // last SEND is signaled (the acks complete the operations). Takes one
  // commit credit per PUT; the caller returns them after waiting.
  absl::Status PostStaged(absl::Span<StagedPut> puts, absl::Time deadline);
  // Up to kBatch pairs, split further to fit the commit credits.
  absl::Status MultiPutBatch(absl::Span<const std::pair<std::string, std::string>> pairs,
                             absl::Time deadline);
  // The staging, posting and waiting of one MultiPutBatch on slots it holds.
  void CommitBatch(absl::Span<const std::pair<std::string, std::string>> pairs,
                   const std::vector<OpSlot*>& slots, const std::vector<LeaseSpace>& spaces,
                   absl::Time deadline, std::vector<absl::Status>* results);

  const ServerLayout* const layout_;
  OpEngine* const engine_;
  BufferPool* const pool_;
  LeaseManager* const leases_;
  // Commits refused because their lease had expired (then redone); owned
  // by the client's registry.
  metrics::Counter* const lease_aborts_;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_RDMA_WRITER_H_
