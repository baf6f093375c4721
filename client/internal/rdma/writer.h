// Copyright 2026 The kvstore Authors.
//
// RdmaWriter: a client's PUT, MultiPut and DELETE by WRITE + commit, on the
// shared initiator's EntryWriter (common/rdma/initiator/entry_writer.h),
// which stages, posts and waits for each commit. This class adds what is
// the client's: the limits checks before anything is sent, zero copy from
// registered buffers, batches of PUTs in one doorbell, and marking a DELETE
// that never left the client as retryable.
//
// Thread safety: thread-safe; each call uses the operation slots it acquires.

#ifndef KVSTORE_CLIENT_INTERNAL_RDMA_WRITER_H_
#define KVSTORE_CLIENT_INTERNAL_RDMA_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/registered_buffer.h"
#include "common/rdma/initiator/entry_writer.h"
#include "common/rdma/initiator/lease_manager.h"
#include "common/rdma/initiator/op_engine.h"
#include "common/rdma/initiator/server_layout.h"

namespace kvstore {
namespace client {

class RdmaWriter {
 public:
  // Every pointer must outlive the writer.
  RdmaWriter(const initiator::ServerLayout* layout, initiator::OpEngine* engine,
             initiator::LeaseManager* leases, initiator::EntryWriter* entries);

  // Stores key -> value. kInvalidArgument for a key or value over a limit,
  // the server's ack status (kResourceExhausted when full, ...), kUnavailable
  // once the path is broken, kDeadlineExceeded. A commit refused because the
  // lease expired (kAborted) is redone once with a fresh lease.
  absl::Status Put(absl::string_view key, absl::string_view value, absl::Time deadline);
  // Put() of buffer[offset, offset+length), WRITTEN from the caller's memory
  // (zero copy); kInvalidArgument for a range outside the buffer.
  // REQUIRES: `buffer` registered with this path's device (lkey != 0).
  absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                       size_t length, absl::Time deadline);
  // kNotFound when the key was absent. A failure before the commit left this
  // client carries kNotSentPayload (the caller may retry it).
  absl::Status Delete(absl::string_view key, absl::Time deadline);
  // One status per pair, as DataPath::MultiPut: every pair is checked
  // first (the outer error, nothing sent); then rounds of up to 16 pairs,
  // each pair's status its own ack (or the error that stopped its round).
  // After a round with any failure, later pairs are not sent
  // (kNotSentPayload).
  absl::StatusOr<std::vector<absl::Status>> MultiPut(
      absl::Span<const std::pair<std::string, std::string>> pairs, absl::Time deadline);

 private:
  // Checked PUT. `value_lkey` != 0: the value is in registered caller memory.
  absl::Status PutImpl(absl::string_view key, absl::string_view value, uint32_t value_lkey,
                       absl::Time deadline);
  // One attempt of a copy PUT (a MultiPut pair redone alone).
  absl::Status PutOnce(absl::string_view key, absl::string_view value, absl::Time deadline);
  // Up to kBatch pairs, split further to fit the commit credits; appends
  // one status per pair to `out` and returns whether all were stored.
  bool MultiPutBatch(absl::Span<const std::pair<std::string, std::string>> pairs,
                     absl::Time deadline, std::vector<absl::Status>* out);
  // The staging, posting and waiting of one MultiPutBatch on slots it holds.
  void CommitBatch(absl::Span<const std::pair<std::string, std::string>> pairs,
                   const std::vector<initiator::OpSlot*>& slots,
                   const std::vector<initiator::LeaseSpace>& spaces, absl::Time deadline,
                   std::vector<absl::Status>* results);

  const initiator::ServerLayout* const layout_;
  initiator::OpEngine* const engine_;
  initiator::LeaseManager* const leases_;
  initiator::EntryWriter* const entries_;
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_RDMA_WRITER_H_
