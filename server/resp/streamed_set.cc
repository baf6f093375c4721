// Copyright 2026 The kvstore Authors.

#include "server/resp/streamed_set.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/protocol/layout.h"
#include "server/resp/cluster_routing.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// Limit refusals answer at once (before the value arrives): the client
// pipelines and matches replies by order, so the reply must not wait for the
// bytes. Budget and pool refusals come with the first value byte (Reserve).
void StreamedSet::Begin(Connection* c, absl::string_view key, uint64_t value_len,
                        const layout::KeyHash* key_hash) {
  // Counted when it starts, refused or not (as the old resp_sets figure
  // always did); timed only when it commits (Finish()).
  counters_->put.requests->Increment();
  absl::Status s = store_->limits().CheckKey(key);
  if (s.ok()) s = store_->limits().CheckValueLength(value_len);
  // Routed before the value arrives: a key routed elsewhere reserves nothing and its
  // value is skipped (RouteKey queues the reply).
  const bool routed = s.ok() && RouteKey(cluster_, c, key, /*write=*/true);
  if (!routed) {
    if (!s.ok()) c->ReplyStatus(s);
    if (value_len > store_->limits().max_value_bytes) {
      // Not worth reading what would be thrown away: answer and close.
      counters_->protocol_errors->Increment();
      c->close_after_flush = true;
      c->reading = false;
      return;
    }
    // Skip the value and its CRLF; the next request follows it.
    c->state = InputState::kDiscard;
    c->discard_left = value_len + 2;
    return;
  }
  c->value_len = value_len;
  c->value_done = 0;
  c->state = InputState::kValue;
  c->has_key_hash = key_hash != nullptr;
  if (key_hash != nullptr) c->key_hash = *key_hash;
  // Nothing will arrive to trigger the reservation of an empty value.
  if (value_len == 0) {
    if (Reserve(c, key, /*may_wait=*/false) == ReserveResult::kYes) {
      c->state = InputState::kValueCrlf;
    }
    return;
  }
  // The first value byte is here already (the usual case): reserve now,
  // while `key` still points into the unmoved input, and the key needs no
  // copy of its own. ConsumeBuffered() does what Reserve() leaves.
  if (c->start < c->in.size() && Reserve(c, key, /*may_wait=*/true) != ReserveResult::kHeldBack) {
    return;
  }
  // Reserved later, after reads that may move the input: keep the key.
  c->pending_key.assign(key.data(), key.size());
}

// Held back, the SET asks the store again only once something is due: each
// refused allocation counts as a pool-full error and wakes the cleaner.
StreamedSet::ReserveResult StreamedSet::Reserve(Connection* c, absl::string_view key,
                                                bool may_wait) {
  if (c->held_back() && (LoopTime(store_->clock()) < c->space_wait_until ||
                         store_->eviction_policy() != EvictionPolicy::kNoEviction)) {
    const std::optional<absl::Duration> in = store_->SpaceReturnsIn();
    if (in && *in > absl::ZeroDuration()) return ReserveResult::kHeldBack;
  }
  const uint64_t bytes = key.size() + c->value_len;
  if (!budget_->TryTake(bytes)) {
    counters_->limit_inflight_set->Increment();
    c->ReplyStatus(absl::ResourceExhaustedError(absl::StrCat(
        "SET of ", c->value_len, " bytes refused: streamed SETs in flight already hold ",
        budget_->used(), " of resp_max_inflight_set_bytes=", budget_->cap(), "; retry later")));
  } else {
    // Begin() checked both lengths against the limits: the open segment's
    // room first, the writer's full path (a new segment, a run of its own,
    // a refusal) when it has none.
    Reservation r = writer_->ReserveInOpen(key.size(), c->value_len);
    if (r.ptr == nullptr) {
      absl::StatusOr<Reservation> full = writer_->Reserve(key.size(), c->value_len);
      if (full.ok()) {
        r = *full;
      } else {
        // Space for header + key + value; kResourceExhausted (OOM) when full.
        budget_->Give(bytes);
        if (may_wait && HoldBack(c, full.status())) return ReserveResult::kHeldBack;
        c->ReplyStatus(full.status());
      }
    }
    if (r.ptr != nullptr) {
      c->space_wait_until = absl::InfinitePast();
      c->budget_taken = bytes;
      c->reservation = r;
      // Header and key now; the value bytes land behind them as they arrive.
      layout::BeginEntry(r.ptr, key, static_cast<uint32_t>(c->value_len), store_->Version());
      c->pending_key.clear();  // `key` may be it: used up only now
      return ReserveResult::kYes;
    }
  }
  // Still a well-formed request: skip its value, keep the connection.
  c->space_wait_until = absl::InfinitePast();
  c->pending_key.clear();
  c->state = InputState::kDiscard;
  c->discard_left = c->value_len - c->value_done + 2;
  return ReserveResult::kRefused;
}

