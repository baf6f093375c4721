// Copyright 2026 The kvstore Authors.

#include "common/auth/token.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvstore {
namespace auth {

absl::Status ValidateToken(absl::string_view token) {
  if (token.size() < kMinTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("token is ", token.size(), " bytes; at least ",
                                                   kMinTokenBytes,
                                                   " are required (e.g. `openssl rand -hex 32`)"));
  }
  if (token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("token is ", token.size(), " bytes; at most ",
                                                   kMaxTokenBytes, " are allowed"));
  }
  for (char c : token) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(
          "token holds whitespace or a control character; use printable characters only");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string why = absl::StrCat("cannot read token file ", path, ": ", std::strerror(err));
    if (err == EACCES) return absl::PermissionDeniedError(why);
    return absl::NotFoundError(why);
  }
  // Read at most one byte past the limit: a huge file is refused, not loaded.
  std::string token(kMaxTokenBytes + 3, '\0');
  in.read(token.data(), static_cast<std::streamsize>(token.size()));
  token.resize(static_cast<size_t>(in.gcount()));
  if (absl::EndsWith(token, "\n")) token.pop_back();
  if (absl::EndsWith(token, "\r")) token.pop_back();
  absl::Status valid = ValidateToken(token);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": ", valid.message()));
  }
  return token;
}

bool TokenEquals(absl::string_view expected, absl::string_view given) {
  // Compare every byte of `expected` whatever `given` holds; the length
  // difference is folded into the same accumulator. Volatile keeps the
  // compiler from turning the loop into an early-exit memcmp.
  volatile unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = diff | (static_cast<unsigned char>(expected[i]) ^ g);
  }
  return diff == 0 && !expected.empty();
}

std::string BearerHeader(absl::string_view token) { return absl::StrCat("Bearer ", token); }

absl::string_view TokenFromBearer(absl::string_view header) {
  constexpr absl::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size()) return "";
  if (!absl::EqualsIgnoreCase(header.substr(0, kScheme.size()), kScheme)) return "";
  return header.substr(kScheme.size());
}

}  // namespace auth
}  // namespace kvstore
