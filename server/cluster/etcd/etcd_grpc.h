// Copyright 2026 The kvstore Authors.
//
// Internals of the gRPC EtcdClient shared by its unary calls
// (etcd_client.cc) and its watches (etcd_watch.cc): one endpoint's channel
// and stubs, and the conversions between etcd's messages and ours.

#ifndef KVSTORE_SERVER_CLUSTER_ETCD_ETCD_GRPC_H_
#define KVSTORE_SERVER_CLUSTER_ETCD_ETCD_GRPC_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "etcd/mvcc/mvccpb/kv.pb.h"
#include "server/cluster/etcd/etcd_client.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace internal {

// One etcd endpoint: a channel (connected lazily by gRPC) and the stubs of
// the services kvstore uses. Thread-safe, as gRPC stubs are.
struct EtcdEndpoint {
  explicit EtcdEndpoint(std::string address);

  const std::string address;  // "host:port"
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
};

// The absl::Status for a gRPC status of `method` on `address`: codes map
// one-to-one except DEADLINE_EXCEEDED, which becomes kUnavailable.
absl::Status FromGrpc(const grpc::Status& status, absl::string_view address,
                      absl::string_view method);

// etcd's range_end for "every key starting with prefix": the prefix with its
// last byte below 0xff incremented and the rest dropped; "\0" (no upper
// bound) when there is no such byte, as for an empty prefix.
std::string PrefixEnd(absl::string_view prefix);

KeyValue ToKeyValue(const mvccpb::KeyValue& kv);

}  // namespace internal
}  // namespace etcd
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_ETCD_ETCD_GRPC_H_
