// Copyright 2026 The kvstore Authors.
//
// Connection: the state of one client socket of a RESP loop: its unparsed
// input, where it is in the request stream (commands, or the middle of a
// streamed SET value) and its queue of reply bytes. Internal to server/resp.
//
// Replies are appended with the Reply* methods, which encode through the
// RESP codec (common/protocol/resp.h) in the connection's protocol: RESP2
// until HELLO 3 switches it to RESP3 (HELLO 2 switches back). Only the
// shapes that differ depend on it (null, map, set, double, boolean,
// verbatim string); every other reply is the same in both. Small replies
// are coalesced into one owned string; a GET value is queued as a separate
// chunk pointing into pool memory that stays pinned until the chunk has
// been written (zero copy).
//
// Ownership and thread safety: a Connection is owned by exactly one
// RespLoop, lives in that loop's connection map and is touched only by the
// loop's thread; it does not own or close its fd (the loop does). Its
// ClientHandle registers it with the port's ClientRegistry, which other
// loops read under the registry's own rules (client_registry.h).

#ifndef KVSTORE_SERVER_RESP_CONNECTION_H_
#define KVSTORE_SERVER_RESP_CONNECTION_H_

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/auth/principal.h"
#include "common/protocol/layout.h"
#include "server/resp/client_registry.h"
#include "server/resp/input_buffer.h"
#include "server/resp/ring_queue.h"
#include "server/storage/clock.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {

// The RESP loops keep time on their store's steady clock (KvStore::clock():
// the real one, or a test's fake, so that timeouts and waits end when the
// test says), as an absl::Time since the epoch so that the times kept per
// connection can be compared and subtracted directly.
inline absl::Time LoopTime(const Clock& clock) { return absl::UnixEpoch() + clock.Steady(); }
namespace resp_internal {

// What Connection::parked_keys holds for a parked SET's key.
inline uint64_t ParkedKeyHash(absl::string_view key) {
  return absl::Hash<absl::string_view>{}(key);
}

// One piece of queued reply output: either bytes owned here, or a view into
// a pinned pool entry (a GET value sent without copying).
struct OutChunk {
  std::string owned;
  PinnedValue pinned;  // when set, `view` points into pool memory
  absl::string_view view;
  size_t sent = 0;  // bytes of data() already written to the socket
  // When the loop first saw this pinned chunk queued (InfinitePast until
  // then): stamped by the once-a-second sweep, not per GET, so the bound
  // RespLimits::max_pin_time holds to within a second at no hot-path cost.
  absl::Time pinned_seen = absl::InfinitePast();
  // The place of a reply not known yet (a parked SET's, commit_pool.h):
  // nothing from here on is written until Connection::Answer() fills it,
  // so replies leave in request order. `held_id` names it.
  bool held = false;
  uint64_t held_id = 0;
  absl::string_view data() const { return pinned.value().data() ? view : absl::string_view(owned); }
};

// Where a connection is in its input stream.
enum class InputState {
  kCommands,   // parsing requests from `in`
  kValue,      // receiving a streamed SET value into its reserved entry
  kValueCrlf,  // the value is complete; its closing CRLF must follow
  kDiscard,    // skipping the value of a refused SET (then back to kCommands)
};

// A plain aggregate on purpose: the loop and the streamed SET both drive
// these fields directly; the reply methods are the only behaviour here.
struct Connection {
  explicit Connection(int fd_in) : fd(fd_in) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // --- Replies. Each appends one encoded reply to the output queue and
  // counts its bytes in out_bytes; nothing is written to the socket until
  // the loop flushes. None fail.
  void ReplyOk();
  void ReplySimple(absl::string_view s);  // s must not contain CR/LF
  // `text` is "<CODEWORD> message"; CR/LF in it are replaced by spaces.
  void ReplyError(absl::string_view text);
  // +OK for an OK status, else the error its code word names
  // (resp::StatusToRespError).
  void ReplyStatus(const absl::Status& s);
  void ReplyInteger(int64_t n);
  // "No such key" and a missing element: RESP2 $-1, RESP3 _.
  void ReplyNull();
  void ReplyBulk(absl::string_view s);
  void ReplyArrayHeader(uint64_t n);
  // n key/value pairs (2n replies) follow: RESP3 %n, RESP2 the flat array
  // *2n that Redis sends RESP2 clients for a map (HELLO, CONFIG GET).
  void ReplyMapHeader(uint64_t n);
  // n members follow: RESP3 ~n, RESP2 *n.
  void ReplySetHeader(uint64_t n);
  // RESP3 ,<d> ("inf", "-inf", "nan" or the shortest text that reads back
  // as d: resp::FormatDouble); RESP2 that text as a bulk string.
  void ReplyDouble(double d);
  // RESP3 #t / #f; RESP2 :1 / :0.
  void ReplyBool(bool b);
  // Text meant for people (CLIENT INFO, CLIENT LIST): RESP3 a verbatim
  // string "=len txt:<text>", RESP2 a bulk string.
  void ReplyVerbatim(absl::string_view text);
  // A bulk reply whose body is sent from the pinned entry itself: only the
  // "$len" header and trailing CRLF are copied. Keeps `v` pinned until sent.
  void ReplyPinned(PinnedValue v);
  // Reply bytes already encoded (in this connection's protocol): a parked
  // command's, run on a worker against a stand-in connection.
  void ReplyEncoded(absl::string_view bytes);
  // A GET value: values up to kCopyValueBytes are copied into the reply
  // (one memcpy is cheaper than pinning the entry, queueing a chunk for it
  // and handing writev one more iovec) and the pin ends at once; larger
  // ones go out zero-copy through ReplyPinned().
  void ReplyValue(PinnedValue v);
  // Copied only while the current reply string has room for them (a long
  // pipeline of GETs sends the rest zero-copy instead of reallocating).
  static constexpr size_t kCopyValueBytes = 16 << 10;
  // Capacity of a new reply string.
  static constexpr size_t kOutChunkBytes = 64 << 10;

