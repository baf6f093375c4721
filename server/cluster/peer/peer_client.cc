// Copyright 2026 The kvstore Authors.

#include "server/cluster/peer/peer_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/auth/token.h"
#include "common/grpc_status.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace kvstore {
namespace server {

void PeerCallGroup::CancelAll() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ClientContext* context : active_) context->TryCancel();
}

bool PeerCallGroup::Add(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  active_.insert(context);
  return true;
}

void PeerCallGroup::Remove(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  active_.erase(context);
}

absl::Status PeerError(const char* method, const v1::ClusterNode& node,
                       const absl::Status& status) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(method, " on ", node.node_id(), " (",
                                               node.control_address(), "): ", status.message()));
  // The peer's refusal stays what it was: callers classify by it.
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& value) { out.SetPayload(url, value); });
  return out;
}

PeerClient::PeerClient(PeerClientOptions options)
    : options_(std::move(options)),
      bearer_(options_.peer_secret.empty() ? std::string()
                                           : auth::BearerHeader(options_.peer_secret)),
      credentials_(options_.credentials != nullptr ? options_.credentials
                                                   : grpc::InsecureChannelCredentials()) {}

PeerClient::~PeerClient() {
  // Every channel is released here, on the owner's thread, once no
  // callback holds one: gRPC frees a channel's callback queue twice when
  // the channel's last reference goes on that queue's own thread.
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  mu_.Await(absl::Condition(&idle));
}

PeerClient::InFlight PeerClient::StartCall() {
  {
    absl::MutexLock lock(&mu_);
    ++in_flight_;
  }
  return InFlight(this, [](PeerClient* client) {
    absl::MutexLock lock(&client->mu_);
    --client->in_flight_;
  });
}

std::shared_ptr<v1::KvCluster::Stub> PeerClient::Stub(const v1::ClusterNode& node) {
  absl::MutexLock lock(&mu_);
  Peer& peer = peers_[node.node_id()];
  if (peer.stub == nullptr || peer.address != node.control_address() ||
      peer.incarnation != node.incarnation()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    // The replaced channel is kept until no call uses it, and released
    // here, not by the call's callback (see ~PeerClient).
    if (peer.stub != nullptr) retired_.push_back(std::move(peer.stub));
    retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                  [](const std::shared_ptr<v1::KvCluster::Stub>& stub) {
                                    return stub.use_count() == 1;
                                  }),
                   retired_.end());
    peer.address = node.control_address();
    peer.incarnation = node.incarnation();
    peer.stub = v1::KvCluster::NewStub(grpc::CreateCustomChannel(peer.address, credentials_, args));
  }
  return peer.stub;
}

void PeerClient::Prepare(grpc::ClientContext* context, absl::Time deadline,
                         const std::string* authorization) const {
  if (deadline != absl::InfiniteFuture()) context->set_deadline(absl::ToChronoTime(deadline));
  const std::string& credential = authorization != nullptr ? *authorization : bearer_;
  if (!credential.empty()) context->AddMetadata("authorization", credential);
  // Only the admin forwards carry an operator's credential.
  if (authorization != nullptr) context->AddMetadata(kAdminForwardedKey, "1");
}

template <typename Resp, typename Req, typename Call>
absl::StatusOr<Resp> PeerClient::Unary(const char* method, const v1::ClusterNode& node,
                                       const Req& req, absl::Time deadline, PeerCallGroup* group,
                                       const std::string* authorization, Call call) {
  std::shared_ptr<v1::KvCluster::Stub> stub = Stub(node);
  grpc::ClientContext context;
  Prepare(&context, deadline, authorization);
  if (group != nullptr && !group->Add(&context)) {
    return PeerError(method, node, absl::CancelledError("shutting down"));
  }
  Resp resp;
  const absl::Status s = FromGrpcStatus(call(stub.get(), &context, req, &resp));
  if (group != nullptr) group->Remove(&context);
  if (!s.ok()) return PeerError(method, node, s);
  return resp;
}

