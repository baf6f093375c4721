// Copyright 2026 The kvstore Authors.
//
// Internals of the gRPC EtcdClient shared by its unary calls
// (etcd_client.cc) and its watches (etcd_watch.cc): one endpoint's channel
// and stubs, and the conversions between etcd's messages and ours.

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_GRPC_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_GRPC_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "etcd/mvcc/mvccpb/kv.pb.h"
#include "server/cluster/membership/etcd/etcd_client.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace internal {

// etcd's require-leader metadata (clientv3's WithRequireLeader): a member
// that has no leader fails the stream with "no leader" instead of leaving it
// open and silent.
inline constexpr absl::string_view kRequireLeaderKey = "hasleader";
inline constexpr absl::string_view kRequireLeaderValue = "true";

// One gRPC channel to an endpoint and the stubs of the services kvstore
// uses on it. Immutable once made; thread-safe, as gRPC stubs are.
struct EtcdStubs {
  EtcdStubs(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds);

  const std::shared_ptr<grpc::Channel> channel;
  const std::unique_ptr<etcdserverpb::KV::Stub> kv;
  const std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  const std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  const std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  const std::unique_ptr<etcdserverpb::Auth::Stub> auth;
};

// One etcd endpoint: its current channel and stubs, replaced by a fresh
// channel after a call on it fails as UNAVAILABLE.
//
// Why replace: in gRPC 1.51 a synchronous call polls the channel's sockets
// only while it waits. After a failed connection attempt the subchannel
// sits in TRANSIENT_FAILURE, calls without wait_for_ready fail at once
// without waiting, and the reconnection attempt made after the backoff is
// driven only by gRPC's backup poller (every 5 s; gRPC issue #28866, and
// setting GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS=100 hides the bug in
// EtcdClientTest.CallsDuring*): it times out unpolled
// ("tcp handshaker shutdown", "timed out before receiving SETTINGS frame"),
// so a client that kept calling during an etcd outage failed for 5-15 s
// after etcd was back. A fresh channel starts IDLE: its first call starts
// the connection and waits on it (polling), so it connects at once when
// etcd listens, and fails fast (connection refused) while it does not.
// Each channel has its own subchannel (no global subchannel pool), else a
// new channel would inherit the old one's failure and backoff.
//
// Thread-safe: callers take a shared_ptr to the current stubs for the length
// of a call; a replaced channel lives on until its last call or watch ends.
class EtcdEndpoint {
 public:
  // `creds`: TLS or insecure channel credentials, shared by every channel
  // made for this endpoint.
  EtcdEndpoint(std::string address, std::shared_ptr<grpc::ChannelCredentials> creds);

  const std::string& address() const { return address_; }
  std::shared_ptr<const EtcdStubs> stubs() const;
  // A call on `failed` ended UNAVAILABLE: replaces the channel unless another
  // thread already did (so concurrent failures on one channel make one new
  // channel). At most one new channel per failed call.
  void Renew(const EtcdStubs* failed);

 private:
  const std::string address_;
  const std::shared_ptr<grpc::ChannelCredentials> creds_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const EtcdStubs> stubs_;  // guarded by mu_
};

// etcd's metadata key for the token Authenticate returned.
inline constexpr absl::string_view kTokenKey = "token";

// Whether etcd refused a call because of its auth token (expired, or made
// before the auth store changed): authenticating again may help.
bool IsStaleToken(const grpc::Status& status);

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

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_ETCD_GRPC_H_
