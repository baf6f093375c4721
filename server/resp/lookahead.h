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
// comes. Nothing is allocated. Thread-compatible (a pure function).

#ifndef KVSTORE_SERVER_RESP_LOOKAHEAD_H_
#define KVSTORE_SERVER_RESP_LOOKAHEAD_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace kvstore {
namespace server {
namespace resp_internal {

// Writes to keys[0..) the keys of up to `max` consecutive requests at the
// start of `buf` that are "GET key" or "SET key value" in RESP array form
// (command name in any case), and returns how many. Stops at the first
// request that is anything else or incomplete; a SET whose value has not
// fully arrived still yields its key but ends the peek.
size_t PeekKeys(absl::string_view buf, absl::string_view* keys, size_t max);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_LOOKAHEAD_H_