// Only a full pool (kResourceExhausted from the writer; limits are
// kInvalidArgument) whose space is due back before the SET's wait ends. A
// first refusal while space counts as free already (free segments, but no
// run long enough for a value larger than a segment) is not the grace
// period's doing: waiting would not help, so it is refused at once.
bool StreamedSet::HoldBack(Connection* c, const absl::Status& refusal) {
  if (refusal.code() != absl::StatusCode::kResourceExhausted) return false;
  const absl::Time now = LoopTime(store_->clock());
  const bool first = !c->held_back();
  if (first) {
    c->space_wait_until = now + store_->options().grace_period + absl::Milliseconds(100);
  }
  const std::optional<absl::Duration> in = store_->SpaceReturnsIn();
  // Under an evicting policy space is always on its way back (eviction
  // just emptied segments, or the cleaner freed some since the refusal):
  // a SET is held back, never refused, while anything is queued.
  // Nor does its wait run out while emptied segments keep coming back
  // (other writers may take the first ones); the request timeout still
  // bounds a connection that waits.
  const bool evicting = store_->eviction_policy() != EvictionPolicy::kNoEviction;
  if (!in || (first && *in == absl::ZeroDuration() && !evicting)) return false;
  if (!evicting && (now >= c->space_wait_until || now + *in > c->space_wait_until)) return false;
  if (first) counters_->sets_held_back->Increment();
  return true;
}

void StreamedSet::Release(Connection* c) {
  if (c->reservation.ptr != nullptr) writer_->Done(c->reservation);
  c->reservation = Reservation();
  budget_->Give(c->budget_taken);
  c->budget_taken = 0;
  c->entry_sealed = false;
  c->pending_key.clear();
}

char* StreamedSet::ValueCursor(const Connection& c) {
  // The key length is read back from the entry header rather than kept per
  // connection: the header is the one place it is stored.
  layout::EntryHeader h;
  std::memcpy(&h, c.reservation.ptr, sizeof(h));
  return c.reservation.ptr + layout::kEntryHeaderBytes + h.key_len + c.value_done;
}

// A state machine over the buffered input: value bytes, then the CRLF, then
// commit; or the bytes of a refused value, skipped. Loops because one buffer
// may hold the end of a value and its CRLF together.
StreamedSet::Progress StreamedSet::ConsumeBuffered(Connection* c) {
  while (c->state != InputState::kCommands) {
    const absl::string_view buf = c->in.view(c->start);
    switch (c->state) {
      case InputState::kValue: {
        if (buf.empty()) return Progress::kNeedMore;
        // The first value byte is here: now the entry is worth reserving.
        if (!Reserved(*c)) {
          const ReserveResult r = Reserve(c, c->pending_key, /*may_wait=*/true);
          if (r == ReserveResult::kHeldBack) return Progress::kHeldBack;
          if (r == ReserveResult::kRefused) break;  // now kDiscard
        }
        // Value bytes that arrived together with the request: one copy.
        const uint64_t take = std::min<uint64_t>(buf.size(), c->value_len - c->value_done);
        if (take == c->value_len) {
          // All of it (the usual case): copied and checksummed in one pass.
          layout::FillAndSealEntry(c->reservation.ptr, buf.substr(0, take));
          c->entry_sealed = true;
          c->value_done = take;
          c->start += take;
        } else if (take > 0) {
          std::memcpy(ValueCursor(*c), buf.data(), take);
          c->value_done += take;
          c->start += take;
        }
        if (c->value_done < c->value_len) return Progress::kNeedMore;
        c->state = InputState::kValueCrlf;
        break;
      }
      case InputState::kValueCrlf:
        if (buf.size() < 2) return Progress::kNeedMore;
        if (buf[0] != '\r' || buf[1] != '\n') {
          // The length line lied; never commit what may be a misframed value.
          Release(c);
          c->state = InputState::kCommands;
          return Progress::kBadTerminator;
        }
        c->start += 2;
        Finish(c);
        break;
      case InputState::kDiscard: {
        const uint64_t take = std::min<uint64_t>(buf.size(), c->discard_left);
        c->start += take;
        c->discard_left -= take;
        if (c->discard_left > 0) return Progress::kNeedMore;
        c->state = InputState::kCommands;
        break;
      }
      case InputState::kCommands:
        break;  // unreachable: the loop condition
    }
  }
  return Progress::kDone;
}

