// Copyright 2026 The kvstore Authors.
//
// The RESP server's live counters: one instance per RespServer, shared by all
// of its loops and read by RespServer::counters(). Internal to server/resp.
//
// Thread safety: every field is an independent relaxed atomic; a snapshot of
// several fields is not consistent with itself, which is fine for metrics.

#ifndef KVSTORE_SERVER_RESP_RESP_COUNTERS_H_
#define KVSTORE_SERVER_RESP_RESP_COUNTERS_H_

#include <atomic>
#include <cstdint>

namespace kvstore {
namespace server {
namespace resp_internal {

// Same meaning as the RespServerCounters fields of the same name.
struct Counters {
  std::atomic<uint64_t> accepted{0}, active{0}, commands{0}, gets{0}, sets{0}, protocol_errors{0},
      timeouts{0}, bytes_in{0}, bytes_out{0};
};

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_RESP_RESP_COUNTERS_H_
