// Copyright 2026 The kvstore Authors.
//
// PeerClient against in-test KvCluster services on loopback: the token on
// every call, a peer's refusal arriving typed (payload kept, message naming
// the call and the peer) on blocking, asynchronous and streaming calls,
// deadlines, a group's cancellation, and a node that moved to another
// address getting a new channel. No timing is measured: a call that must
// end early is held by the service until the test has seen it end.

#include "server/cluster/peer/peer_client.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/grpc_status.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Answers from a fixed script; records the authorization header; BeginImport
// blocks until released (a peer that stopped answering).
class FakePeer final : public v1::KvCluster::Service {
 public:
  explicit FakePeer(uint64_t applied) : applied_(applied) {}

  grpc::Status ReplicaStatus(grpc::ServerContext* context, const v1::ReplicaStatusRequest*,
                             v1::ReplicaStatusResponse* resp) override {
    Record(context);
    resp->set_applied_seq(applied_);
    return grpc::Status::OK;
  }
  grpc::Status Failover(grpc::ServerContext* context, const v1::FailoverRequest*,
                        v1::FailoverResponse*) override {
    Record(context);
    return grpc::Status::OK;
  }
  grpc::Status Replicate(grpc::ServerContext* context, const v1::ReplicateRequest* req,
                         v1::ReplicateResponse*) override {
    Record(context);
    return ToGrpcStatus(cluster::ToStatus(
        cluster::Refusal::MapBehind(absl::StrCat("shard ", req->shard_id(), " not here yet"))));
  }
  grpc::Status BeginImport(grpc::ServerContext* context, const v1::BeginImportRequest*,
                           v1::BeginImportResponse*) override {
    Record(context);
    {
      absl::MutexLock lock(&mu_);
      ++entered_;
    }
    release_.WaitForNotification();
    return grpc::Status::OK;
  }
  grpc::Status SyncShard(grpc::ServerContext* context, const v1::SyncShardRequest*,
                         grpc::ServerWriter<v1::SyncShardChunk>* writer) override {
    Record(context);
    for (int i = 0; i < 3 && !context->IsCancelled(); ++i) {
      v1::SyncShardChunk chunk;
      chunk.add_entries(absl::StrCat("entry", i));
      chunk.set_done(i == 2);
      if (!writer->Write(chunk)) break;
    }
    return grpc::Status::OK;
  }

  std::vector<std::string> tokens() {
    absl::MutexLock lock(&mu_);
    return tokens_;
  }
  // Waits until `n` BeginImport calls reached the service.
  void AwaitEntered(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }

 private:
  void Record(grpc::ServerContext* context) {
    auto it = context->client_metadata().find("authorization");
    absl::MutexLock lock(&mu_);
    tokens_.push_back(it == context->client_metadata().end()
                          ? "<none>"
                          : std::string(it->second.data(), it->second.size()));
  }

  const uint64_t applied_;
  absl::Mutex mu_;
  std::vector<std::string> tokens_ ABSL_GUARDED_BY(mu_);
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Notification release_;
};

