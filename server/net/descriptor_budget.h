// Copyright 2026 The kvstore Authors.
//
// The process's descriptor limit, and how kvserver shares it out: every
// connection on the control (gRPC), RESP and metrics ports holds one
// descriptor, and whoever can reach a port can open connections. When the
// process runs out, every accept fails, and so do etcd and peer channels,
// log rotation and RDMA setup. So the per-port connection caps together
// stay under the limit, with a reserve for everything else.
//
// Thread safety: the functions are thread-safe; RaiseDescriptorLimit
// changes the process's limit (call once at start).

#ifndef KVSTORE_SERVER_NET_DESCRIPTOR_BUDGET_H_
#define KVSTORE_SERVER_NET_DESCRIPTOR_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace kvstore {
namespace server {
namespace net {

struct DescriptorLimit {
  uint64_t soft_before = 0;  // the soft limit the process started with
  uint64_t soft = 0;         // the soft limit now
  uint64_t hard = 0;
};

// Raises the soft RLIMIT_NOFILE to the hard limit (at most the kernel's
// fs.nr_open) and returns what it got. kInternal only if the limit cannot
// be read; a raise the kernel refuses leaves the soft limit as it was
// (soft == soft_before).
absl::StatusOr<DescriptorLimit> RaiseDescriptorLimit();

// Descriptors the process has open now (entries of /proc/self/fd); -1 if
// that cannot be read.
int OpenDescriptors();

// Descriptors kept out of every port's cap: etcd and peer channels, log
// files, RDMA setup, the metrics port's connections, gRPC's own pipes, and
// room for what the start-up count did not see yet.
uint64_t ReservedDescriptors(uint64_t limit);

struct ConnectionCaps {
  int grpc = 0;          // control-port connections (AcceptGuard)
  int resp = 0;          // RESP clients
  std::string adjusted;  // non-empty: what was lowered and why, for the log
};

// Caps for `limit` descriptors when `in_use` are open already. `grpc`
// 0 picks a quarter of what is left after the reserve (8 to 1024); `resp`
// is lowered to what is left after gRPC when it does not fit (said in
// `adjusted`). kInvalidArgument naming the flags when the limit leaves
// fewer than 8 connections for either port, or an explicit `grpc` does not
// fit.
absl::StatusOr<ConnectionCaps> PlanConnectionCaps(uint64_t limit, uint64_t in_use, int grpc,
                                                  int resp);

}  // namespace net
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_NET_DESCRIPTOR_BUDGET_H_
