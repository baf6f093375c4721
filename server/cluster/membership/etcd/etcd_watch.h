// Copyright 2026 The kvstore Authors.
//
// The watch of the gRPC EtcdClient: one Watch stream per WatchHandle, read
// by a thread of its own (see EtcdClient::Watch for the contract).

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_WATCH_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_WATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/cluster/membership/etcd/etcd_grpc.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace internal {

// Opens a watch on `stubs` (a channel to `address`) for the keys starting with `prefix` from
// `start_revision`, carrying the etcd auth `token` when not empty, and returns once etcd has
// confirmed it, so that every change after the return is delivered. kUnavailable when etcd does not
// confirm within `rpc_timeout`; then `on_events` is never called. The handle
// keeps the channel alive and may outlive the client.
absl::StatusOr<std::unique_ptr<WatchHandle>> StartWatch(
    const std::string& address, std::shared_ptr<const EtcdStubs> stubs, const std::string& token,
    absl::string_view prefix, int64_t start_revision, absl::Duration rpc_timeout,
    std::function<void(absl::StatusOr<std::vector<WatchEvent>>)> on_events);

}  // namespace internal
}  // namespace etcd
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_WATCH_H_
