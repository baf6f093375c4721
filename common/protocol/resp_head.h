// Copyright 2026 The kvstore Authors.
//
// The head of nearly every RESP request a store serves, read the quick way:
// "*2\r\n$3\r\nGET\r\n$" and "*3\r\n$3\r\nSET\r\n$" compared as two 8-byte
// words, and lengths of at most 12 digits read without per-digit checks.
// Shared by resp::ParseRequest (its fast path) and the RESP loop's
// look-ahead (server/resp/lookahead.cc), so both recognise the same bytes.
//
// Every function here only answers "this is the usual form, and here it
// is" or "not recognised": never an error. Callers hand whatever is not
// recognised (another command, a length of 13 digits or more, a '-', a
// request cut short) to the general parser, which decides it. Pure
// functions over the caller's bytes; nothing is allocated or kept.

#ifndef KVSTORE_COMMON_PROTOCOL_RESP_HEAD_H_
#define KVSTORE_COMMON_PROTOCOL_RESP_HEAD_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace resp {
namespace head {

// Where the key's "$<len>\r\n" starts in a usual head.
inline constexpr size_t kKeyLine = 13;
// Where the command name's three letters are.
inline constexpr size_t kName = 8;

enum class Usual { kNone, kGet, kSet };

namespace internal {

// The eight bytes at `p` as a little-endian word.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint64_t Load8(const char* p) {
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

inline constexpr uint64_t kGetArray = Word("*2\r\n$3\r\n", 8);
inline constexpr uint64_t kSetArray = Word("*3\r\n$3\r\n", 8);
inline constexpr uint64_t kGetName = Word("get\r\n$", 6);
inline constexpr uint64_t kSetName = Word("set\r\n$", 6);
inline constexpr uint64_t kNameMask = Word("\xff\xff\xff\xff\xff\xff", 6);
// 0x20 on the three letters: lowers a capital, leaves a small letter, and
// only a letter's two cases end up equal to it (the bytes around are
// compared exactly).
inline constexpr uint64_t kLowerName = Word("   ", 3);

}  // namespace internal

// Whether `buf` starts with the head of a GET or SET in array form, the
// name in any case, up to and including the key's '$' (the first 14
// bytes). kNone for anything else, and for fewer than 16 bytes (the
// second word is read whole).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Usual Match(absl::string_view buf) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (buf.size() < 16) return Usual::kNone;
  using namespace internal;  // NOLINT: the word constants above
  const uint64_t array = Load8(buf.data());
  const uint64_t name = (Load8(buf.data() + kName) & kNameMask) | kLowerName;
  if (array == kGetArray && name == kGetName) return Usual::kGet;
  if (array == kSetArray && name == kSetName) return Usual::kSet;
#else
  (void)buf;
#endif
  return Usual::kNone;
}

namespace internal {

// Up to six digits and their CRLF in one word, as in "4096\r\n..": the
// digit count, and their value in *n; 0 when the word holds anything else
// (no digit first, seven or eight digits, or no CRLF right behind them).
// Every step is exact: see ReadNumberLine's test.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline int ShortNumberInWord(uint64_t w, uint64_t* n) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  // Each byte minus '0'. Bytes up to the first non-digit borrow nothing, so
  // that one reads exactly; what comes after it is never looked at.
  const uint64_t t = w - '0' * kOnes;
  // Bit 7 of a byte set when it is not a digit: below '0' (or far above:
  // bit 7 of t itself), or from ':' up (t + 0x76 reaches 0x80). Digits
  // below it never carry into it.
  const uint64_t not_digit = (t | (t + 0x76 * kOnes)) & (0x80 * kOnes);
  if (not_digit == 0) return 0;
  const int count = __builtin_ctzll(not_digit) >> 3;
  if (count == 0 || count > 6 || ((w >> (8 * count)) & 0xffff) != Word("\r\n", 2)) return 0;
  // The digits to the word's top (leading zeros below them), then pairs,
  // fours and eights of digits combined: the first digit is the lowest
  // byte, so it is the most significant each time.
  uint64_t v = t << (8 * (8 - count));
  v = (v * 10 + (v >> 8)) & 0x00ff00ff00ff00ff;
  v = (v * 100 + (v >> 16)) & 0x0000ffff0000ffff;
  v = (v * 10000 + (v >> 32)) & 0xffffffff;
  *n = v;
  return count;
}

}  // namespace internal

// Reads "<prefix><1-12 digits>\r\n" at `*pos` and advances past it. False
// (nothing changed) for anything else: another byte, a sign, 13 digits or
// more (2^40 > 10^12 - 1: no length a store accepts), or too few bytes.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool ReadNumberLine(absl::string_view buf, size_t* pos,
                                                        char prefix, uint64_t* n) {
  if (*pos >= buf.size() || buf[*pos] != prefix) return false;
  const char* const end = buf.data() + buf.size();
  const char* const digits = buf.data() + *pos + 1;
  // A key's length is mostly one or two digits: read them directly (the
  // word path below costs about three times as many instructions).
  if (end - digits >= 4) {
    const unsigned d0 = static_cast<unsigned char>(digits[0]) - unsigned{'0'};
    if (d0 <= 9) {
      if (digits[1] == '\r' && digits[2] == '\n') {
        *n = d0;
        *pos += 4;
        return true;
      }
      const unsigned d1 = static_cast<unsigned char>(digits[1]) - unsigned{'0'};
      if (d1 <= 9 && digits[2] == '\r' && digits[3] == '\n') {
        *n = d0 * 10 + d1;
        *pos += 5;
        return true;
      }
    }
  }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // Nearly every length is short and has eight bytes behind its prefix.
  if (end - digits >= 8) {
    if (const int count = internal::ShortNumberInWord(internal::Load8(digits), n); count > 0) {
      *pos += 1 + static_cast<size_t>(count) + 2;
      return true;
    }
  }
#endif
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

// Reads "$<len>\r\n<bytes>\r\n" at `*pos`: `bytes` gets the body and *pos
// moves past its CRLF. False (nothing changed) when any of it is missing
// or malformed.
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

}  // namespace head
}  // namespace resp
}  // namespace kvstore

#endif  // KVSTORE_COMMON_PROTOCOL_RESP_HEAD_H_
