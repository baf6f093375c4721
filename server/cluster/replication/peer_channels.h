// Copyright 2026 The kvstore Authors.
//
// PeerChannels: gRPC stubs of the KvCluster service of other kvservers, by
// node id, for the replicator (Replicate) and the installer (SyncShard,
// ReportInSync). A node's channel is kept while its control address and
// incarnation stay the same and made anew when either changes (a restarted
// node may come back elsewhere). Calls carry the server's bearer token when
// it has one: every node of a cluster shares one token (docs/security.md).
//
// Thread safety: thread-safe.

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_PEER_CHANNELS_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_PEER_CHANNELS_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "proto/kv_cluster.grpc.pb.h"

namespace kvstore {
namespace server {

class PeerChannels {
 public:
  // `token` empty: calls carry none. `credentials` null: insecure channels.
  PeerChannels(std::string token, std::shared_ptr<grpc::ChannelCredentials> credentials);

  // The stub for `node` (its control_address), cached.
  std::shared_ptr<v1::KvCluster::Stub> Stub(const v1::ClusterNode& node);
  // Adds the bearer token to a call's metadata (no-op without a token).
  void Authorize(grpc::ClientContext* context) const;

 private:
  struct Peer {
    std::string address;
    uint64_t incarnation = 0;
    std::shared_ptr<v1::KvCluster::Stub> stub;
  };
  const std::string bearer_;  // "Bearer <token>", or empty
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Peer> peers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_PEER_CHANNELS_H_
