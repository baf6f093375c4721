// Copyright 2026 The kvstore Authors.
//
// The shared secret that authenticates clients: one token per server (or
// cluster), used as the gRPC bearer token ("authorization: Bearer <token>")
// and as the RESP password (AUTH <token>, AUTH default <token>,
// HELLO 2 AUTH default <token>). One secret for both ports so that an
// operator configures, rotates and protects exactly one file.
//
// Thread safety: free functions without shared state.

#ifndef KVSTORE_COMMON_AUTH_TOKEN_H_
#define KVSTORE_COMMON_AUTH_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvstore {
namespace auth {

// Shortest token accepted from a file: a guessable secret is worse than
// none because it makes protected mode believe the port is guarded.
inline constexpr size_t kMinTokenBytes = 16;
// Longest token: it travels in every gRPC call's metadata.
inline constexpr size_t kMaxTokenBytes = 1024;

// Reads a token file: its content without one trailing "\n" or "\r\n".
// Errors: kNotFound / kPermissionDenied when the file cannot be read,
// kInvalidArgument (naming the path) when the token is shorter than
// kMinTokenBytes, longer than kMaxTokenBytes, or holds whitespace or control
// characters (they cannot travel in a RESP inline command or gRPC metadata).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Checks a token as ReadTokenFile does, for tokens that come from elsewhere.
absl::Status ValidateToken(absl::string_view token);

// True when `given` equals `expected`. Takes time that depends only on the
// lengths, not on where the first difference is, so that a network client
// cannot find the token byte by byte by timing failed attempts.
bool TokenEquals(absl::string_view expected, absl::string_view given);

// The value of the gRPC "authorization" metadata for `token`.
std::string BearerHeader(absl::string_view token);

// The token in an "authorization" metadata value, or "" when the value is not
// "Bearer <token>" (the scheme is matched case-insensitively, as RFC 6750).
absl::string_view TokenFromBearer(absl::string_view header);

}  // namespace auth
}  // namespace kvstore

#endif  // KVSTORE_COMMON_AUTH_TOKEN_H_
