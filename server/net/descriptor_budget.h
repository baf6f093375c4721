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
// files, RDMA setup, the listeners, event loops and gRPC's own pipes, and
// room for what the start-up count did not see yet.
uint64_t ReservedDescriptors(uint64_t limit);

// What each port asks for: its flag's value, or the fixed cap of a port
// without a flag. A port's connections each hold one descriptor, except
// that a RESP TLS connection holds three (the TLS socket and both ends of
// the pair that carries its plaintext to the RESP loops).
struct ConnectionRequest {
  int grpc = 0;  // --grpc_max_connections; 0: automatic
  int resp = 0;  // --resp_max_clients
  // --resp_max_unauthenticated_clients; counted only with resp_auth (no
  // token: every connection counts as a client). 0 with resp_auth: no cap
  // asked, so one is set to fit (with a warning).
  int resp_unauthenticated = 0;
  bool resp_auth = false;
  // The RESP loops: each keeps its own share of the unauthenticated cap,
  // rounded up, so the port may hold up to threads * ceil(cap / threads).
  int resp_threads = 1;
  bool resp_tls = false;  // --resp_tls_port set: the TLS front takes up to `resp` more
  int metrics = 0;        // the metrics port's fixed cap; 0: no metrics port
};

struct ConnectionCaps {
  int grpc = 0;                  // control-port connections (AcceptGuard)
  int resp = 0;                  // RESP clients
  int resp_unauthenticated = 0;  // RESP connections before AUTH (as requested without resp_auth)
  int metrics = 0;               // as requested: the metrics port's cap has no flag
  uint64_t total = 0;            // descriptors the caps may hold together
  std::string adjusted;          // non-empty: what was lowered and why, for the log
};

// Caps for `limit` descriptors when `in_use` are open already, so that
// in_use + ReservedDescriptors(limit) + total <= limit. The metrics port's
// cap is fixed; `grpc` 0 picks a quarter of what is left after the reserve
// and the metrics port (8 to 1024); --resp_max_clients and
// --resp_max_unauthenticated_clients share what is left after gRPC, each
// lowered (said in `adjusted`, naming the flag) only when both together do
// not fit. kInvalidArgument naming the limit when it leaves fewer than 8
// connections for any port with a flag, or naming --grpc_max_connections
// when an explicit value does not fit.
absl::StatusOr<ConnectionCaps> PlanConnectionCaps(uint64_t limit, uint64_t in_use,
                                                  const ConnectionRequest& request);

}  // namespace net
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_NET_DESCRIPTOR_BUDGET_H_
