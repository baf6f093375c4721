// Copyright 2026 The kvstore Authors.

#include "server/resp/lookahead.h"

#include <cstdint>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/match.h"

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

// Reads "<prefix><digits>\r\n" at `*pos`; advances past it. At most 12
// digits (under 2^40) are read; longer numbers are refused (the real parser
// has the real limits).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ReadNumberLine(absl::string_view buf, size_t* pos,
                                                        char prefix, uint64_t* n) {
  if (*pos >= buf.size() || buf[*pos] != prefix) return false;
  const char* const end = buf.data() + buf.size();
  const char* const digits = buf.data() + *pos + 1;
  const char* const stop = end - digits > 12 ? digits + 12 : end;
  const char* p = digits;
  uint64_t v = 0;
  for (; p < stop; ++p) {
    const unsigned d = static_cast<unsigned char>(*p) - unsigned{'0'};
    if (d > 9) break;
    v = v * 10 + d;
  }
  if (p == digits || end - p < 2 || p[0] != '\r' || p[1] != '\n') return false;
  *pos = static_cast<size_t>(p + 2 - buf.data());
  *n = v;
  return true;
}

// Reads "$<len>\r\n<bytes>\r\n"; `bytes` gets the body. False when any of
// it is missing.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ReadBulk(absl::string_view buf, size_t* pos,
                                                  absl::string_view* bytes) {
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

// The eight bytes at `p` as a little-endian word.
uint64_t Load8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof(w));
  return w;
}

// `s`'s first `n` bytes (n <= 8) as Load8 would read them.
constexpr uint64_t Word(const char* s, int n) {
  uint64_t w = 0;
  for (int i = n - 1; i >= 0; --i) w = w << 8 | static_cast<unsigned char>(s[i]);
  return w;
}

// The head of nearly every pipelined GET and SET: the array and the name's
// length, then a three-letter name and the key's '$'. Compared as two words
// (the name's letters lowered with 0x20, which only a letter's two cases
// survive), instead of three length lines and a case-blind compare; the
// field-by-field path below gives the same answers, more slowly.
constexpr uint64_t kGetArray = Word("*2\r\n$3\r\n", 8);
constexpr uint64_t kSetArray = Word("*3\r\n$3\r\n", 8);
constexpr uint64_t kGetName = Word("get\r\n$", 6);
constexpr uint64_t kSetName = Word("set\r\n$", 6);
constexpr uint64_t kNameMask = Word("\xff\xff\xff\xff\xff\xff", 6);
constexpr uint64_t kLowerName = Word("   ", 3);  // 0x20 on the three letters

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
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (p <= buf.size() && buf.size() - p >= 16) {
    const uint64_t array = Load8(buf.data() + p);
    const uint64_t name = (Load8(buf.data() + p + 8) & kNameMask) | kLowerName;
    // 13 bytes: up to the key's '$', which ReadBulk reads again.
    if (array == kGetArray && name == kGetName) return PeekArgs(buf, p + 13, false, pos, key);
    if (array == kSetArray && name == kSetName) return PeekArgs(buf, p + 13, true, pos, key);
  }
#endif
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
