// Copyright 2026 The kvstore Authors.
//
// PathCounters: the live counters of one RDMA path, shared by its parts
// (reader, writer, lease manager) and read out as an RdmaPathCounters
// snapshot (client/internal/data_path.h).
//
// Thread safety: every field is atomic; increment from any thread.

#ifndef KVSTORE_CLIENT_INTERNAL_RDMA_PATH_COUNTERS_H_
#define KVSTORE_CLIENT_INTERNAL_RDMA_PATH_COUNTERS_H_

#include <atomic>
#include <cstdint>

#include "client/internal/data_path.h"

namespace kvstore {
namespace client {

struct PathCounters {
  std::atomic<uint64_t> ops{0};
  std::atomic<uint64_t> checksum_retries{0};
  std::atomic<uint64_t> span_retries{0};
  std::atomic<uint64_t> server_fallback_gets{0};
  std::atomic<uint64_t> leases_granted{0};
  std::atomic<uint64_t> leases_released{0};
  std::atomic<uint64_t> leases_renewed{0};
  std::atomic<uint64_t> lease_aborts{0};

  // The current values (each read on its own; not one atomic snapshot).
  RdmaPathCounters Snapshot() const {
    RdmaPathCounters c;
    c.ops = ops;
    c.checksum_retries = checksum_retries;
    c.span_retries = span_retries;
    c.server_fallback_gets = server_fallback_gets;
    c.leases_granted = leases_granted;
    c.leases_released = leases_released;
    c.leases_renewed = leases_renewed;
    c.lease_aborts = lease_aborts;
    return c;
  }
};

}  // namespace client
}  // namespace kvstore

#endif  // KVSTORE_CLIENT_INTERNAL_RDMA_PATH_COUNTERS_H_
