// Copyright 2026 The kvstore Authors.
//
// Rendering of `kvctl stat`. Both forms list the same entries in the same
// order: the server's maps, then the client's metrics, each sorted by name
// (as std::map keeps them).

#include "client/kvctl/kvctl_format.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace client {
namespace kvctl {
namespace {

// Text column for names: 30, or wider for the client's series keys (which
// run to ~80 characters), so that each section's values still line up.
int NameWidth(const std::map<std::string, uint64_t>& entries) {
  size_t width = 30;
  for (const auto& entry : entries) width = std::max(width, entry.first.size());
  return static_cast<int>(width);
}

}  // namespace

std::string FormatStat(absl::string_view transport, const ServerStats& stats,
                       const std::map<std::string, uint64_t>& client_metrics, bool json) {
  std::string out;
  if (json) {
    // Field names: transport, server.info.*, server.counters.*, client.*
    // (the client's series keys). Empty maps still appear, as {}, so that
    // readers need not test for the key.
    nlohmann::ordered_json j;
    j["transport"] = std::string(transport);
    j["server"]["info"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : stats.info) j["server"]["info"][name] = value;
    j["server"]["counters"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : stats.counters) j["server"]["counters"][name] = value;
    j["client"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : client_metrics) j["client"][name] = value;
    // Nothing guarantees that server strings are UTF-8: replace, never throw.
    out = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    // The newline ends kvctl's output line; it is not part of the JSON.
    out.push_back('\n');
  } else {
    // Names padded to 30 columns so that the values form a column.
    absl::StrAppendFormat(&out, "transport %s\n", transport);
    absl::StrAppend(&out, "server info:\n");
    for (const auto& [name, value] : stats.info) {
      absl::StrAppendFormat(&out, "  %-30s %s\n", name, value);
    }
    absl::StrAppend(&out, "server counters:\n");
    for (const auto& [name, value] : stats.counters) {
      absl::StrAppendFormat(&out, "  %-30s %d\n", name, value);
    }
    absl::StrAppend(&out, "client metrics:\n");
    const int width = NameWidth(client_metrics);
    for (const auto& [name, value] : client_metrics) {
      absl::StrAppendFormat(&out, "  %-*s %d\n", width, name, value);
    }
  }
  return out;
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
