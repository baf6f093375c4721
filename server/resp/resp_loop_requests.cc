// Copyright 2026 The kvstore Authors.
//
// RespLoop, running what a connection sent: each request parsed (the usual
// GET and SET on their fast path, or handed over already parsed by the
// look-ahead), a streamed SET begun and fed its value, every other command
// dispatched through the command table, and the look-ahead's prefetch of
// the next keys. Kept apart from resp_loop.cc, which moves the bytes.

#include <string>

#include "absl/base/attributes.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/net/batch_scope.h"
#include "server/resp/auth_commands.h"
#include "server/resp/commands.h"
#include "server/resp/resp_loop.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// After a framing error the rest of the input cannot be trusted to be
// aligned on a request, so it is dropped and nothing more is read.
void RespLoop::ProtocolError(Connection* c, absl::string_view msg) {
  counters_->protocol_errors->Increment();
  c->ReplyStatus(absl::InvalidArgumentError(msg));  // "ERR <msg>"
  c->close_after_flush = true;
  c->reading = false;
  c->in.clear();
  c->start = 0;
}

// A request that cannot run yet (kNeedMore, `buffered` bytes of it so far)
// or at all (kError).
void RespLoop::NotRunnable(Connection* c, resp::ParsedRequest& req, size_t buffered) {
  if (req.kind == resp::ParsedRequest::Kind::kError) {
    // The parser's text already starts with "Protocol error"; its size
    // check is the query-buffer bound, so say which flag sets it.
    if (absl::StartsWith(req.error, "Protocol error: request larger than")) {
      counters_->limit_query_buffer->Increment();
      req.error += " (resp_max_query_buffer)";
    }
    ProtocolError(c, req.error);
    return;
  }
  // Lengths are checked as they are parsed; this also bounds input that
  // has no length (a line without its CRLF).
  if (buffered > LimitsFor(*c).max_buffered_bytes) {
    counters_->limit_query_buffer->Increment();
    ProtocolError(
        c, absl::StrCat("Protocol error: incomplete request over ", "resp_max_query_buffer (",
                        LimitsFor(*c).max_buffered_bytes, " bytes)"));
    return;
  }
  // The request timeout runs from the first incomplete attempt.
  if (c->request_started == absl::InfiniteFuture()) c->request_started = LoopTime(store_->clock());
}

// The streamed SET of `key` whose header, `consumed` bytes at the start of
// `buf`, was just parsed: false when it has to wait for the connection's
// parked SETs (Unpark() runs it), otherwise it is begun and the input moves
// past its header. Inlined: it is Process()'s inner loop.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool RespLoop::StartSet(Connection* c, absl::string_view buf,
                                                            const resp::RequestLimits& limits,
                                                            absl::string_view key,
                                                            uint64_t value_len, size_t consumed,
                                                            const layout::KeyHash* key_hash) {
  if (c->parked > 0 && !MayParkBehind(*c, key)) {
    c->blocked_on_park = true;
    return false;
  }
  // Behind a parked SET the next are most likely parked too, and their
  // index places are loaded when their replies come (last_parked()).
  if (buf.size() - consumed > value_len + 2 && !sets_->last_parked()) {
    PrefetchAhead(limits, buf.substr(consumed + value_len + 2));
  }
  c->start += consumed;
  c->request_started = wake_time_;  // no clock read per SET (wake_time_)
  c->set_started_ns = wake_ns_;
  counters_->commands->Increment();
  static const CommandSpec* const kSetSpec = FindCommand("SET");
  NoteCommand(*c, kSetSpec);
  // `key` still points into c->in: nothing has moved it.
  BeginSet(c, key, value_len, key_hash);
  return true;
}

// Hands the buffered input to the streamed SET in progress: true once it
// is done (Process() goes on), false when Process() has to stop.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool RespLoop::FeedSet(Connection* c) {
  switch (sets_->ConsumeBuffered(c)) {
    case StreamedSet::Progress::kNeedMore:
      return false;
    case StreamedSet::Progress::kHeldBack:
      // Not read again until RetryHeldBack() gets it going: the requests
      // pipelined behind the SET wait with it, in order.
      held_back_.insert(c->fd);
      return false;
    case StreamedSet::Progress::kBadTerminator:
      ProtocolError(c, "Protocol error: SET value not terminated by CRLF");
      return false;
    case StreamedSet::Progress::kDone:
      break;
  }
  return true;
}

// Everything parsed (no view into the buffer outlives this): lend the read
// buffer back to the loop, so only connections with a partial request hold
// one.
void RespLoop::LendInputBack(Connection* c) {
  c->request_started = absl::InfiniteFuture();
  c->in.clear();
  c->start = 0;
  if (c->in.capacity() > spare_.capacity()) c->in.swap(spare_);
}

