// Copyright 2026 The kvstore Authors.

#include "server/resp/lookahead.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "common/protocol/resp_head.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

using resp::head::ReadBulk;
using resp::head::ReadNumberLine;

// What PeekOne found at the position it was given.
enum class Peeked {
  kComplete,    // a whole GET or SET: key set, *pos past the request
  kIncomplete,  // a SET whose value has not all arrived: key set, stop after
  kNone,        // anything else, or too little to tell: stop
};

// The rest of a GET or SET after its name, at `p`, on the field-by-field
// path: the key and (for a SET) the value.
Peeked PeekArgs(absl::string_view buf, size_t p, bool is_set, size_t* pos, absl::string_view* key) {
  if (!ReadBulk(buf, &p, key)) return Peeked::kNone;
  if (is_set) {
    // The value must be all there to find the next request behind it.
    absl::string_view value;
    if (!ReadBulk(buf, &p, &value)) return Peeked::kIncomplete;
  }
  *pos = p;
  return Peeked::kComplete;
}

// The request at *pos of `buf`. The usual head is parsed as the loop's
// parser parses it, and then `out->request` is that parse; anything else
// GET- or SET-like is only read for its key.
Peeked PeekOne(absl::string_view buf, size_t* pos, const resp::RequestLimits& limits,
               absl::string_view* key, resp::UsualRequest* usual) {
  const size_t start = *pos;
  if (start <= buf.size() && resp::ParseUsualRequest(buf.substr(start), limits, usual)) {
    *key = usual->key;
    size_t end = start + usual->consumed;
    if (usual->is_set) {
      // The value and its CRLF, to find the request behind it.
      if (buf.size() - end < usual->value_len + 2 || buf[end + usual->value_len] != '\r' ||
          buf[end + usual->value_len + 1] != '\n') {
        return Peeked::kIncomplete;
      }
      end += usual->value_len + 2;
    }
    *pos = end;
    return Peeked::kComplete;
  }
  usual->consumed = 0;  // not parsed
  size_t p = start;
  uint64_t argc;
  absl::string_view name;
  if (!ReadNumberLine(buf, &p, '*', &argc) || !ReadBulk(buf, &p, &name)) return Peeked::kNone;
  if (argc == 2 && absl::EqualsIgnoreCase(name, "GET")) return PeekArgs(buf, p, false, pos, key);
  if (argc == 3 && absl::EqualsIgnoreCase(name, "SET")) return PeekArgs(buf, p, true, pos, key);
  return Peeked::kNone;
}

}  // namespace

size_t PeekKeys(absl::string_view buf, absl::string_view* keys, size_t max) {
  static const resp::RequestLimits kLimits;
  size_t found = 0;
  size_t pos = 0;
  resp::UsualRequest usual;
  while (found < max) {
    const Peeked p = PeekOne(buf, &pos, kLimits, &keys[found], &usual);
    if (p == Peeked::kNone) break;
    ++found;
    if (p == Peeked::kIncomplete) break;
  }
  return found;
}

Lookahead::Keys Lookahead::Peek(absl::string_view rest, const resp::RequestLimits& limits) {
  Keys out;
  size_t pos = 0;
  Peeked found;
  Ahead* first = &slots_[first_ ^ 1];
  if (first->at != nullptr && rest.data() == first->at && rest.size() >= first->bytes &&
      &limits == limits_) {
    // The request peeked second last time is first now: reuse its parse
    // and hash, and peek only the one after it.
    first_ ^= 1;
    pos = first->bytes;
    found = Peeked::kComplete;
  } else {
    first = &slots_[first_];
    found = PeekOne(rest, &pos, limits, &first->request.key, &first->request);
    first->at = found == Peeked::kNone ? nullptr : rest.data();
    first->bytes = pos;
    first->parsed = first->request.consumed > 0;
    first->has_hash = false;
  }
  limits_ = &limits;
  Ahead& second = slots_[first_ ^ 1];
  second.at = nullptr;
  if (found == Peeked::kNone) return out;
  out.keys[0] = first->request.key;
  out.count = 1;
  if (first->has_hash) out.first_hash = &first->hash;
  if (found == Peeked::kIncomplete) return out;
  const size_t start = pos;
  found = PeekOne(rest, &pos, limits, &out.keys[1], &second.request);
  if (found == Peeked::kNone) return out;
  out.count = 2;
  // An incomplete one is parsed again once more of it is there.
  if (found == Peeked::kComplete) {
    second.at = rest.data() + start;
    second.bytes = pos - start;
    second.request.key = out.keys[1];  // also when found field by field
    second.parsed = second.request.consumed > 0;
    second.has_hash = false;
  }
  return out;
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
