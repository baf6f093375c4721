// Copyright 2026 The kvstore Authors.
//
// Why so much checking: the server neither locks nor fences anything for a
// one-sided reader. A bucket may be read while a slot word in it changes, and
// an entry may be reclaimed and reused between the bucket READ and the entry
// READ. So every slot is bounds-checked before it is followed, every entry is
// verified (magic, lengths, key, checksum) after it is read, and a read that
// took longer than the server's max_read_span (its grace period before
// reusing memory) is not trusted at all. And none of it is trusted unless
// the fence words READ in the same batch admit it (fence_gate.h).

#include "client/internal/rdma/reader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/internal/buffer_access.h"
#include "common/protocol/fence.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {

using initiator::Block;
using initiator::BufferPool;
using initiator::DataRegion;
using initiator::kKindRead;
using initiator::kSmallEntryArea;
using initiator::OneSlotGuard;
using initiator::OpEngine;
using initiator::OpSlot;
using initiator::ServerLayout;
using initiator::SlotGuard;

namespace {
// Read spans are timed on the steady clock: the server's grace period runs
// on its monotonic clock, and a wall-clock step here must not make a READ
// that took too long look short (or the reverse).
absl::Duration SteadyNow() {
  return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}
}  // namespace

namespace {

using layout::Slot;

constexpr int kMaxGetAttempts = 8;  // one-sided tries before the server answers
constexpr size_t kBatch = 16;       // keys per MultiGet round
constexpr char kCacheHelp[] =
    "One-sided GETs and Exists by the location cache: hit (one entry READ), miss (none cached), "
    "stale (a cached location that failed its checks; two READs instead).";

}  // namespace

RdmaReader::RdmaReader(const ServerLayout* layout, OpEngine* engine, BufferPool* pool,
                       control::ControlClient* control, metrics::Registry* registry,
                       const ReadOptions& options)
    : layout_(layout),
      max_read_span_(absl::ToChronoNanoseconds(layout->max_read_span)),
      read_in_pieces_(options.read_in_pieces),
      engine_(engine),
      pool_(pool),
      control_(control),
      checksum_retries_(registry->AddCounter(
          "kvstore_client_checksum_retries_total",
          "One-sided GET rounds retried because what was read did not verify.")),
      span_retries_(registry->AddCounter(
          "kvstore_client_span_retries_total",
          "One-sided GETs restarted for taking longer than the server's max_read_span.")),
      server_fallback_gets_(registry->AddCounter(
          "kvstore_client_server_fallback_gets_total",
          "GETs answered by the server CPU (gRPC) after one-sided retries ran out, or for an "
          "entry no single READ can fetch.")),
      fence_(registry),
      cache_(options.location_cache_entries),
      cache_hits_(registry->AddCounter("kvstore_client_location_cache_total", kCacheHelp,
                                       {{"result", "hit"}})),
      cache_misses_(registry->AddCounter("kvstore_client_location_cache_total", kCacheHelp,
                                         {{"result", "miss"}})),
      cache_stale_(registry->AddCounter("kvstore_client_location_cache_total", kCacheHelp,
                                        {{"result", "stale"}})),
      read_reports_(registry->AddCounter(
          "kvstore_client_read_reports_total",
          "Batches of one-sided GET locations reported to the server for its eviction policy.",
          {{"result", "ok"}})),
      read_reports_failed_(registry->AddCounter(
          "kvstore_client_read_reports_total",
          "Batches of one-sided GET locations reported to the server for its eviction policy.",
          {{"result", "error"}})) {
  reads_.reserve(kReadReportBatch);
}

// --- Entry points --------------------------------------------------------------

// The key limit is checked before anything is posted: the server would
// refuse such a key anyway, and the hash of an oversize key is meaningless.
absl::StatusOr<std::string> RdmaReader::Get(absl::string_view key, absl::Time deadline) {
  KV_RETURN_IF_ERROR(layout_->limits.CheckKey(key));
  std::string out;
  KV_RETURN_IF_ERROR(GetOne({key, deadline, &out, nullptr, false}).status());
  return out;
}