  // The flush wrote an owned chunk completely: keep its string for reuse
  // when it has a reply string's capacity but not much more, and fewer than
  // kOutSpares are kept.
  void RecycleOwned(std::string&& s);

  const int fd;
  // Unique among the loop's connections over its life (fds are reused):
  // what a parked SET's outcome finds its connection by.
  uint64_t serial = 0;
  // Streamed SETs of this connection that are parked (commit_pool.h), and
  // their keys' hashes (ParkedKeyHash). While any is, only more streamed
  // SETs of other keys run (pipelined SETs go out together); any other
  // request waits, unread input with it (blocked_on_park), until they are
  // all answered. By hash: two keys that collide only make the second SET
  // wait as if it were the same key, which is always safe.
  uint32_t parked = 0;
  std::vector<uint64_t> parked_keys;
  bool blocked_on_park = false;
  // One of the parked is a whole write command (RespLoop::ParkCommand),
  // counted in `parked`: nothing else of the connection runs until it is
  // answered, not even a SET of another key (its keys are not tracked).
  bool command_parked = false;
  uint64_t next_held_id = 0;

  // Queues the place of a reply that is not known yet; returns its id.
  uint64_t Hold();
  // Fills held reply `id` by running `reply` (Reply* calls on this
  // connection write into its place). No-op for an unknown id. `reply`
  // must only encode (no value sent zero-copy): a chunk it queued would go
  // to the end of `out`, and queueing may move the held place (the ring
  // grows by moving its slots).
  template <typename Fn>
  void Answer(uint64_t id, Fn reply) {
    for (OutChunk& chunk : out) {
      if (!chunk.held || chunk.held_id != id) continue;
      reply_into_ = &chunk.owned;
      reply();
      reply_into_ = nullptr;
      chunk.held = false;
      return;
    }
  }
  // Whether the first queued chunk can be written (it is not held).
  bool Writable() const { return !out.empty() && !out.front().held; }
  // 2 or 3: the RESP version HELLO chose (auth_commands.h).
  int protocol = 2;
  // The registration CLIENT LIST and CLIENT KILL see (empty when the
  // connection was built without a registry).
  ClientHandle client;
  // False until AUTH / HELLO AUTH succeeds when the server has users; only
  // AUTH, HELLO and QUIT are served before that (auth_commands.h).
  bool authenticated = true;
  // The authenticated user and its role: what the command table lets the
  // connection run (commands.h). An admin without users (open server).
  std::string user = "default";
  auth::Role role = auth::Role::kAdmin;
  // While unauthenticated (password set): its place in the loop's list of
  // unauthenticated connections, oldest first, which the per-loop cap
  // (RespLimits::max_unauthenticated_clients) trims from the front. Such a
  // connection holds no max_clients slot; it takes one when AUTH succeeds.
  bool in_unauth_list = false;
  std::list<Connection*>::iterator unauth_pos;
  // Cluster mode: READONLY was sent (READWRITE clears it), so reads may be
  // served by an in-sync backup of the key's shard (cluster_routing.h).
  bool readonly = false;
  InputBuffer in;  // received, unparsed bytes are in[start, in.size())
  size_t start = 0;
  InputState state = InputState::kCommands;

