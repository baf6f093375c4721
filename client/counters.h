// Copyright 2026 The kvstore Authors.
//
// ClientCounters: what KvClient::counters() reports. Part of the public API,
// included by kv_client.h; a plain value type in its own header so the
// client's internals can fill it without depending on KvClient.

#ifndef KVSTORE_CLIENT_COUNTERS_H_
#define KVSTORE_CLIENT_COUNTERS_H_

#include <cstdint>

namespace kvstore {
namespace client {

// Client-side counters, cumulative since Connect(). A snapshot: copying it
// is thread-safe, the fields are not updated after it was returned.
struct ClientCounters {
  uint64_t gets = 0;
  uint64_t puts = 0;
  uint64_t deletes = 0;
  uint64_t tcp_ops = 0;               // operations served over RESP/TCP
  uint64_t rdma_ops = 0;              // operations served over RDMA
  uint64_t tcp_fallbacks = 0;         // times kAuto chose TCP because RDMA was unavailable
  uint64_t checksum_retries = 0;      // one-sided reads retried after a failed verify
  uint64_t span_retries = 0;          // one-sided GETs restarted for exceeding the read span
  uint64_t server_fallback_gets = 0;  // GETs served by the server CPU after retries ran out
  uint64_t leases_granted = 0;        // RDMA write leases obtained over gRPC
  uint64_t leases_released = 0;
  uint64_t leases_renewed = 0;
  uint64_t lease_aborts = 0;  // commits refused because a lease had expired (redone)
  uint64_t reconnects = 0;    // data paths rebuilt after a failure or a server restart
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_COUNTERS_H_