// Exists reads only the header and key (header_only): the value is not
// needed, so neither is its checksum.
absl::StatusOr<bool> RdmaReader::Exists(absl::string_view key, absl::Time deadline) {
  KV_RETURN_IF_ERROR(layout_->limits.CheckKey(key));
  auto r = GetOne({key, deadline, nullptr, nullptr, /*header_only=*/true});
  if (r.ok()) return true;
  if (r.status().code() == absl::StatusCode::kNotFound) return false;
  return r.status();
}

// The value lands in the caller's buffer straight from the NIC; only the
// header, key and padding pass through scratch.
absl::StatusOr<size_t> RdmaReader::GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                           size_t offset, size_t capacity, absl::Time deadline) {
  KV_RETURN_IF_ERROR(layout_->limits.CheckKey(key));
  // Written as two comparisons so that offset + capacity cannot overflow.
  if (offset > buffer.size() || capacity > buffer.size() - offset) {
    return absl::InvalidArgumentError("range outside the registered buffer");
  }
  UserDest dest{buffer.data() + offset, capacity, KvClientInternal::lkey(buffer)};
  return GetOne({key, deadline, nullptr, &dest, false});
}

// Every key is checked before any is read, so a bad key fails the whole
// call without partial work; then batches of kBatch keys, each in parallel.
absl::StatusOr<std::vector<absl::StatusOr<std::string>>> RdmaReader::MultiGet(
    absl::Span<const std::string> keys, absl::Time deadline) {
  for (const auto& k : keys) KV_RETURN_IF_ERROR(layout_->limits.CheckKey(k));
  // UnknownError marks "not answered yet" for MultiGetBatch.
  std::vector<absl::StatusOr<std::string>> out(keys.size(), absl::UnknownError(""));
  for (size_t begin = 0; begin < keys.size(); begin += kBatch) {
    const size_t n = std::min(kBatch, keys.size() - begin);
    KV_RETURN_IF_ERROR(MultiGetBatch(keys.subspan(begin, n), deadline, &out[begin]));
  }
  return out;
}

// --- The single-key GET ----------------------------------------------------------

// Both buckets are read even when they coincide; Candidates() then searches
// the copy once.
absl::Status RdmaReader::ReadBuckets(OpSlot* s, const layout::KeyHash& h, absl::Time deadline,
                                     FenceRead* fence) {
  // Both candidate buckets and the fence words, one doorbell, only the last
  // signaled (RC completes them in order).
  rdma::Sge sges[3] = {{reinterpret_cast<uint64_t>(s->buckets),
                        static_cast<uint32_t>(layout::kBucketBytes), s->lkey},
                       {reinterpret_cast<uint64_t>(s->buckets + layout::kBucketBytes),
                        static_cast<uint32_t>(layout::kBucketBytes), s->lkey}};
  rdma::ReadOp reads[3];
  for (int i = 0; i < 2; ++i) {
    reads[i].local = absl::MakeConstSpan(&sges[i], 1);
    reads[i].remote_addr = layout_->index_addr + h.bucket[i] * layout::kBucketBytes;
    reads[i].rkey = layout_->index_rkey;
    reads[i].wr_id = kKindRead | s->index;
    reads[i].signaled = i == 1;
  }
  size_t n = 2;
  if (FenceReadOp(s, &sges[2], &reads[2])) {
    reads[1].signaled = false;
    n = 3;
  }
  engine_->Arm(s);
  KV_RETURN_IF_ERROR(engine_->PostReads(absl::MakeConstSpan(reads, n)));
  KV_RETURN_IF_ERROR(engine_->Wait(s, deadline));
  return AdmitFence(s, fence);
}

