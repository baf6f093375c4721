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
#include "common/protocol/resp.h"

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
// where it started only one new request is peeked, and the hash the caller
// computed for it is handed back.
//
// A usual GET or SET (resp::ParseUsualRequest) is parsed, with the
// connection's limits, exactly as the loop's parser would parse it; when
// its turn comes TakeParsed() hands that parse, and its key's hash, to the
// loop instead of it parsing and hashing the key again.
//
// Valid only while the input is unchanged: the loop calls Forget() each time
// it starts on a connection's input (new bytes may have been read, the
// buffer may have moved or been reused), and between two calls of one
// Process() nothing writes to the input at or after the requests peeked.
// Within that, a reuse is further matched by address, length and the
// limits object. Nothing outside `rest` is ever read.
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

  // The keys of up to two requests at the start of `rest`, as PeekKeys;
  // the usual ones parsed under `limits`, which must outlive this object's
  // use of them (the loop's own).
  Keys Peek(absl::string_view rest, const resp::RequestLimits& limits);
  // The hash of the last Peek()'s keys[1], for the next Peek() and, as
  // that request's turn comes, for TakeParsed().
  void Remember(const layout::KeyHash& h) {
    Ahead& second = slots_[first_ ^ 1];
    second.hash = h;
    second.has_hash = true;
  }
  // The hash of the last Peek()'s keys[0], when it came without one.
  void RememberFirst(const layout::KeyHash& h) {
    Ahead& first = slots_[first_];
    first.hash = h;
    first.has_hash = true;
  }

  // A request a Peek() found.
  struct Ahead {
    const char* at = nullptr;  // where it begins in the input; null: none
    size_t bytes = 0;          // all of it (a SET's value and CRLF included)
    bool parsed = false;       // `request` is ParseUsualRequest()'s
    bool has_hash = false;     // `hash` is its key's KvIndex::Hash()
    resp::UsualRequest request;
    layout::KeyHash hash{};
  };
  // The request that starts `buf` when the last Peek() parsed it as its
  // keys[0] under these same limits (the same object): its parse is what
  // resp::ParseUsualRequest(buf, limits) gives. Null otherwise, and then
  // the caller parses it. At most once per Peek(); valid until the next
  // Peek() or Forget().
  const Ahead* TakeParsed(absl::string_view buf, const resp::RequestLimits& limits) {
    Ahead& first = slots_[first_];
    if (first.at != buf.data() || !first.parsed || &limits != limits_ ||
        buf.size() < first.request.consumed) {
      return nullptr;
    }
    first.parsed = false;
    return &first;
  }

  // Drops everything remembered: the input may change before the next call.
  void Forget() {
    slots_[0].at = nullptr;
    slots_[1].at = nullptr;
  }

 private:
  // The last Peek()'s keys[0] is slots_[first_]; its keys[1], when that
  // request was complete, slots_[first_ ^ 1]. The next Peek() that finds
  // the input starting at the second only flips first_.
  Ahead slots_[2];
  int first_ = 0;
  const resp::RequestLimits* limits_ = nullptr;  // what both were parsed under
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_LOOKAHEAD_H_
