// Copyright 2026 The kvstore Authors.

#include "server/resp/glob.h"

#include <string>

namespace kvstore {
namespace server {
namespace resp_internal {

namespace {

// Matches the class starting at pattern[p] ('[' already seen at p - 1)
// against `c`; sets *end to the index after the closing ']' (or the end
// of the pattern when it is unclosed, as Redis treats it).
bool ClassMatch(absl::string_view pattern, size_t p, unsigned char c, size_t* end) {
  bool negate = false;
  if (p < pattern.size() && pattern[p] == '^') {
    negate = true;
    ++p;
  }
  bool match = false;
  while (p < pattern.size() && pattern[p] != ']') {
    if (pattern[p] == '\\' && p + 1 < pattern.size()) {
      ++p;
      match |= static_cast<unsigned char>(pattern[p]) == c;
      ++p;
    } else if (p + 2 < pattern.size() && pattern[p + 1] == '-' && pattern[p + 2] != ']') {
      unsigned char lo = static_cast<unsigned char>(pattern[p]);
      unsigned char hi = static_cast<unsigned char>(pattern[p + 2]);
      if (lo > hi) std::swap(lo, hi);
      match |= c >= lo && c <= hi;
      p += 3;
    } else {
      match |= static_cast<unsigned char>(pattern[p]) == c;
      ++p;
    }
  }
  *end = p < pattern.size() ? p + 1 : p;
  return negate ? !match : match;
}

}  // namespace

bool GlobMatch(absl::string_view pattern, absl::string_view text) {
  size_t p = 0, t = 0;
  // Where to resume after the last '*': the pattern after it, and the text
  // position it has swallowed up to. One restart point suffices, because a
  // later star can always absorb what an earlier one would have.
  size_t star_p = absl::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size()) {
      const char pc = pattern[p];
      if (pc == '*') {
        while (p < pattern.size() && pattern[p] == '*') ++p;
        if (p == pattern.size()) return true;
        star_p = p;
        star_t = t;
        continue;
      }
      size_t next = p + 1;
      bool ok;
      if (pc == '?') {
        ok = true;
      } else if (pc == '[') {
        ok = ClassMatch(pattern, p + 1, static_cast<unsigned char>(text[t]), &next);
      } else if (pc == '\\' && p + 1 < pattern.size()) {
        ok = pattern[p + 1] == text[t];
        next = p + 2;
      } else {
        ok = pc == text[t];
      }
      if (ok) {
        p = next;
        ++t;
        continue;
      }
    }
    if (star_p == absl::string_view::npos) return false;
    p = star_p;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string GlobLiteralPrefix(absl::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '*' || c == '?' || c == '[') break;
    if (c == '\\') {
      if (i + 1 == pattern.size()) break;
      out.push_back(pattern[++i]);
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