// Last in its batch: it is READ after the buckets, so words that admit the
// batch were current when the buckets were read, or later.
bool RdmaReader::FenceReadOp(OpSlot* s, rdma::Sge* sge, rdma::ReadOp* op) const {
  if (!layout_->has_fence()) return false;
  *sge = {reinterpret_cast<uint64_t>(s->fence), 16, s->lkey};
  op->local = absl::MakeConstSpan(sge, 1);
  op->remote_addr = layout_->fence_addr;
  op->rkey = layout_->fence_rkey;
  op->wr_id = kKindRead | s->index;
  op->signaled = true;
  return true;
}

absl::Status RdmaReader::AdmitFence(const OpSlot* s, FenceRead* fence) {
  fence->present = layout_->has_fence();
  if (!fence->present) return absl::OkStatus();
  fence->words = fence::Decode(s->fence);
  return fence_.Admit(fence->words);
}

absl::Status RdmaReader::Readmit(const FenceRead& fence) {
  return fence.present ? fence_.Admit(fence.words) : absl::OkStatus();
}

std::vector<Slot> RdmaReader::Candidates(const OpSlot* s, const layout::KeyHash& h) const {
  std::vector<Slot> out;
  // Both buckets are read even when they coincide; the copy is searched once.
  const int nb = h.bucket[0] == h.bucket[1] ? 1 : 2;
  for (int b = 0; b < nb; ++b) {
    // The scratch areas are 64-byte aligned, so the words can be loaded
    // in place. Every fingerprint match is a candidate: the key is checked
    // only once the entry has been read.
    const auto* words = reinterpret_cast<const uint64_t*>(s->buckets + b * layout::kBucketBytes);
    layout::FindInBucket(words, h.fingerprint, [&](const Slot& slot) {
      out.push_back(slot);
      return false;
    });
  }
  return out;
}

// The attempt loop. Outcomes per attempt: no candidate -> kNotFound; a
// candidate that verifies -> done; only other keys -> kNotFound;
// anything torn -> retry; a span overrun -> retry, or straight to the server
// when even the entry READ alone is too slow.
absl::StatusOr<size_t> RdmaReader::GetOne(const Request& req) {
  KV_ASSIGN_OR_RETURN(OpSlot * s, engine_->AcquireSlot(req.deadline));
  OneSlotGuard guard(engine_, s);
  return GetOneOn(req, s);
}

absl::StatusOr<size_t> RdmaReader::GetOneOn(const Request& req, OpSlot* s) {
  // The hit path first: one entry READ when the key's location is cached.
  const uint64_t ch = cache_.enabled() ? LocationCache::Hash(req.key) : 0;
  if (cache_.enabled()) {
    LocationCache::Location loc;
    if (cache_.Lookup(ch, &loc)) {
      Attempt a = ReadCached(req, loc, s);
      if (a.kind == Attempt::kDone) {
        cache_hits_->Increment();
        return a.result;
      }
      cache_stale_->Increment();
      cache_.Erase(ch);
    } else {
      cache_misses_->Increment();
    }
  }
  const layout::KeyHash h =
      layout::HashKey(req.key, layout_->geometry.seed, layout_->geometry.bucket_count);
  for (int attempt = 0; attempt < kMaxGetAttempts; ++attempt) {
    // Backoff: 10 us doubling to 1 ms, time for a writer to finish.
    if (attempt > 0) absl::SleepFor(absl::Microseconds(std::min(1000, 5 << attempt)));
    const absl::Duration t0 = SteadyNow();
    FenceRead fence;
    // A fence refusal ends the GET: the server is not asked instead.
    KV_RETURN_IF_ERROR(ReadBuckets(s, h, req.deadline, &fence));
    std::vector<Slot> cands = Candidates(s, h);
    if (cands.empty()) return absl::NotFoundError("key not found");
    bool torn = false;           // a candidate failed its checks
    bool span_exceeded = false;  // too slow to trust what was read
    for (const Slot& slot : cands) {
      if (!layout_->Plausible(slot, req.key.size())) {
        torn = true;
        continue;
      }
      Attempt a = ReadCandidate(req, slot, s, t0, fence);
      if (a.kind == Attempt::kDone) {
        if (a.result.ok()) NoteRead(slot.offset);
        if (a.result.ok() && cache_.enabled())
          cache_.Insert(ch, {slot.offset, slot.size, a.checksum});
        return a.result;
      }
      if (a.kind == Attempt::kTorn) torn = true;
      if (a.kind == Attempt::kSpanExceeded) {
        span_exceeded = true;
        if (a.give_up) attempt = kMaxGetAttempts;
        break;
      }
    }
    if (span_exceeded) continue;  // counted as a span retry
    if (!torn) return absl::NotFoundError("key not found");
    checksum_retries_->Increment();  // a slot or entry that did not verify
  }
  // Retries exhausted: the server's CPU answers.
  server_fallback_gets_->Increment();
  return ServerGet(req);
}

