// Copyright 2026 The kvstore Authors.
//
// RdmaReader: one-sided GET, Exists and MultiGet.
//
//   READ both candidate buckets and the server's fence words (one doorbell)
//   -> check the fence -> pick the slots whose fingerprint matches ->
//   bounds-check them -> READ the entry -> check the fence's lease again ->
//   verify magic, lengths, checksum and key.
//
// Fencing (docs/architecture.md §19.5): the fence READ is one more work
// request in the bucket batch, not a round trip. When the words say the
// server is fenced or its lease lapsed the GET fails with kUnavailable,
// when they name another cluster map epoch than SetMapEpoch()'s with
// kFailedPrecondition; nothing read with them is used and the server is not
// asked instead (the caller refreshes its map and retries). A server that
// publishes no fence region is read without the check.
//
// Everything read is untrusted: the server may be rewriting the bucket or
// reclaiming the entry while we read. A failed verify, or a bucket-to-entry
// span longer than the server's max_read_span (the entry may have been
// reused meanwhile), is retried from the bucket READ, a bounded number of
// times with backoff; then the server's CPU answers over gRPC (Get). The
// server CPU takes no part otherwise.
//
// Location cache (location_cache.h): a GET (or Exists) first looks up where
// it last found the key and, on a hit, READs only the entry (with the fence
// words in the same doorbell), then checks magic, key, size, the recorded
// checksum and the checksum itself. A hit that fails any check, or a miss,
// goes the two-READ way above, which records what it finds. The server marks
// an entry retired before acknowledging the write that superseded it, so a
// cached location never yields a value older than an acknowledged write.
// Counted in kvstore_client_location_cache_total{result="hit"|"miss"|"stale"}.
//
// Thread safety: thread-safe; each call uses the operation slots it acquires.

#ifndef KVSTORE_CLIENT_INTERNAL_RDMA_READER_H_
#define KVSTORE_CLIENT_INTERNAL_RDMA_READER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/internal/rdma/fence_gate.h"
#include "client/internal/rdma/location_cache.h"
#include "client/registered_buffer.h"
#include "common/control/control_client.h"
#include "common/metrics/registry.h"
#include "common/protocol/fence.h"
#include "common/protocol/layout.h"
#include "common/protocol/limits.h"
#include "common/rdma/initiator/op_engine.h"
#include "common/rdma/initiator/rdma_context.h"
#include "common/rdma/initiator/server_layout.h"
#include "common/sync/handoff_mutex.h"

namespace kvstore {
namespace client {

// How an RDMA path reads (from Options: rdma_location_cache_entries,
// rdma_read_in_pieces).
struct ReadOptions {
  // Cells of the location cache (0: no cache).
  size_t location_cache_entries = kDefaultLocationCacheEntries;
  // READ entries of 2 * kChunkedReadMinBytes or more in pieces, checksummed
  // as they land (read_chunks.h). Off by default: it can only pay where a
  // NIC moves the bytes while the CPU hashes. With Soft-RoCE the CPU is the
  // NIC: no gain in one VM, 10-20 % slower across two (docs/performance.md).
  bool read_in_pieces = false;
};

class RdmaReader {
 public:
  // Every pointer must outlive the reader. Registers the read retry
  // counters in `registry` (the client's: a rebuilt path reuses the series).
  RdmaReader(const initiator::ServerLayout* layout, initiator::OpEngine* engine,
             initiator::BufferPool* pool, control::ControlClient* control,
             metrics::Registry* registry, const ReadOptions& options = ReadOptions());