// At most the rest of the value, so bytes of the next request are never
// read into the entry; they arrive through the buffered path.
ssize_t StreamedSet::ReceiveDirect(Connection* c) {
  const ssize_t n = recv(c->fd, ValueCursor(*c), c->value_len - c->value_done, 0);
  if (n > 0) {
    c->value_done += static_cast<uint64_t>(n);
    if (c->value_done == c->value_len) c->state = InputState::kValueCrlf;
  }
  return n;
}

void StreamedSet::Abandon(Connection* c) {
  // Uncommitted: the reserved space becomes dead space.
  Release(c);
}

// Commit publishes the entry in the index (replacing an older value); the
// reservation is released either way, and the reply is the commit's status.
void StreamedSet::Finish(Connection* c) {
  if (!c->entry_sealed) layout::SealEntry(c->reservation.ptr);
  c->entry_sealed = false;
  last_parked_ = parking_ != nullptr && WaitsForPeers(*c);
  if (last_parked_) {
    // The job owns the entry and budget from here (see commit_pool.h).
    CommitPool::Job job;
    job.fd = c->fd;
    job.serial = c->serial;
    job.key_hash = ParkedKeyHash(KeyOf(*c));
    job.held_id = c->Hold();
    job.reservation = std::move(c->reservation);
    job.budget = c->budget_taken;
    job.started = c->request_started;
    c->reservation = Reservation();
    c->budget_taken = 0;
    c->pending_key.clear();
    c->state = InputState::kCommands;
    c->request_started = absl::InfiniteFuture();
    ++c->parked;
    c->parked_keys.push_back(job.key_hash);
    parking_->Submit(std::move(job));
    return;
  }
  // This loop wrote the entry from a checked key and length into its own
  // reservation, and sealed it: nothing to check again.
  const absl::Status s =
      store_->CommitReserved(c->reservation, c->has_key_hash ? &c->key_hash : nullptr);
  Release(c);
  c->state = InputState::kCommands;
  ReplyStoreStatus(cluster_, c, s);
  // From the header (the loop stamped request_started when it parsed it) to
  // the commit's reply: one extra clock read for the whole streamed SET.
  const int64_t took = store_->clock().SteadyNanos() - c->set_started_ns;
  counters_->put.duration->ObserveNanos(took > 0 ? static_cast<uint64_t>(took) : 0);
  c->request_started = absl::InfiniteFuture();
}

absl::string_view StreamedSet::KeyOf(const Connection& c) {
  layout::EntryHeader h;
  std::memcpy(&h, c.reservation.ptr, sizeof(h));
  return absl::string_view(c.reservation.ptr + layout::kEntryHeaderBytes, h.key_len);
}

bool StreamedSet::WaitsForPeers(const Connection& c) const {
  WriteHook* hook = store_->options().write_hook;
  return hook != nullptr && hook->WaitsForPeers(KeyOf(c));
}

void StreamedSet::Unpark(Connection* c, CommitPool::Done& done) {
  if (done.job.reservation.ptr != nullptr) writer_->Done(done.job.reservation);
  budget_->Give(done.job.budget);
  if (c == nullptr) return;
  --c->parked;
  auto key = std::find(c->parked_keys.begin(), c->parked_keys.end(), done.job.key_hash);
  if (key != c->parked_keys.end()) c->parked_keys.erase(key);
  c->Answer(done.job.held_id, [&] { ReplyStoreStatus(cluster_, c, done.status); });
  counters_->put.duration->Observe(LoopTime(store_->clock()) - done.job.started);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