// One entry READ and its verification. A pooled buffer, if one was needed,
// goes back to the pool on every way out.
RdmaReader::Attempt RdmaReader::ReadCandidate(const Request& req, const Slot& slot, OpSlot* s,
                                              absl::Duration t0, const FenceRead& fence) {
  const size_t head = layout::kEntryHeaderBytes + req.key.size();
  const DataRegion* region = layout_->Resolve(slot.offset, req.header_only ? head : slot.size);
  if (region == nullptr) {
    // Larger than a segment and across two memory regions: one READ
    // cannot fetch it, so the server answers.
    server_fallback_gets_->Increment();
    return {Attempt::kDone, ServerGet(req)};
  }
  const uint64_t remote = region->addr + (slot.offset - region->arena_offset);
  EntryRead plan;
  if (absl::Status p = PlanEntryRead(req, slot, s, &plan); !p.ok()) return {Attempt::kDone, p};
  const absl::Duration entry_start = SteadyNow();
  std::optional<uint64_t> computed;
  absl::Status posted = ReadEntry(req, slot, plan, remote, region->rkey, s, nullptr, &computed);
  if (!posted.ok()) {
    if (plan.big) pool_->Release(std::move(plan.big));
    return {Attempt::kDone, posted};
  }
  if (SteadyNow() - t0 > layout_->max_read_span) {
    // The entry may have been reclaimed and reused while we read it.
    span_retries_->Increment();
    if (plan.big) pool_->Release(std::move(plan.big));
    Attempt a{Attempt::kSpanExceeded};
    // If the entry READ alone outlasts the span (a large value on a slow
    // link), trying again cannot help: let the server answer.
    a.give_up = SteadyNow() - entry_start > layout_->max_read_span;
    return a;
  }
  // The entry was READ after the fence check: the lease must still hold.
  if (absl::Status f = Readmit(fence); !f.ok()) {
    if (plan.big) pool_->Release(std::move(plan.big));
    return {Attempt::kDone, f};
  }
  absl::StatusOr<size_t> verified =
      Verify(req.key, slot, plan.local, req.dest, req.out, req.header_only, computed);
  layout::EntryHeader header;
  std::memcpy(&header, plan.local, sizeof(header));
  if (plan.big) pool_->Release(std::move(plan.big));
  if (verified.ok()) {
    Attempt a{Attempt::kDone, verified};
    a.checksum = header.checksum;
    return a;
  }
  if (verified.status().code() == absl::StatusCode::kOutOfRange) {
    return {Attempt::kDone, verified.status()};
  }
  if (verified.status().code() == absl::StatusCode::kAborted) {
    // Too close to its expiry for this clock to call: the server answers.
    server_fallback_gets_->Increment();
    return {Attempt::kDone, ServerGet(req)};
  }
  if (verified.status().code() != absl::StatusCode::kNotFound) return {Attempt::kTorn};
  return {Attempt::kOtherKey};
}