  // The value of `key`. kNotFound when absent, kInvalidArgument for a key
  // over the limit, kUnavailable once the path is broken, kDeadlineExceeded.
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline);
  // Whether `key` is present (reads the entry's header and key only).
  absl::StatusOr<bool> Exists(absl::string_view key, absl::Time deadline);
  // Reads the value into buffer[offset, offset+capacity) with the NIC (zero
  // copy) and returns its length: kInvalidArgument for a range outside the
  // buffer, kOutOfRange (naming the size) when the value does not fit.
  // REQUIRES: `buffer` registered with this path's device (lkey != 0).
  absl::StatusOr<size_t> GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                 size_t offset, size_t capacity, absl::Time deadline);
  // One result per key; the outer status fails only when the batch could not
  // be attempted (a bad key, a broken path).
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys, absl::Time deadline);

  // The cluster map epoch reads are checked against (0: single-node). A
  // new epoch empties the location cache.
  void SetMapEpoch(uint64_t epoch);
  // Drops the cached location of `key`: this client wrote or deleted it.
  void Forget(absl::string_view key) {
    if (cache_.enabled()) cache_.Erase(LocationCache::Hash(key));
  }

 private:
  // Reads reported to the server per ReportReads call: one RPC per this
  // many one-sided GETs, 8 bytes each meanwhile. The most a call may carry:
  // the call costs the client ~65,000 instructions beside its offsets,
  // which a GET pays a share of (16 at 4096; it was 64 at 1024).
  static constexpr size_t kReadReportBatch = kMaxReportedReads;
  // Records where a one-sided GET found its entry, and sends the batch
  // once full (on the calling thread; best effort: a lost report only
  // costs the eviction policy some reads). Thread-safe: the batch is
  // guarded by a one-word lock, since an absl::Mutex's lock and unlock
  // cost a hit GET ~60 instructions for a critical section of five.
  void NoteRead(uint64_t offset);

  // The fence words READ with a batch of bucket READs; `present` is false
  // when the server publishes no fence region.
  struct FenceRead {
    bool present = false;
    fence::FenceWords words;
  };
  // Where a zero-copy GET puts the value: registered caller memory.
  struct UserDest {
    char* data;
    size_t capacity;
    uint32_t lkey;
  };
  // One GET: exactly one of `out` / `dest` is set, or neither with
  // `header_only` (Exists).
  struct Request {
    absl::string_view key;
    absl::Time deadline;
    std::string* out = nullptr;
    const UserDest* dest = nullptr;
    bool header_only = false;
  };
  // What reading one candidate slot came to.
  struct Attempt {
    enum Kind {
      kDone,          // `result` is the GET's answer
      kTorn,          // the entry failed verification: retry
      kOtherKey,      // the entry holds another key (fingerprint collision)
      kSpanExceeded,  // too slow to trust what was read: retry (or give up)
    } kind;
    absl::StatusOr<size_t> result = size_t{0};
    bool give_up = false;  // kSpanExceeded: the entry READ alone took too long
    // kDone with an ok result: the entry's checksum (for the cache).
    uint64_t checksum = 0;
  };
  // The local memory one entry READ scatters into.
  struct EntryRead {
    rdma::Sge sges[3];
    int nsge = 0;
    char* local = nullptr;                  // where the header (and key) land
    std::unique_ptr<initiator::Block> big;  // when the slot's scratch is too small
  };

  // The single-key GET with its retries and fallback; returns the value length.
  // Takes one slot (kDeadlineExceeded if none frees up by req.deadline).
  absl::StatusOr<size_t> GetOne(const Request& req);
  // GetOne() on a slot the caller already holds (MultiGetBatch: a caller
  // holding slots never waits for another, which could deadlock the path).
  absl::StatusOr<size_t> GetOneOn(const Request& req, initiator::OpSlot* s);
  // READs both candidate buckets of `h` and the fence words into `s`'s
  // scratch, waits, and admits the fence (its refusal is returned).
  absl::Status ReadBuckets(initiator::OpSlot* s, const layout::KeyHash& h, absl::Time deadline,
                           FenceRead* fence);
  // Fills `op` (and `sge`) with a signaled READ of the fence words into
  // `s`'s fence scratch. False when the server publishes none.
  bool FenceReadOp(initiator::OpSlot* s, rdma::Sge* sge, rdma::ReadOp* op) const;
  // Decodes `s`'s fence scratch after the batch completed and admits it.
  absl::Status AdmitFence(const initiator::OpSlot* s, FenceRead* fence);
  // Admits `fence` again now: after an entry READ that followed the check,
  // the lease may have lapsed meanwhile.
  absl::Status Readmit(const FenceRead& fence);
  // The slots in `s`'s buckets whose fingerprint is `h`'s.
  std::vector<layout::Slot> Candidates(const initiator::OpSlot* s, const layout::KeyHash& h) const;
  // READs and verifies the entry `slot` points at. `t0`: when the bucket
  // READ started (the span is measured from there).
  Attempt ReadCandidate(const Request& req, const layout::Slot& slot, initiator::OpSlot* s,
                        absl::Duration t0, const FenceRead& fence);
  // The hit path: READs the entry at the cached `loc` (and the fence words,
  // one doorbell) and checks it. kDone: the GET's answer; anything else: the
  // location is stale, take the two-READ path.
  Attempt ReadCached(const Request& req, const LocationCache::Location& loc, initiator::OpSlot* s);
  // Fills `plan` for reading the entry of `slot`.
  absl::Status PlanEntryRead(const Request& req, const layout::Slot& slot, initiator::OpSlot* s,
                             EntryRead* plan);
  // Posts the READ `plan` describes (the entry at `remote`/`rkey`), with
  // `fence` (the fence words' READ, or null) after it in the same doorbell,
  // and waits for both. With ReadOptions::read_in_pieces, a READ of
  // 2 * kChunkedReadMinBytes or more goes in pieces (read_chunks.h), and the
  // value is checksummed piece by piece as the pieces land: *checksum then
  // holds the entry's checksum for Verify() (it stays empty for a one-piece
  // READ, or when the header READ is not that of an entry of req.key filling
  // `slot`). Errors as OpEngine::Wait.
  absl::Status ReadEntry(const Request& req, const layout::Slot& slot, const EntryRead& plan,
                         uint64_t remote, uint32_t rkey, initiator::OpSlot* s,
                         const rdma::ReadOp* fence, std::optional<uint64_t>* checksum);
  // ReadEntry() as one work request (and the fence's), without the pieces'
  // bookkeeping: what every GET does unless read_in_pieces is on.
  absl::Status ReadWhole(const Request& req, const EntryRead& plan, uint64_t remote, uint32_t rkey,
                         initiator::OpSlot* s, const rdma::ReadOp* fence);
  // Checks an entry read into `local` (and, for a zero-copy GET, the value
  // in dest); copies the value to `out` when set. Returns the value length;
  // kNotFound for another key, kOutOfRange for a value larger than dest,
  // kDataLoss for anything torn. `computed`: the checksum ReadEntry() already
  // took of what was read, compared instead of hashing the value again.
  absl::StatusOr<size_t> Verify(absl::string_view key, const layout::Slot& slot, const char* local,
                                const UserDest* dest, std::string* out, bool header_only,
                                std::optional<uint64_t> computed = std::nullopt);
  // The server's CPU answers (gRPC Get).
  absl::StatusOr<size_t> ServerGet(const Request& req);

  // Up to kBatch keys: all bucket READs in one doorbell, then one READ per
  // key with a single plausible candidate (large entries too, into pooled
  // buffers), all in a second doorbell; the rest go through GetOne().
  absl::Status MultiGetBatch(absl::Span<const std::string> keys, absl::Time deadline,
                             absl::StatusOr<std::string>* out);
  // Posts and waits for the bucket READs of `keys` into `slots` and the
  // fence READ, and admits the fence; sets `t0` to when they were posted.
  absl::Status ReadBucketsBatch(absl::Span<const std::string> keys,
                                const std::vector<initiator::OpSlot*>& slots,
                                std::vector<layout::KeyHash>* hashes, absl::Time deadline,
                                absl::Duration* t0, FenceRead* fence);
  // READs and verifies the entries of keys with exactly one plausible
  // candidate, whatever its size, filling `out` for those that verified
  // within the span.
  absl::Status ReadSingleCandidates(absl::Span<const std::string> keys,
                                    const std::vector<initiator::OpSlot*>& slots,
                                    const std::vector<layout::KeyHash>& hashes, absl::Time deadline,
                                    absl::Duration t0, const FenceRead& fence,
                                    absl::StatusOr<std::string>* out);

  const initiator::ServerLayout* const layout_;
  // layout_->max_read_span, for the hit path's integer comparison.
  const std::chrono::nanoseconds max_read_span_;
  const bool read_in_pieces_;
  initiator::OpEngine* const engine_;
  initiator::BufferPool* const pool_;
  control::ControlClient* const control_;
  // Owned by the client's registry.
  metrics::Counter* const checksum_retries_;      // a read that did not verify, retried
  metrics::Counter* const span_retries_;          // a read that outlasted max_read_span
  metrics::Counter* const server_fallback_gets_;  // GETs the server CPU answered
  FenceGate fence_;                               // the map epoch; refusals
  LocationCache cache_;
  metrics::Counter* const cache_hits_;    // GETs answered by one entry READ
  metrics::Counter* const cache_misses_;  // no location cached for the key
  metrics::Counter* const cache_stale_;   // a cached location that failed its checks
  metrics::Counter* const read_reports_;  // ReportReads calls, by outcome
  metrics::Counter* const read_reports_failed_;
  HandoffMutex reads_mu_;
  std::vector<uint64_t> reads_;  // guarded by reads_mu_; room for a whole batch
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_RDMA_READER_H_
