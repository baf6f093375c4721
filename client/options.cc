// Copyright 2026 The kvstore Authors.
//
// The helpers options.h declares: transport names and address checks.

#include "client/options.h"

#include <cstdint>
#include <string>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvstore {
namespace client {

absl::string_view TransportModeName(TransportMode mode) {
  switch (mode) {
    case TransportMode::kAuto:
      return "auto";
    case TransportMode::kRdma:
      return "rdma";
    case TransportMode::kTcp:
      return "tcp";
  }
  return "?";
}

// Case-insensitive, so flags and config files may say "RDMA".
absl::StatusOr<TransportMode> ParseTransportMode(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(text);
  if (t == "auto") return TransportMode::kAuto;
  if (t == "rdma") return TransportMode::kRdma;
  if (t == "tcp") return TransportMode::kTcp;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", text, "' (expected auto, rdma or tcp)"));
}

absl::Status ValidateServerAddress(absl::string_view address) {
  auto bad = [address](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("server address '", address, "': ", why, " (expected host:port)"));
  };
  // The port follows the last ':'; an IPv6 host is bracketed, so its own
  // colons come before the closing ']'.
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.empty() || host == "[]") return bad("no host");
  if (host.find(':') != absl::string_view::npos && (host.front() != '[' || host.back() != ']')) {
    return bad("an IPv6 host must be in brackets");
  }
  uint32_t n = 0;
  if (port.empty() || port.size() > 5 || !absl::c_all_of(port, absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &n) || n < 1 || n > 65535) {
    return bad(absl::StrCat("port '", port, "' is not a number in 1..65535"));
  }
  return absl::OkStatus();
}

}  // namespace client
}  // namespace kvstore
