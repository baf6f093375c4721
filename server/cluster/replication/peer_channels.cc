// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/peer_channels.h"

#include <utility>

#include "common/auth/token.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace kvstore {
namespace server {

PeerChannels::PeerChannels(std::string token, std::shared_ptr<grpc::ChannelCredentials> credentials)
    : bearer_(token.empty() ? std::string() : auth::BearerHeader(token)),
      credentials_(credentials != nullptr ? std::move(credentials)
                                          : grpc::InsecureChannelCredentials()) {}

std::shared_ptr<v1::KvCluster::Stub> PeerChannels::Stub(const v1::ClusterNode& node) {
  absl::MutexLock lock(&mu_);
  Peer& peer = peers_[node.node_id()];
  if (peer.stub == nullptr || peer.address != node.control_address() ||
      peer.incarnation != node.incarnation()) {
    grpc::ChannelArguments args;
    // Entries (and SyncShard chunks holding one large entry) may exceed
    // gRPC's 4 MiB default; the limits are the store's, not the channel's.
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    peer.address = node.control_address();
    peer.incarnation = node.incarnation();
    peer.stub = v1::KvCluster::NewStub(grpc::CreateCustomChannel(peer.address, credentials_, args));
  }
  return peer.stub;
}

void PeerChannels::Authorize(grpc::ClientContext* context) const {
  if (!bearer_.empty()) context->AddMetadata("authorization", bearer_);
}

}  // namespace server
}  // namespace kvstore
