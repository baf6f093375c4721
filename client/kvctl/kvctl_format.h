// Copyright 2026 The kvstore Authors.
//
// The output of `kvctl stat`, as aligned text or as one JSON object. (The
// bench report has its own formatter, bench_report.h.) Pure functions;
// safe to call from any thread.

#ifndef KVSTORE_CLIENT_KVCTL_KVCTL_FORMAT_H_
#define KVSTORE_CLIENT_KVCTL_KVCTL_FORMAT_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "client/kv_client.h"

namespace kvstore {
namespace client {
namespace kvctl {

// `kvctl stat`'s output for a client on `transport` that fetched `stats`
// and reports `client_metrics` (KvClient::metrics()), ending in '\n'.
//
// Text: "transport NAME", then the sections "server info:", "server
// counters:" and "client metrics:", one "  name  value" line per entry
// (client names are Prometheus series, e.g.
// kvstore_client_requests_total{op="get",transport="tcp"}).
//
// JSON (`json` true), one line: {"transport": NAME, "server": {"info": {..},
// "counters": {..}}, "client": {..}} where "client" is the flat map of
// KvClient::metrics(), keys as above. Invalid UTF-8 in server strings is
// replaced.
std::string FormatStat(absl::string_view transport, const ServerStats& stats,
                       const std::map<std::string, uint64_t>& client_metrics, bool json);

}  // namespace kvctl
}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_KVCTL_KVCTL_FORMAT_H_