// One line per unary RPC: the generated stub's blocking method.
#define KV_PEER_CALL(Method, Group, Authorization)                                              \
  Unary<v1::Method##Response>(                                                                  \
      #Method, node, req, deadline, Group, Authorization,                                       \
      [](v1::KvCluster::Stub* stub, grpc::ClientContext* context, const v1::Method##Request& r, \
         v1::Method##Response* out) { return stub->Method(context, r, out); })
#define KV_PEER_UNARY(Method, Group) KV_PEER_CALL(Method, Group, nullptr)
#define KV_PEER_ADMIN(Method) KV_PEER_CALL(Method, nullptr, &authorization)

absl::StatusOr<v1::ReplicaStatusResponse> PeerClient::ReplicaStatus(
    const v1::ClusterNode& node, const v1::ReplicaStatusRequest& req, absl::Time deadline) {
  return KV_PEER_UNARY(ReplicaStatus, nullptr);
}

absl::StatusOr<v1::ShardDigestResponse> PeerClient::ShardDigest(const v1::ClusterNode& node,
                                                                const v1::ShardDigestRequest& req,
                                                                absl::Time deadline) {
  return KV_PEER_UNARY(ShardDigest, nullptr);
}

absl::StatusOr<v1::ReconcileSlotsResponse> PeerClient::ReconcileSlots(
    const v1::ClusterNode& node, const v1::ReconcileSlotsRequest& req, absl::Time deadline) {
  return KV_PEER_UNARY(ReconcileSlots, nullptr);
}

absl::StatusOr<v1::ReportInSyncResponse> PeerClient::ReportInSync(
    const v1::ClusterNode& node, const v1::ReportInSyncRequest& req, absl::Time deadline) {
  return KV_PEER_UNARY(ReportInSync, nullptr);
}

absl::StatusOr<v1::BeginImportResponse> PeerClient::BeginImport(const v1::ClusterNode& node,
                                                                const v1::BeginImportRequest& req,
                                                                absl::Time deadline,
                                                                PeerCallGroup* group) {
  return KV_PEER_UNARY(BeginImport, group);
}

absl::StatusOr<v1::ImportEntriesResponse> PeerClient::ImportEntries(
    const v1::ClusterNode& node, const v1::ImportEntriesRequest& req, absl::Time deadline,
    PeerCallGroup* group) {
  return KV_PEER_UNARY(ImportEntries, group);
}

absl::StatusOr<v1::AcceptHandoffResponse> PeerClient::AcceptHandoff(
    const v1::ClusterNode& node, const v1::AcceptHandoffRequest& req, absl::Time deadline,
    PeerCallGroup* group) {
  return KV_PEER_UNARY(AcceptHandoff, group);
}

absl::StatusOr<v1::FailoverResponse> PeerClient::Failover(const v1::ClusterNode& node,
                                                          const v1::FailoverRequest& req,
                                                          absl::Time deadline,
                                                          const std::string& authorization) {
  return KV_PEER_ADMIN(Failover);
}

absl::StatusOr<v1::RemoveNodeResponse> PeerClient::RemoveNode(const v1::ClusterNode& node,
                                                              const v1::RemoveNodeRequest& req,
                                                              absl::Time deadline,
                                                              const std::string& authorization) {
  return KV_PEER_ADMIN(RemoveNode);
}

absl::StatusOr<v1::AddNodeResponse> PeerClient::AddNode(const v1::ClusterNode& node,
                                                        const v1::AddNodeRequest& req,
                                                        absl::Time deadline,
                                                        const std::string& authorization) {
  return KV_PEER_ADMIN(AddNode);
}

absl::StatusOr<v1::RebalanceResponse> PeerClient::Rebalance(const v1::ClusterNode& node,
                                                            const v1::RebalanceRequest& req,
                                                            absl::Time deadline,
                                                            const std::string& authorization) {
  return KV_PEER_ADMIN(Rebalance);
}

absl::StatusOr<v1::AcceptLossResponse> PeerClient::AcceptLoss(const v1::ClusterNode& node,
                                                              const v1::AcceptLossRequest& req,
                                                              absl::Time deadline,
                                                              const std::string& authorization) {
  return KV_PEER_ADMIN(AcceptLoss);
}

#undef KV_PEER_UNARY

namespace {

// What an asynchronous call keeps until its callback ran. `in_flight` is
// declared first so that it is destroyed last: the client's destructor
// waits for it, and by then the call holds no channel.
template <typename Resp>
struct AsyncCall {
  explicit AsyncCall(PeerClient::InFlight in_flight) : in_flight(std::move(in_flight)) {}
  PeerClient::InFlight in_flight;
  std::shared_ptr<v1::KvCluster::Stub> stub;
  grpc::ClientContext context;
  Resp resp;
};

}  // namespace

void PeerClient::StartReplicate(const v1::ClusterNode& node, const v1::ReplicateRequest& req,
                                absl::Time deadline, Done done) {
  auto call = std::make_shared<AsyncCall<v1::ReplicateResponse>>(StartCall());
  Prepare(&call->context, deadline);
  call->stub = Stub(node);
  // The callback keeps the call (with its stub: a newer address may
  // replace it in the cache meanwhile) and a copy of the node for the error.
  call->stub->async()->Replicate(&call->context, &req, &call->resp,
                                 [call, node, done = std::move(done)](grpc::Status s) {
                                   done(PeerError("Replicate", node, FromGrpcStatus(s)));
                                 });
}

void PeerClient::StartImportWrite(const v1::ClusterNode& node, const v1::ImportWriteRequest& req,
                                  absl::Time deadline, Done done) {
  auto call = std::make_shared<AsyncCall<v1::ImportWriteResponse>>(StartCall());
  Prepare(&call->context, deadline);
  call->stub = Stub(node);
  call->stub->async()->ImportWrite(&call->context, &req, &call->resp,
                                   [call, node, done = std::move(done)](grpc::Status s) {
                                     done(PeerError("ImportWrite", node, FromGrpcStatus(s)));
                                   });
}

std::shared_ptr<v1::KvCluster::Stub> PeerClient::BindReplicateStream(const v1::ClusterNode& node,
                                                                     grpc::ClientContext* context,
                                                                     StreamReactor* reactor) {
  std::shared_ptr<v1::KvCluster::Stub> stub = Stub(node);
  Prepare(context, absl::InfiniteFuture());
  stub->async()->ReplicateStream(context, reactor);
  return stub;
}

absl::Status PeerClient::SyncShard(
    const v1::ClusterNode& node, const v1::SyncShardRequest& req, absl::Time deadline,
    PeerCallGroup* group, absl::FunctionRef<absl::Status(const v1::SyncShardChunk&)> on_chunk) {
  std::shared_ptr<v1::KvCluster::Stub> stub = Stub(node);
  grpc::ClientContext context;
  Prepare(&context, deadline);
  if (group != nullptr && !group->Add(&context)) {
    return PeerError("SyncShard", node, absl::CancelledError("shutting down"));
  }
  std::unique_ptr<grpc::ClientReader<v1::SyncShardChunk>> reader = stub->SyncShard(&context, req);
  v1::SyncShardChunk chunk;
  absl::Status failed;
  while (failed.ok() && reader->Read(&chunk)) failed = on_chunk(chunk);
  if (!failed.ok()) {
    // The rest of the stream is drained, not read: Finish needs it done.
    context.TryCancel();
    while (reader->Read(&chunk)) {
    }
  }
  const absl::Status finished = FromGrpcStatus(reader->Finish());
  if (group != nullptr) group->Remove(&context);
  if (!failed.ok()) return failed;
  return PeerError("SyncShard", node, finished);
}

}  // namespace server
}  // namespace kvstore