// --- MultiGet ------------------------------------------------------------------------

// 2 READs per key in one doorbell; the slots' scratch receives the buckets
// as in the single-key path, so GetOne() could take over any key.
absl::Status RdmaReader::ReadBucketsBatch(absl::Span<const std::string> keys,
                                          const std::vector<OpSlot*>& slots,
                                          std::vector<layout::KeyHash>* hashes, absl::Time deadline,
                                          absl::Duration* t0, FenceRead* fence) {
  const size_t n = keys.size();
  // One more for the fence words.
  std::vector<rdma::Sge> sges(2 * n + 1);
  std::vector<rdma::ReadOp> reads(2 * n + 1);
  for (size_t k = 0; k < n; ++k) {
    (*hashes)[k] = layout::HashKey(keys[k], layout_->geometry.seed, layout_->geometry.bucket_count);
    for (int i = 0; i < 2; ++i) {
      rdma::ReadOp& r = reads[2 * k + i];
      sges[2 * k + i] = {reinterpret_cast<uint64_t>(slots[k]->buckets + i * layout::kBucketBytes),
                         static_cast<uint32_t>(layout::kBucketBytes), slots[k]->lkey};
      r.local = absl::MakeConstSpan(&sges[2 * k + i], 1);
      r.remote_addr = layout_->index_addr + (*hashes)[k].bucket[i] * layout::kBucketBytes;
      r.rkey = layout_->index_rkey;
      // Every READ names the last slot: only its completion is awaited.
      r.wr_id = kKindRead | slots[n - 1]->index;
      r.signaled = false;
    }
  }
  // The fence READ goes last, into the last slot's scratch.
  if (!FenceReadOp(slots[n - 1], &sges[2 * n], &reads[2 * n])) reads.pop_back();
  // Selective signalling: on one RC queue pair, the last READ's completion
  // means every earlier one has completed.
  reads.back().signaled = true;
  *t0 = SteadyNow();
  engine_->Arm(slots[n - 1]);
  KV_RETURN_IF_ERROR(engine_->PostReads(reads));
  KV_RETURN_IF_ERROR(engine_->Wait(slots[n - 1], deadline));
  return AdmitFence(slots[n - 1], fence);
}

