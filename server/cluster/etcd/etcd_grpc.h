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
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "etcd/mvcc/mvccpb/kv.pb.h"
#include "server/cluster/etcd/etcd_client.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace internal {

// One gRPC channel to an endpoint and the stubs of the services kvstore
// uses on it. Immutable once made; thread-safe, as gRPC stubs are.
struct EtcdStubs {
  explicit EtcdStubs(const std::string& address);

  const absl::Time created;
  const std::shared_ptr<grpc::Channel> channel;
  const std::unique_ptr<etcdserverpb::KV::Stub> kv;
  const std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  const std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  const std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
};

// One etcd endpoint: its current channel and stubs (connected lazily by
// gRPC), replaced by a fresh channel after a call fails as UNAVAILABLE.
//
// Why replace: gRPC 1.51 keeps a failed channel's subchannel in connection
// backoff, and an attempt started while etcd is still down or starting
// (listening, not yet serving) is cut off by the connect timeout; calls
// made during an outage kept a channel failing ("failed to connect to all
// addresses", "timed out before receiving SETTINGS frame") for many seconds
// after etcd was back. A fresh channel with its own subchannel (no global
// subchannel pool) connects at once on its first call.
//
// Thread-safe: callers take a shared_ptr to the current stubs for the length
// of a call (a replaced channel lives on until its last call or watch ends).
class EtcdEndpoint {
 public:
  explicit EtcdEndpoint(std::string address);

  const std::string& address() const { return address_; }
  std::shared_ptr<const EtcdStubs> stubs() const;
  // A call on `failed` ended UNAVAILABLE: replaces the channel unless another
  // thread already did, or `failed` is younger than a short minimum age (so a
  // burst of concurrent failures makes one new channel, not many).
  void Renew(const EtcdStubs* failed);

 private:
  const std::string address_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const EtcdStubs> stubs_;  // guarded by mu_
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
