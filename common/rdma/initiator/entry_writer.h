// Copyright 2026 The kvstore Authors.
//
// EntryWriter: the commit half of an RDMA write, shared by every initiator
// (a client's PUTs and DELETEs, a primary's replicated writes):
//
//   PUT     reserve the entry's room in a write lease (LeaseManager) ->
//           stage the entry and its commit message in an operation slot ->
//           RDMA WRITE of the entry (gathered; a value may come straight
//           from the caller's registered buffer) -> SEND the commit on the
//           same queue pair -> wait for the server's ack -> finish the lease
//           space. RC ordering puts the WRITE's bytes in place before the
//           commit arrives. A commit refused because the lease expired
//           (kAborted) is redone once with a fresh lease (Put()).
//   SEND    a commit with no WRITE before it (a DELETE names its key).
//
// What the entry is and how its commit is encoded is the caller's: it
// passes a Stager, usually one of StageNew() (an entry built here from key
// and value) or StageBuilt() (an entry built elsewhere, copied byte for
// byte). Every commit holds one commit credit (an ack receive) until its
// ack, and a failure at any step gives back what the earlier steps took,
// so leases drain and credits never leak.
//
// Thread safety: thread-safe; each call uses the operation slots it acquires.

#ifndef KVSTORE_COMMON_RDMA_INITIATOR_ENTRY_WRITER_H_
#define KVSTORE_COMMON_RDMA_INITIATOR_ENTRY_WRITER_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/metrics/registry.h"
#include "common/protocol/commit_wire.h"
#include "common/rdma/initiator/lease_manager.h"
#include "common/rdma/initiator/op_engine.h"
#include "common/rdma/initiator/rdma_context.h"
#include "common/rdma/queue_pair.h"

namespace kvstore {
namespace initiator {

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

// Fills in a staged PUT on slot `s` for the lease room `space`.
using Stager = absl::FunctionRef<absl::Status(OpSlot* s, const LeaseSpace& space, StagedPut* out)>;
// Encodes the commit of a built entry into `out` (the slot's commit buffer)
// from `commit`, whose request id, lease, offset and size are filled in;
// returns its length.
using PutEncoder = absl::FunctionRef<size_t(const wire::PutCommit& commit, char* out)>;
// Encodes a SEND-only commit with `request_id` into `out`; returns its length.
using SendEncoder = absl::FunctionRef<size_t(uint64_t request_id, char* out)>;

class EntryWriter {
 public:
  // Every pointer must outlive the writer. `lease_aborts` counts the
  // commits redone after a lease abort (owned by the caller's registry).
  EntryWriter(OpEngine* engine, BufferPool* pool, LeaseManager* leases,
              metrics::Counter* lease_aborts);

  // One PUT of an entry of `size` bytes that `stage` stages, start to
  // finish on one slot and credit; redone once with a fresh lease when the
  // commit comes back kAborted (the lease expired before the commit
  // arrived, so nothing was published). The server's ack status, the
  // lease's or the stager's error, kUnavailable once the path is broken,
  // kDeadlineExceeded.
  absl::Status Put(uint64_t size, Stager stage, absl::Time deadline);
  // Put() without the redo.
  absl::Status PutOnce(uint64_t size, Stager stage, absl::Time deadline);
  // A commit that `encode` encodes, SENT with no WRITE before it: the
  // server's ack status, kUnavailable once the path is broken,
  // kDeadlineExceeded. `*posted` (unless null) says whether the SEND was
  // posted: when it was not, the commit certainly never reached the server.
  absl::Status SendOnly(SendEncoder encode, absl::Time deadline, bool* posted = nullptr);

  // Stagers. StageNew: an entry built here, header (the slot's generation
  // as its version) and key in scratch, the value copied too, or gathered
  // from registered caller memory when `value_lkey` != 0; a kPut commit.
  absl::Status StageNew(OpSlot* s, absl::string_view key, absl::string_view value,
                        uint32_t value_lkey, const LeaseSpace& space, StagedPut* out);
  // StageBuilt: `entry`, a whole entry built elsewhere, copied into scratch
  // and WRITTEN as one piece; its commit encoded by `encode`.
  absl::Status StageBuilt(OpSlot* s, absl::string_view entry, const LeaseSpace& space,
                          PutEncoder encode, StagedPut* out);

  // For batches (a client's MultiPut): posts the WRITE + commit SEND pairs
  // of `puts` with one doorbell; only the last SEND is signaled (the acks
  // complete the operations). Takes one commit credit per PUT, which the
  // caller returns after waiting (OpEngine::ReturnCredits).
  absl::Status PostStaged(absl::Span<StagedPut> puts, absl::Time deadline);
  // Gives back a staged PUT's pooled buffer, if it has one.
  void Unstage(StagedPut* put);
  // Counts a commit the caller redoes after a lease abort.
  void CountLeaseAbort() { lease_aborts_->Increment(); }

 private:
  // Where `bytes` of staging go: the slot's scratch, or a pooled buffer
  // kept in out->big. Returns the address and its lkey.
  absl::StatusOr<std::pair<char*, uint32_t>> Scratch(OpSlot* s, size_t bytes, StagedPut* out);

  OpEngine* const engine_;
  BufferPool* const pool_;
  LeaseManager* const leases_;
  metrics::Counter* const lease_aborts_;
};

}  // namespace initiator
}  // namespace kvstore

#endif  // KVSTORE_COMMON_RDMA_INITIATOR_ENTRY_WRITER_H_