// The common case, done in one more round trip for the whole batch: a key
// with one small, plausible candidate in one region. Keys whose entry does
// not verify stay open (UnknownError) for GetOne(); so do all when the span
// was exceeded.
absl::Status RdmaReader::ReadSingleCandidates(absl::Span<const std::string> keys,
                                              const std::vector<OpSlot*>& slots,
                                              const std::vector<layout::KeyHash>& hashes,
                                              absl::Time deadline, absl::Duration t0,
                                              const FenceRead& fence,
                                              absl::StatusOr<std::string>* out) {
  const size_t n = keys.size();
  std::vector<rdma::Sge> esges;
  std::vector<rdma::ReadOp> ereads;
  std::vector<std::pair<size_t, Slot>> pending;
  // Entries larger than a slot's scratch go into pooled registered buffers,
  // READ in the same doorbell as the small ones (all posted, one poll).
  std::vector<std::unique_ptr<Block>> big(n);
  auto release_big = [&] {
    for (auto& b : big) {
      if (b) pool_->Release(std::move(b));
    }
  };
  esges.reserve(n);  // never reallocated: the READs point into it
  for (size_t k = 0; k < n; ++k) {
    std::vector<Slot> cands = Candidates(slots[k], hashes[k]);
    if (cands.empty()) {
      out[k] = absl::NotFoundError("key not found");
      continue;
    }
    if (cands.size() != 1 || !layout_->Plausible(cands[0], keys[k].size()) ||
        layout_->Resolve(cands[0].offset, cands[0].size) == nullptr) {
      continue;  // the single-key path handles it
    }
    if (cands[0].size > kSmallEntryArea) {
      auto b = pool_->Acquire(cands[0].size);
      if (!b.ok()) continue;  // the single-key path tries again, alone
      big[k] = std::move(*b);
    }
    const DataRegion* region = layout_->Resolve(cands[0].offset, cands[0].size);
    char* local = big[k] ? big[k]->mem.get() : slots[k]->entry;
    const uint32_t lkey = big[k] ? big[k]->mr->lkey() : slots[k]->lkey;
    esges.push_back(
        {reinterpret_cast<uint64_t>(local), static_cast<uint32_t>(cands[0].size), lkey});
    rdma::ReadOp op;
    op.remote_addr = region->addr + (cands[0].offset - region->arena_offset);
    op.rkey = region->rkey;
    op.wr_id = kKindRead | slots[n - 1]->index;
    ereads.push_back(op);
    pending.emplace_back(k, cands[0]);
  }
  if (ereads.empty()) return absl::OkStatus();
  for (size_t i = 0; i < ereads.size(); ++i) ereads[i].local = absl::MakeConstSpan(&esges[i], 1);
  ereads.back().signaled = true;
  engine_->Arm(slots[n - 1]);
  absl::Status done = engine_->PostReads(ereads);
  if (done.ok()) done = engine_->Wait(slots[n - 1], deadline);
  // The entries were READ after the fence check: the lease must still hold.
  if (done.ok()) done = Readmit(fence);
  if (!done.ok()) {
    release_big();
    return done;
  }
  // Past the span nothing read can be trusted; those keys stay open.
  const bool in_span = SteadyNow() - t0 <= layout_->max_read_span;
  for (auto& [k, slot] : pending) {
    if (!in_span) continue;
    const char* local = big[k] ? big[k]->mem.get() : slots[k]->entry;
    std::string value;
    auto v = Verify(keys[k], slot, local, nullptr, &value, false);
    if (!v.ok()) continue;
    out[k] = std::move(value);
    NoteRead(slot.offset);
    if (cache_.enabled()) {
      layout::EntryHeader h;
      std::memcpy(&h, local, sizeof(h));
      cache_.Insert(LocationCache::Hash(keys[k]), {slot.offset, slot.size, h.checksum});
    }
  }
  release_big();
  return absl::OkStatus();
}

// The batch's bucket READs go out together; leftover keys take the
// single-key path.
absl::Status RdmaReader::MultiGetBatch(absl::Span<const std::string> keys, absl::Time deadline,
                                       absl::StatusOr<std::string>* out) {
  const size_t n = keys.size();
  KV_ASSIGN_OR_RETURN(std::vector<OpSlot*> slots, engine_->AcquireSlots(n, deadline));
  SlotGuard guard(engine_, slots);
  std::vector<layout::KeyHash> hashes(n);
  absl::Duration t0;
  FenceRead fence;
  // A fence refusal fails the batch: nothing it read is used.
  KV_RETURN_IF_ERROR(ReadBucketsBatch(keys, slots, &hashes, deadline, &t0, &fence));
  KV_RETURN_IF_ERROR(ReadSingleCandidates(keys, slots, hashes, deadline, t0, fence, out));
  // Whatever is still open goes through the single-key path (retries,
  // large entries, collisions, fallback), on the key's own slot: every READ
  // of the batch has completed (the last one was signaled), and asking for
  // one more slot while holding n could wait forever once other threads
  // hold the rest.
  for (size_t k = 0; k < n; ++k) {
    if (out[k].ok() || out[k].status().code() == absl::StatusCode::kNotFound) continue;
    std::string value;
    auto v = GetOneOn({keys[k], deadline, &value, nullptr, false}, slots[k]);
    if (v.ok())
      out[k] = std::move(value);
    else if (v.status().code() == absl::StatusCode::kNotFound)
      out[k] = v.status();
    else
      return v.status();
  }
  return absl::OkStatus();
}

}  // namespace client
}  // namespace kvstore
