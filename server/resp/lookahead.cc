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

// The rest of a GET or SET after its name, at `p`: the key and (for a SET)
// the value.
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

Peeked PeekOne(absl::string_view buf, size_t* pos, absl::string_view* key) {
  size_t p = *pos;
  // The usual head first (resp_head.h); the field-by-field path below gives
  // the same answers, more slowly.
  if (p <= buf.size()) {
    switch (resp::head::Match(buf.substr(p))) {
      case resp::head::Usual::kGet:
        return PeekArgs(buf, p + resp::head::kKeyLine, false, pos, key);
      case resp::head::Usual::kSet:
        return PeekArgs(buf, p + resp::head::kKeyLine, true, pos, key);
      case resp::head::Usual::kNone:
        break;
    }
  }
  uint64_t argc;
  absl::string_view name;
  if (!ReadNumberLine(buf, &p, '*', &argc) || !ReadBulk(buf, &p, &name)) return Peeked::kNone;
  if (argc == 2 && absl::EqualsIgnoreCase(name, "GET")) return PeekArgs(buf, p, false, pos, key);
  if (argc == 3 && absl::EqualsIgnoreCase(name, "SET")) return PeekArgs(buf, p, true, pos, key);
  return Peeked::kNone;
}

}  // namespace

size_t PeekKeys(absl::string_view buf, absl::string_view* keys, size_t max) {
  size_t found = 0;
  size_t pos = 0;
  while (found < max) {
    const Peeked p = PeekOne(buf, &pos, &keys[found]);
    if (p == Peeked::kNone) break;
    ++found;
    if (p == Peeked::kIncomplete) break;
  }
  return found;
}

Lookahead::Keys Lookahead::Peek(absl::string_view rest) {
  Keys out;
  size_t pos = 0;
  Peeked first;
  if (second_at_ != nullptr && rest.data() == second_at_ && rest.size() >= second_bytes_) {
    // The request peeked second last time is first now: reuse its key and
    // hash, and peek only the one after it.
    out.keys[0] = rest.substr(key_offset_, key_bytes_);
    if (has_second_hash_) {
      first_hash_ = second_hash_;
      out.first_hash = &first_hash_;
    }
    pos = second_bytes_;
    first = Peeked::kComplete;
  } else {
    first = PeekOne(rest, &pos, &out.keys[0]);
  }
  second_at_ = nullptr;
  has_second_hash_ = false;
  if (first == Peeked::kNone) return out;
  out.count = 1;
  if (first == Peeked::kIncomplete) return out;
  const size_t start = pos;
  const Peeked second = PeekOne(rest, &pos, &out.keys[1]);
  if (second == Peeked::kNone) return out;
  out.count = 2;
  if (second == Peeked::kComplete) {
    second_at_ = rest.data() + start;
    second_bytes_ = pos - start;
    key_offset_ = static_cast<size_t>(out.keys[1].data() - second_at_);
    key_bytes_ = out.keys[1].size();
  }
  return out;
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
