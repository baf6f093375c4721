// Copyright 2026 The kvstore Authors.
//
// RespLoop's once-a-second sweep: timeouts, and the output-side bounds of
// RespLimits (output_hard_limit, output_soft_limit for output_soft_seconds,
// max_pin_time). Kept apart from resp_loop.cc, which moves bytes; this file
// decides which connections have overstayed.

#include <sys/socket.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/heap.h"
#include "server/resp/resp_loop.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// Pinned replies first: a value whose reader has not taken it within
// max_pin_time is copied out of the pool when small (the client keeps its
// reply, the segment can be reclaimed), else the client is dropped. Then
// the queued-bytes limits, as Redis's client-output-buffer-limit.
const char* RespLoop::CheckOutputLimits(Connection* c, absl::Time now) {
  const RespLimits& lim = options_.limits;
  for (OutChunk& chunk : c->out) {
    if (chunk.pinned.value().data() == nullptr) continue;
    if (chunk.pinned_seen == absl::InfinitePast()) {
      chunk.pinned_seen = now;
      continue;
    }
    if (now - chunk.pinned_seen <= lim.max_pin_time) continue;
    const absl::string_view rest = chunk.data().substr(chunk.sent);
    if (rest.size() > lim.pin_copy_bytes) {
      counters_->limit_pin_time->Increment();
      return "reply kept a pool entry pinned longer than resp_max_pin_time";
    }
    // The copy replaces the view; dropping the pin lets the segment go.
    chunk.owned = std::string(rest);
    chunk.sent = 0;
    chunk.view = absl::string_view();
    chunk.pinned = PinnedValue();
    counters_->pins_copied->Increment();
  }
  if (lim.output_hard_limit != 0 && c->out_bytes > lim.output_hard_limit) {
    counters_->limit_output_hard->Increment();
    return "queued replies over resp_output_hard_limit";
  }
  if (lim.output_soft_limit == 0 || c->out_bytes <= lim.output_soft_limit) {
    c->over_soft_since = absl::InfiniteFuture();
  } else if (c->over_soft_since == absl::InfiniteFuture()) {
    c->over_soft_since = now;
  } else if (now - c->over_soft_since > lim.output_soft_seconds) {
    counters_->limit_output_soft->Increment();
    return "queued replies over resp_output_soft_limit for resp_output_soft_seconds";
  }
  return nullptr;
}

// Four ways a connection expires: no AUTH within auth_timeout of its accept
// (with a password), a request left incomplete for request_timeout, no
// traffic at all for idle_timeout, or replies the client has not read for
// request_timeout; and it is dropped when it breaks an output bound
// (CheckOutputLimits). Collected first, closed after:
// Close() erases from the map being iterated.
void RespLoop::CheckTimeouts() {
  const absl::Time now = LoopTime(store_->clock());
  std::vector<std::pair<Connection*, std::string>> expired;
  size_t released = 0;
  for (auto& [fd, c] : conns_) {
    // A connection quiet for a second gives back its empty input buffer
    // (64 KiB or more once it has read anything) and its spare reply strings
    // (64-128 KiB each): thousands of idle clients would otherwise keep that
    // resident. Each on its own: a connection whose input buffer is already
    // empty may still hold spare reply strings.
    // Here, not after each request, so busy connections keep reusing theirs.
    if (now - c->last_activity > absl::Seconds(1)) {
      if (c->start == c->in.size() && c->in.capacity() > 0) {
        released += c->in.capacity();
        c->in.Release();
        c->start = 0;
      }
      for (const std::string& spare : c->out_spares) released += spare.capacity();
      c->out_spares.clear();
      if (c->out.empty()) {
        released += c->out.capacity() * sizeof(OutChunk);
        c->out.Release();
      }
    }
    // CLIENT LIST's figures for this connection, as of this sweep.
    PublishStats(*c, 0);
    const bool mid_request = c->state != InputState::kCommands || c->start < c->in.size();
    // First: a stranger that keeps talking (wrong AUTHs, NOAUTH commands)
    // is never idle, and must still go.
    if (!c->authenticated && options_.limits.auth_timeout > absl::ZeroDuration() &&
        now - c->accepted_at > options_.limits.auth_timeout) {
      counters_->limit_auth_timeout->Increment();
      expired.emplace_back(c.get(), "not authenticated within resp_auth_timeout");
    } else if (mid_request && c->request_started != absl::InfiniteFuture() &&
               now - c->request_started > options_.request_timeout) {
      expired.emplace_back(c.get(), "");
    } else if (options_.idle_timeout > absl::ZeroDuration() &&
               now - c->last_activity > options_.idle_timeout && c->out.empty()) {
      expired.emplace_back(c.get(), "");
    } else if (!c->out.empty() && now - c->last_activity > options_.request_timeout) {
      // A client that stops reading its replies would otherwise pin the
      // entries being sent (and their segments) forever.
      expired.emplace_back(c.get(), "");
    } else if (!c->out.empty()) {
      if (const char* why = CheckOutputLimits(c.get(), now); why != nullptr) {
        expired.emplace_back(c.get(), why);
      }
    }
  }
  // Buffers this size come from the malloc heap, which keeps freed pages
  // resident; hand them back to the kernel once enough were freed at once.
  if (released >= (4 << 20)) ReleaseFreeHeapMemory();
  if (expired.empty()) return;
  // Best effort: tell the client why, then close. For a timeout the code
  // word comes from the codec (TIMEOUT for DeadlineExceeded) so the C++
  // client reads it back as DEADLINE_EXCEEDED; redis-cli users still see
  // "connection timed out". A limit is named (its reply queue is full, so
  // the text rarely arrives, but the counter says it all).
  std::string timed_out;
  resp::AppendStatusError(&timed_out, absl::DeadlineExceededError("connection timed out"));
  for (auto& [c, why] : expired) {
    std::string msg = timed_out;
    if (why.empty()) {
      counters_->timeouts->Increment();
    } else {
      msg.clear();
      resp::AppendError(&msg, absl::StrCat("ERR closing connection: ", why));
    }
    (void)!send(c->fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    Close(c);
  }
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