// Runs requests until the input is used up, a request is incomplete, the
// output limit is reached or the connection is marked to close. Streamed
// SET values in the input are handed to StreamedSet as they come up.
void RespLoop::Process(Connection* c) {
  // The SETs parked below are replicated as one batch. Safe to hold back:
  // while any is parked no other request of this connection runs (it might
  // block on what they hold), and the scope ends before another
  // connection's requests do.
  net::BatchScope batch;
  // Bytes may have been read or moved since the last call: nothing the
  // look-ahead remembers is reused (lookahead.h).
  lookahead_.Forget();
  while (!c->close_after_flush) {
    if (c->state != InputState::kCommands) {
      if (!FeedSet(c)) return;
      continue;
    }
    const absl::string_view buf = c->in.view(c->start);
    if (buf.empty()) {
      LendInputBack(c);
      return;
    }
    // Backpressure: Flush() resumes processing once the client has read.
    if (c->out_bytes > options_.max_pending_output) return;
    const resp::RequestLimits& limits = LimitsFor(*c);
    // The usual GET and SET are parsed without a ParsedRequest, or not at
    // all when the look-ahead parsed them a request ago (then a SET's
    // commit also takes the key's hash computed then). A SET needs no
    // ParsedRequest at all.
    resp::UsualRequest usual;
    layout::KeyHash key_hash;
    bool has_key_hash = false;
    bool is_usual;
    if (const Lookahead::Ahead* ahead = lookahead_.TakeParsed(buf, limits); ahead != nullptr) {
      // Copied now: the next Peek() reuses its place.
      usual = ahead->request;
      key_hash = ahead->hash;
      has_key_hash = ahead->has_hash;
      is_usual = true;
    } else {
      is_usual = resp::ParseUsualRequest(buf, limits, &usual);
    }
    if (is_usual && usual.is_set) {
      if (!StartSet(c, buf, limits, usual.key, usual.value_len, usual.consumed,
                    has_key_hash ? &key_hash : nullptr)) {
        return;
      }
      continue;
    }
    resp::ParsedRequest req;
    if (is_usual) {
      resp::FillParsed(usual, &req);
    } else {
      resp::ParseRequestInto(buf, limits, &req);
    }
    switch (req.kind) {
      case resp::ParsedRequest::Kind::kNeedMore:
      case resp::ParsedRequest::Kind::kError:
        NotRunnable(c, req, buf.size());
        return;
      case resp::ParsedRequest::Kind::kSetValue:
        if (!StartSet(c, buf, limits, req.args[1], req.value_len, req.consumed, nullptr)) return;
        continue;
      case resp::ParsedRequest::Kind::kCommand:
        if (c->parked > 0) {
          // It may read what the parked SETs write: it runs after them.
          c->blocked_on_park = true;
          return;
        }
        PrefetchAhead(limits, buf.substr(req.consumed));
        // Views into c->in stay valid: nothing below moves the buffer.
        Execute(c, req);
        c->start += req.consumed;
        c->request_started = absl::InfiniteFuture();
        continue;
      case resp::ParsedRequest::Kind::kEmptyLine:  // nothing to run, as in Redis
        c->start += req.consumed;
        c->request_started = absl::InfiniteFuture();
        continue;
    }
  }
}

// Two stages, as the keys' turns come one after the other: the next key's
// buckets were requested one request ago, so now its entries can be; the
// key after it gets its buckets requested.
void RespLoop::PrefetchAhead(const resp::RequestLimits& limits, absl::string_view rest) {
  if (rest.empty()) return;
  const Lookahead::Keys k = lookahead_.Peek(rest, limits);
  if (k.first_hash != nullptr) {
    store_->PrefetchEntries(*k.first_hash);
  } else if (k.count >= 1) {
    const layout::KeyHash h = store_->PrefetchBuckets(k.keys[0]);
    store_->PrefetchEntries(h);
    lookahead_.RememberFirst(h);
  }
  if (k.count >= 2) lookahead_.Remember(store_->PrefetchBuckets(k.keys[1]));
}

// Everything except the streamed SET goes through the command table.
void RespLoop::Execute(Connection* c, const resp::ParsedRequest& req) {
  counters_->commands->Increment();
  // Looked up once, for the client registry and the dispatch.
  const CommandSpec* spec = FindCommand(req.args[0]);
  NoteCommand(*c, spec);
  if (c->in_unauth_list &&
      (resp::CommandIs(req.args[0], "AUTH") || resp::CommandIs(req.args[0], "HELLO"))) {
    ExecuteLogin(c, req);
    return;
  }
  // An inline "SET key value" arrives here too (only the array form is
  // streamed) and is run by the table's SET, as SET with options is.
  if (parking_ != nullptr && ParkCommand(c, req, spec)) return;
  const CommandContext ctx{store_, writer_.get(), &options_, counters_, c, ids_};
  DispatchCommand(ctx, req.args, spec);
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
