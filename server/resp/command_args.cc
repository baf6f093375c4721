// Copyright 2026 The kvstore Authors.

#include "server/resp/command_args.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/protocol/resp.h"

namespace kvstore {
namespace server {
namespace resp_internal {

using resp::CommandIs;

bool ParseStrictInt64(absl::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  size_t i = 0;
  const bool negative = s[0] == '-';
  if (negative) i = 1;
  if (i == s.size()) return false;
  // "0" alone; no other number starts with a zero ("-0" neither).
  if (s[i] == '0') {
    if (s.size() == 1) {
      *out = 0;
      return true;
    }
    return false;
  }
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) return false;
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  if (v > limit) return false;
  *out = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

bool ParseStrictLongDouble(absl::string_view s, long double* out) {
  if (s.empty() || s.size() > 5000) return false;
  if (absl::ascii_isspace(static_cast<unsigned char>(s.front()))) return false;
  const std::string copy(s);  // strtold needs a terminated string
  char* end = nullptr;
  errno = 0;
  const long double v = std::strtold(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || std::isnan(v)) return false;
  if (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)) return false;
  *out = v;
  return true;
}

std::string FormatLongDouble(long double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[5 * 1024];
  int n = std::snprintf(buf, sizeof(buf), "%.17Lf", v);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof(buf)) return "0";
  std::string s(buf, static_cast<size_t>(n));
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

absl::StatusOr<int64_t> ExpiryFromArg(absl::string_view arg, ExpiryUnit unit, bool absolute,
                                      int64_t now_ms, bool positive, absl::string_view command) {
  const absl::Status invalid = absl::InvalidArgumentError(
      absl::StrCat("invalid expire time in '", absl::AsciiStrToLower(command), "' command"));
  int64_t v;
  if (!ParseStrictInt64(arg, &v)) return absl::InvalidArgumentError(kNotInteger);
  if (positive && v <= 0) return invalid;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  if (unit == ExpiryUnit::kSeconds) {
    if (v > kMax / 1000 || v < kMin / 1000) return invalid;
    v *= 1000;
  }
  if (!absolute) {
    if (v > 0 && v > kMax - now_ms) return invalid;
    v += now_ms;
  }
  return v;
}

absl::StatusOr<ExpiryOptions> ParseExpiryOptions(const absl::string_view* args, size_t count,
                                                 bool set, int64_t now_ms,
                                                 absl::string_view command) {
  const absl::Status syntax = absl::InvalidArgumentError("syntax error");
  ExpiryOptions o;
  bool have_time = false;
  for (size_t i = 0; i < count; ++i) {
    const absl::string_view a = args[i];
    if (set && CommandIs(a, "NX")) {
      if (o.xx) return syntax;
      o.nx = true;
    } else if (set && CommandIs(a, "XX")) {
      if (o.nx) return syntax;
      o.xx = true;
    } else if (set && CommandIs(a, "GET")) {
      o.get = true;
    } else if (set && CommandIs(a, "KEEPTTL")) {
      if (have_time) return syntax;
      o.keepttl = true;
    } else if (!set && CommandIs(a, "PERSIST")) {
      if (have_time) return syntax;
      o.persist = true;
    } else if (CommandIs(a, "EX") || CommandIs(a, "PX") || CommandIs(a, "EXAT") ||
               CommandIs(a, "PXAT")) {
      if (have_time || o.keepttl || o.persist || i + 1 >= count) return syntax;
      const bool ms = CommandIs(a, "PX") || CommandIs(a, "PXAT");
      const bool absolute = CommandIs(a, "EXAT") || CommandIs(a, "PXAT");
      auto at = ExpiryFromArg(args[++i], ms ? ExpiryUnit::kMilliseconds : ExpiryUnit::kSeconds,
                              absolute, now_ms, /*positive=*/true, command);
      if (!at.ok()) return at.status();
      o.expires_at_ms = *at;
      have_time = true;
    } else {
      return syntax;
    }
  }
  return o;
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
