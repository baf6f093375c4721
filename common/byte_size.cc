// Copyright 2026 The kvstore Authors.

#include "common/byte_size.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvstore {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  std::string t = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  // Digits are scanned by hand so that the number and the unit can be
  // split; SimpleAtoi alone would reject "64K".
  size_t digits = 0;
  while (digits < t.size() && absl::ascii_isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  uint64_t n = 0;
  // 15 digits keep n below 10^15 < 2^50, so SimpleAtoi cannot overflow; the
  // shift check below handles the rest.
  if (digits == 0 || digits > 15 || !absl::SimpleAtoi(t.substr(0, digits), &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a byte size: '", text, "' (examples: 4096, 64K, 512M, 2G)"));
  }
  // `t` is upper-cased, so "KiB", "kib" and "KIB" all compare as "KIB". A
  // '.' left here (as in "1.5G") is an unknown unit: fractions are refused.
  std::string unit(absl::StripAsciiWhitespace(absl::string_view(t).substr(digits)));
  int shift = 0;
  if (unit.empty() || unit == "B")
    shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    shift = 30;
  else if (unit == "T" || unit == "TB" || unit == "TIB")
    shift = 40;
  else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown unit in byte size '", text, "' (use K, M, G or T)"));
  }
  // n << shift must not lose bits: compare against the largest n that fits.
  if (shift > 0 && n > (~uint64_t{0} >> shift)) {
    return absl::InvalidArgumentError(absl::StrCat("byte size too large: '", text, "'"));
  }
  return n << shift;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  // Invariant: v * 1024^u == bytes. Stops at TiB, the largest unit.
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  // Exact values print without ".0", so round sizes read like the flags
  // that set them.
  if (u == 0) return absl::StrCat(bytes, " B");
  if (v == static_cast<uint64_t>(v)) return absl::StrCat(static_cast<uint64_t>(v), " ", kUnits[u]);
  return absl::StrFormat("%.1f %s", v, kUnits[u]);
}

}  // namespace kvstore