struct PeerServer {
  explicit PeerServer(uint64_t applied) : service(applied) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~PeerServer() {
    service.Release();
    server->Shutdown();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  FakePeer service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

v1::ClusterNode NodeAt(const std::string& address, uint64_t incarnation = 1) {
  v1::ClusterNode node;
  node.set_node_id("n1");
  node.set_incarnation(incarnation);
  node.set_control_address(address);
  return node;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(30); }

TEST(PeerClient, SendsTheTokenAndReturnsTheAnswer) {
  PeerServer peer(42);
  ASSERT_NE(peer.server, nullptr);
  PeerClient client({"sekret"});
  auto resp = client.ReplicaStatus(NodeAt(peer.address()), v1::ReplicaStatusRequest(), Soon());
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->applied_seq(), 42u);
  PeerClient anonymous({});
  ASSERT_TRUE(anonymous.ReplicaStatus(NodeAt(peer.address()), {}, Soon()).ok());
  EXPECT_THAT(peer.service.tokens(), ::testing::ElementsAre("Bearer sekret", "<none>"));
}

// A forwarded admin request carries the operator's credential, never the
// cluster secret: a peer is not an admin, so the controller must see who
// asked.
TEST(PeerClient, AnAdminForwardCarriesTheOperatorsCredentialNotTheSecret) {
  PeerServer peer(1);
  ASSERT_NE(peer.server, nullptr);
  PeerClient client({"cluster-secret"});
  ASSERT_TRUE(client.Failover(NodeAt(peer.address()), {}, Soon(), "Bearer operator-token").ok());
  ASSERT_TRUE(client.Failover(NodeAt(peer.address()), {}, Soon(), "").ok());
  EXPECT_THAT(peer.service.tokens(), ::testing::ElementsAre("Bearer operator-token", "<none>"));
}

// The peer's refusal keeps its type across the hop, whichever way the call
// was made; the message says which call on which peer.
TEST(PeerClient, APeersRefusalArrivesTyped) {
  PeerServer peer(0);
  ASSERT_NE(peer.server, nullptr);
  PeerClient client({});
  const v1::ClusterNode node = NodeAt(peer.address());
  v1::ReplicateRequest req;
  req.set_shard_id(7);
  absl::Notification done;
  absl::Status got;
  client.StartReplicate(node, req, Soon(), [&](absl::Status s) {
    got = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(got.code(), absl::StatusCode::kUnavailable) << got;
  EXPECT_THAT(std::string(got.message()),
              StartsWith(absl::StrCat("Replicate on n1 (", peer.address(), "): map behind")));
  EXPECT_TRUE(cluster::IsRefusal(got, cluster::RefusalKind::kMapBehind)) << got;
  EXPECT_TRUE(cluster::CertainlyNoEffect(got));
}

TEST(PeerClient, AStreamIsReadInOrderAndStopsAtTheFirstError) {
  PeerServer peer(0);
  ASSERT_NE(peer.server, nullptr);
  PeerClient client({});
  const v1::ClusterNode node = NodeAt(peer.address());
  std::vector<std::string> entries;
  absl::Status s = client.SyncShard(node, v1::SyncShardRequest(), absl::InfiniteFuture(), nullptr,
                                    [&](const v1::SyncShardChunk& chunk) {
                                      entries.push_back(chunk.entries(0));
                                      return absl::OkStatus();
                                    });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(entries, ::testing::ElementsAre("entry0", "entry1", "entry2"));
  s = client.SyncShard(node, v1::SyncShardRequest(), absl::InfiniteFuture(), nullptr,
                       [&](const v1::SyncShardChunk&) { return absl::DataLossError("bad entry"); });
  EXPECT_EQ(s, absl::DataLossError("bad entry"));
}

// A peer that does not answer: the call ends at its deadline, and a
// group's cancellation ends it at once (and every later call of the group).
TEST(PeerClient, DeadlinesAndCancellationEndCallsAPeerHolds) {
  PeerServer peer(0);
  ASSERT_NE(peer.server, nullptr);
  PeerClient client({});
  const v1::ClusterNode node = NodeAt(peer.address());
  auto late = client.BeginImport(node, {}, absl::Now() + absl::Milliseconds(50), nullptr);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_THAT(std::string(late.status().message()), StartsWith("BeginImport on n1 ("));

  PeerCallGroup group;
  absl::Status cancelled;
  std::thread caller([&] { cancelled = client.BeginImport(node, {}, Soon(), &group).status(); });
  peer.service.AwaitEntered(2);  // in flight at the peer
  group.CancelAll();
  caller.join();  // before the peer answers: it is still held
  EXPECT_EQ(cancelled.code(), absl::StatusCode::kCancelled) << cancelled;
  const size_t calls = peer.service.tokens().size();
  EXPECT_EQ(client.BeginImport(node, {}, Soon(), &group).status().code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(peer.service.tokens().size(), calls);  // never sent
  peer.service.Release();
}

// A node that restarted elsewhere (a new address or incarnation) is
// reached there: the cached channel is replaced.
TEST(PeerClient, ANodeThatMovedIsReachedAtItsNewAddress) {
  PeerServer first(1), second(2);
  ASSERT_NE(first.server, nullptr);
  ASSERT_NE(second.server, nullptr);
  PeerClient client({});
  auto a = client.ReplicaStatus(NodeAt(first.address()), {}, Soon());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->applied_seq(), 1u);
  auto b = client.ReplicaStatus(NodeAt(second.address(), 2), {}, Soon());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->applied_seq(), 2u);
}

// A gRPC channel must not be destroyed on its own callback thread (gRPC
// shuts the channel's callback queue down there and frees it twice). An
// asynchronous call whose channel was replaced while it ran (the node came
// back as a new incarnation), or whose client went away as soon as the
// callback ran, used to drop the channel's last reference in the callback.
// Under ASan (the CI pass) that was a double free; here the client
// outlives its callbacks and keeps every channel until it is destroyed.
TEST(PeerClient, ChannelsOutliveTheCallbacksOfTheirCalls) {
  PeerServer peer(0);
  ASSERT_NE(peer.server, nullptr);
  v1::ReplicateRequest req;
  for (int round = 0; round < 50; ++round) {
    auto client = std::make_unique<PeerClient>(PeerClientOptions{});
    absl::Notification done;
    client->StartReplicate(NodeAt(peer.address(), 1), req, Soon(),
                           [&](absl::Status) { done.Notify(); });
    // The same node as a new incarnation: a new channel replaces the one
    // the call above is using.
    ASSERT_TRUE(client->ReplicaStatus(NodeAt(peer.address(), 2), {}, Soon()).ok());
    done.WaitForNotification();
    client.reset();  // waits for the callback to have returned
  }
}

TEST(PeerClient, PeerErrorKeepsCodeAndPayloads) {
  const absl::Status refusal = cluster::ToStatus(cluster::Refusal::StaleShardEpoch("3 < 4"));
  const absl::Status s = PeerError("ReportInSync", NodeAt("h:1"), refusal);
  EXPECT_EQ(s.code(), refusal.code());
  EXPECT_EQ(s.message(), "ReportInSync on n1 (h:1): stale shard epoch: 3 < 4");
  EXPECT_EQ(cluster::FromStatus(s), cluster::FromStatus(refusal));
  EXPECT_TRUE(PeerError("X", NodeAt("h:1"), absl::OkStatus()).ok());
  EXPECT_THAT(std::string(PeerError("X", NodeAt("h:1"), absl::InternalError("boom")).message()),
              HasSubstr("boom"));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