  // The streamed SET in progress (kValue/kValueCrlf), or the refused one
  // being skipped (kDiscard). See streamed_set.h.
  Reservation reservation;  // the SET's entry; ptr is null when none
  // The SET's key until its entry is reserved: reservation is lazy, made
  // when the first value byte arrives, so a header alone holds no pool.
  std::string pending_key;
  uint64_t budget_taken = 0;  // bytes of the shared in-flight SET budget held
  uint64_t value_done = 0;    // value bytes received so far
  uint64_t value_len = 0;
  // The entry's checksum is in place already: the value arrived whole with
  // its request and was copied and hashed in one pass (FillAndSealEntry).
  bool entry_sealed = false;
  // KvIndex::Hash() of the SET's key, when the loop's look-ahead computed it
  // (lookahead.h): the commit then does not hash the key again.
  // request_started as the clock's SteadyNanos(), for the SET's latency
  // (put.duration) in integer arithmetic.
  int64_t set_started_ns = 0;
  bool has_key_hash = false;
  layout::KeyHash key_hash{};
  uint64_t discard_left = 0;  // kDiscard: bytes still to skip, CRLF included
  // A SET held back (kValue, nothing reserved yet) because the pool was
  // full of segments in their grace period: until when it may wait before
  // it is refused. InfinitePast when not held back. Reading stops meanwhile.
  absl::Time space_wait_until = absl::InfinitePast();
  bool held_back() const { return space_wait_until != absl::InfinitePast(); }

  // The epoll events the socket is registered for, so that the loop calls
  // epoll_ctl only when they change (not once per request).
  uint32_t epoll_events = 0;

  RingQueue<OutChunk> out;  // reply bytes not yet written, in order
  // Owned chunks' strings, kept (empty) after their bytes were sent so that
  // later replies reuse their capacity instead of allocating; see Tail().
  // Two: a value sent zero-copy splits the reply string (header before it,
  // trailer after), so a pipelined batch that ends in one fills two owned
  // chunks before they are written, and with one spare every such batch
  // allocated and freed a 64 KiB string.
  static constexpr size_t kOutSpares = 2;
  absl::InlinedVector<std::string, kOutSpares> out_spares;
  size_t out_bytes = 0;  // roughly the bytes in `out` (for backpressure)
  bool close_after_flush = false;
  bool reading = true;  // false once no further requests will be read
  // The last buffered read filled its whole room: more may be waiting.
  bool read_filled = false;
  // These times, pinned_seen and space_wait_until are loop time (LoopTime()).
  absl::Time accepted_at;  // for RespLimits::auth_timeout
  absl::Time last_activity;
  absl::Time request_started = absl::InfiniteFuture();
  // Since when out_bytes has been above RespLimits::output_soft_limit.
  absl::Time over_soft_since = absl::InfiniteFuture();

 private:
  // The owned chunk at the end of the queue, appended if the last chunk is a
  // pinned value (whose bytes must not be appended to) or held; inside
  // Answer(), the held chunk being filled.
  std::string& Tail() {
    // Inline for the usual case, an owned chunk last in the queue: every
    // reply of a pipeline appends to it.
    if (reply_into_ == nullptr && !out.empty()) {
      OutChunk& last = out.back();
      if (!last.held && last.pinned.value().data() == nullptr) return last.owned;
    }
    return TailSlow();
  }
  std::string& TailSlow();
  std::string* reply_into_ = nullptr;
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_CONNECTION_H_
