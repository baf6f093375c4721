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

}  // namespace

size_t PeekKeys(absl::string_view buf, absl::string_view* keys, size_t max) {
  size_t found = 0;
  size_t pos = 0;
  while (found < max) {
    uint64_t argc;
    absl::string_view name, key, value;
    if (!ReadNumberLine(buf, &pos, '*', &argc) || !ReadBulk(buf, &pos, &name) ||
        !ReadBulk(buf, &pos, &key)) {
      break;
    }
    if (argc == 2 && absl::EqualsIgnoreCase(name, "GET")) {
      keys[found++] = key;
      continue;
    }
    if (argc != 3 || !absl::EqualsIgnoreCase(name, "SET")) break;
    keys[found++] = key;
    // The value must be all there to find the next request behind it.
    if (!ReadBulk(buf, &pos, &value)) break;
  }
  return found;
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
