// Copyright 2026 The kvstore Authors.
//
// Rendering of `kvctl stat`. Both forms list the same entries in the same
// order: the server's maps (sorted by name, as std::map keeps them), then
// the client counters in ClientCounters' declaration order.

#include "client/kvctl/kvctl_format.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace client {
namespace kvctl {
namespace {

// ClientCounters as (name, value) pairs, named after the struct's fields so
// that the JSON keys match the C++ API. There is no reflection: a field
// added to ClientCounters shows up only once it is listed here.
std::vector<std::pair<const char*, uint64_t>> CounterList(const ClientCounters& c) {
  return {
      {"gets", c.gets},
      {"puts", c.puts},
      {"deletes", c.deletes},
      {"tcp_ops", c.tcp_ops},
      {"rdma_ops", c.rdma_ops},
      {"tcp_fallbacks", c.tcp_fallbacks},
      {"checksum_retries", c.checksum_retries},
      {"span_retries", c.span_retries},
      {"server_fallback_gets", c.server_fallback_gets},
      {"leases_granted", c.leases_granted},
      {"leases_released", c.leases_released},
      {"leases_renewed", c.leases_renewed},
      {"lease_aborts", c.lease_aborts},
      {"reconnects", c.reconnects},
  };
}

}  // namespace

std::string FormatStat(absl::string_view transport, const ServerStats& stats,
                       const ClientCounters& counters, bool json) {
  const std::vector<std::pair<const char*, uint64_t>> client_counters = CounterList(counters);
  std::string out;
  if (json) {
    // Field names: transport, server.info.*, server.counters.*, client.*
    // (the ClientCounters field names). Empty server maps still appear, as
    // {}, so that readers need not test for the key.
    nlohmann::ordered_json j;
    j["transport"] = std::string(transport);
    j["server"]["info"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : stats.info) j["server"]["info"][name] = value;
    j["server"]["counters"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : stats.counters) j["server"]["counters"][name] = value;
    for (const auto& [name, value] : client_counters) j["client"][name] = value;
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
    absl::StrAppend(&out, "client counters:\n");
    for (const auto& [name, value] : client_counters) {
      absl::StrAppendFormat(&out, "  %-30s %d\n", name, value);
    }
  }
  return out;
}

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
