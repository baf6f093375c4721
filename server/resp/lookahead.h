// Copyright 2026 The kvstore Authors.
//
// PeekKeys: the keys of the plain GET and SET requests waiting in a
// connection's input, found without parsing them properly. With pipelining
// the loop has the next requests in hand while it serves the current one;
// starting the index and entry cache misses of the next keys early (see
// KvStore::Prefetch) overlaps them with the current request's work.
//
// Only a hint: anything it does not recognise (other commands, inline
// commands, a request split across reads) simply stops the peek, and every
// request is still parsed and checked by resp::ParseRequest when its turn
// comes. Nothing is allocated. PeekKeys is a pure function; a Lookahead is
// thread-compatible (one per loop).

#ifndef KVSTORE_SERVER_RESP_LOOKAHEAD_H_
#define KVSTORE_SERVER_RESP_LOOKAHEAD_H_

#include <cstddef>

#include "absl/strings/string_view.h"
#include "common/protocol/layout.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// Writes to keys[0..) the keys of up to `max` consecutive requests at the
// start of `buf` that are "GET key" or "SET key value" in RESP array form
// (command name in any case), and returns how many. Stops at the first
// request that is anything else or incomplete; a SET whose value has not
// fully arrived still yields its key but ends the peek.
size_t PeekKeys(absl::string_view buf, absl::string_view* keys, size_t max);

// The two-stage look-ahead of one RESP loop over a pipeline: before each
// request runs, the keys of the next two (PeekKeys(rest, keys, 2)). Each
// request would so be peeked twice, once as the second key (its buckets are
// requested) and once as the first (its entries are); this remembers the
// second request of the last call, so when the next call's input starts
// where it started (the same connection, its buffer unmoved) only one new
// request is peeked, and the hash the caller computed for it is handed back.
//
// What is remembered is only trusted as a hint: a buffer that moved, or was
// freed and reused at the same address with other bytes, at worst prefetches
// the wrong key. It is never read outside `rest`.
class Lookahead {
 public:
  struct Keys {
    size_t count = 0;  // how many of keys[] are set: 0, 1 or 2
    absl::string_view keys[2];
    // keys[0]'s hash, when the previous call peeked it as its second key
    // and the caller gave Remember() one; otherwise null. Valid until the
    // next call.
    const layout::KeyHash* first_hash = nullptr;
  };

  // The keys of up to two requests at the start of `rest`, as PeekKeys.
  Keys Peek(absl::string_view rest);
  // The hash of the last Peek()'s keys[1], for the next Peek().
  void Remember(const layout::KeyHash& h) {
    second_hash_ = h;
    has_second_hash_ = true;
  }

 private:
  // The last Peek()'s second request: where it began, its length, and its
  // key's place within it. Null when there was none (or it was incomplete).
  const char* second_at_ = nullptr;
  size_t second_bytes_ = 0;
  size_t key_offset_ = 0;
  size_t key_bytes_ = 0;
  layout::KeyHash second_hash_{};
  bool has_second_hash_ = false;
  layout::KeyHash first_hash_{};
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_LOOKAHEAD_H_
