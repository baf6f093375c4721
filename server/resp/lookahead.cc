// Copyright 2026 The kvstore Authors.

#include "server/resp/lookahead.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

// Reads "<prefix><digits>\r\n" at `*pos`; advances past it. Lengths beyond
// 2^40 are refused (the real parser has the real limits).
bool ReadNumberLine(absl::string_view buf, size_t* pos, char prefix, uint64_t* n) {
  size_t p = *pos;
  if (p >= buf.size() || buf[p] != prefix) return false;
  ++p;
  uint64_t v = 0;
  const size_t digits_start = p;
  while (p < buf.size() && absl::ascii_isdigit(static_cast<unsigned char>(buf[p]))) {
    v = v * 10 + static_cast<uint64_t>(buf[p] - '0');
    if (v > (uint64_t{1} << 40)) return false;
    ++p;
  }
  if (p == digits_start || p + 1 >= buf.size() || buf[p] != '\r' || buf[p + 1] != '\n') {
    return false;
  }
  *pos = p + 2;
  *n = v;
  return true;
}

// Reads "$<len>\r\n<bytes>\r\n"; `bytes` gets the body. False when any of
// it is missing.
bool ReadBulk(absl::string_view buf, size_t* pos, absl::string_view* bytes) {
  uint64_t len;
  size_t p = *pos;
  if (!ReadNumberLine(buf, &p, '$', &len)) return false;
  if (buf.size() - p < len + 2 || buf[p + len] != '\r' || buf[p + len + 1] != '\n') return false;
  *bytes = buf.substr(p, len);
  *pos = p + len + 2;
  return true;
}

// What PeekOne found at the position it was given.
enum class Peeked {
  kComplete,    // a whole GET or SET: key set, *pos past the request
  kIncomplete,  // a SET whose value has not all arrived: key set, stop after
  kNone,        // anything else, or too little to tell: stop
};

Peeked PeekOne(absl::string_view buf, size_t* pos, absl::string_view* key) {
  uint64_t argc;
  absl::string_view name, value;
  size_t p = *pos;
  if (!ReadNumberLine(buf, &p, '*', &argc) || !ReadBulk(buf, &p, &name) ||
      !ReadBulk(buf, &p, key)) {
    return Peeked::kNone;
  }
  if (argc == 2 && absl::EqualsIgnoreCase(name, "GET")) {
    *pos = p;
    return Peeked::kComplete;
  }
  if (argc != 3 || !absl::EqualsIgnoreCase(name, "SET")) return Peeked::kNone;
  // The value must be all there to find the next request behind it.
  if (!ReadBulk(buf, &p, &value)) return Peeked::kIncomplete;
  *pos = p;
  return Peeked::kComplete;
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
