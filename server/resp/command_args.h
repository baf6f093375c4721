// Copyright 2026 The kvstore Authors.
//
// Argument parsing shared by the RESP data commands, with Redis's rules
// and error texts: integers are strict (no sign '+', no spaces, no leading
// zeros, within int64), floats are what strtold accepts whole and not NaN,
// and expiry options (EX, PX, EXAT, PXAT, KEEPTTL, PERSIST) become one
// absolute time in unix milliseconds.
//
// Thread safety: pure functions.

#ifndef KVSTORE_SERVER_RESP_COMMAND_ARGS_H_
#define KVSTORE_SERVER_RESP_COMMAND_ARGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace server {
namespace resp_internal {

inline constexpr absl::string_view kNotInteger = "value is not an integer or out of range";
inline constexpr absl::string_view kNotFloat = "value is not a valid float";

// Redis's string2ll: an exact int64 in canonical form.
bool ParseStrictInt64(absl::string_view s, int64_t* out);
// Redis's string2ld: a long double with no surrounding space, not NaN.
bool ParseStrictLongDouble(absl::string_view s, long double* out);
// Redis's human form of a long double (INCRBYFLOAT): "%.17Lf" with the
// trailing zeros (and a trailing '.') removed.
std::string FormatLongDouble(long double v);

// How an expiry option is given.
enum class ExpiryUnit { kSeconds, kMilliseconds };
// An absolute expiry time in unix ms from an option's argument: relative
// (EX, PX) from `now_ms`, or absolute (EXAT, PXAT). kInvalidArgument
// "invalid expire time in '<command>' command" for a value that is not
// positive (when `positive` is set, as SET, GETEX and SETEX require) or
// that overflows int64 milliseconds; kInvalidArgument kNotInteger for a
// non-integer.
absl::StatusOr<int64_t> ExpiryFromArg(absl::string_view arg, ExpiryUnit unit, bool absolute,
                                      int64_t now_ms, bool positive, absl::string_view command);

// The expiry options of SET and GETEX, parsed from args[first..].
struct ExpiryOptions {
  bool nx = false, xx = false, get = false;  // SET only
  bool keepttl = false;                      // SET only
  bool persist = false;                      // GETEX only
  std::optional<int64_t> expires_at_ms;      // EX / PX / EXAT / PXAT
};
// `set`: SET's options (NX XX GET KEEPTTL and the four times); otherwise
// GETEX's (the four times and PERSIST). kInvalidArgument "syntax error" for
// an unknown or conflicting option, or the errors of ExpiryFromArg().
absl::StatusOr<ExpiryOptions> ParseExpiryOptions(const absl::string_view* args, size_t count,
                                                 bool set, int64_t now_ms,
                                                 absl::string_view command);

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_COMMAND_ARGS_H_
