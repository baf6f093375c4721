// Copyright 2026 The kvstore Authors.
//
// Forged cluster calls against real nodes (replication_test_util: real
// stores, replicators, installers and the real KvCluster service on
// loopback gRPC). Each case is a call a data client could make before peers
// and admins had credentials of their own, or one a peer could send that
// does not fit the shard; after each the data must be exactly as before.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/auth/credentials.h"
#include "common/auth/token.h"
#include "common/cluster/slots.h"
#include "common/metrics/testing.h"
#include "common/protocol/layout.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "server/cluster/replication/replication_test_util.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::metrics::testing::Value;
using ::kvstore::server::testing::FakeMapStore;
using ::kvstore::server::testing::kTestClusterSecret;
using ::kvstore::server::testing::Node;
using ::kvstore::server::testing::NodeOptions;
using ::kvstore::server::testing::OneShardMap;
using ::kvstore::server::testing::TwoShardMap;

constexpr char kDataToken[] = "data-token-0123456789abcdef";
constexpr char kAdminToken[] = "admin-token-0123456789abcdef";

class PeerChecksTest : public ::testing::Test {
 protected:
  void Start(int n) {
    NodeOptions options;
    options.credentials.data_token = kDataToken;
    options.credentials.admin_token = kAdminToken;
    options.credentials.peer_secret = kTestClusterSecret;
    for (int i = 0; i < n; ++i) {
      nodes_.push_back(std::make_unique<Node>(absl::StrCat("n", i), &maps_, options));
    }
  }
  std::vector<Node*> nodes() {
    std::vector<Node*> v;
    for (auto& n : nodes_) v.push_back(n.get());
    return v;
  }
  Node& node(int i) { return *nodes_[i]; }

  // A Replicate to node `to`, sent with `token`.
  grpc::Status Replicate(int to, const v1::ReplicateRequest& req,
                         const std::string& token = kTestClusterSecret) {
    auto stub = node(to).NewStub(token);
    grpc::ClientContext ctx;
    v1::ReplicateResponse resp;
    return stub->Replicate(&ctx, req, &resp);
  }

  // The Replicate a primary n0 (incarnation 100) of shard 0 at epoch 1
  // would send for `key`.
  static v1::ReplicateRequest Forged(const std::string& key, v1::ReplicaOp op, uint64_t seq) {
    v1::ReplicateRequest r;
    r.set_shard_id(0);
    r.set_shard_epoch(1);
    r.set_seq(seq);
    r.set_op(op);
    r.set_key(key);
    r.set_primary_node_id("n0");
    r.set_primary_incarnation(100);
    if (op == v1::REPLICA_OP_PUT) {
      std::string entry(layout::EntryBytes(key.size(), 19), '\0');
      layout::EncodeEntry(entry.data(), key, "planted-by-a-client", 1);
      r.set_entry(entry);
    }
    return r;
  }

  FakeMapStore maps_;  // outlives the nodes, which it points to
  std::vector<std::unique_ptr<Node>> nodes_;
};

// The status of a call of KvCluster method `method` carrying `token`, with
// an empty request, made without the generated stub so that every method
// of the service descriptor is reached, one added later included.
grpc::Status CallMethod(int port, const std::string& method, const std::string& token) {
  grpc::GenericStub stub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  ctx.AddMetadata("authorization", auth::BearerHeader(token));
  grpc::CompletionQueue cq;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

// Every KvCluster method, as the .proto declares it: a data client reaches
// only the map; a peer none of the admin requests; an admin none of the
// peer calls. A method added without a rule fails here (it answers
// PERMISSION_DENIED to everyone, or, if wired around the table, not to the
// data token).
TEST_F(PeerChecksTest, EveryClusterRpcRefusesThePrincipalsItIsNotFor) {
  Start(2);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  ASSERT_TRUE(node(0).Put("acked", "value").ok());
  ASSERT_EQ(node(1).Value("acked"), "value");
  const google::protobuf::ServiceDescriptor* service =
      v1::ReplicateRequest::descriptor()->file()->FindServiceByName("KvCluster");
  ASSERT_NE(service, nullptr);
  int peer_methods = 0;
  int admin_methods = 0;
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string name = service->method(i)->name();
    const std::string method = absl::StrCat("/", service->full_name(), "/", name);
    const grpc::Status data = CallMethod(node(1).port(), method, kDataToken);
    const grpc::Status admin = CallMethod(node(1).port(), method, kAdminToken);
    const grpc::Status peer = CallMethod(node(1).port(), method, kTestClusterSecret);
    if (name == "GetClusterMap") {
      EXPECT_TRUE(data.ok()) << name << ": " << data.error_message();
      EXPECT_TRUE(peer.ok()) << name << ": " << peer.error_message();
      continue;
    }
    EXPECT_EQ(data.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << name << " answered the data token: " << data.error_message();
    const bool for_admins = admin.error_code() != grpc::StatusCode::PERMISSION_DENIED;
    const bool for_peers = peer.error_code() != grpc::StatusCode::PERMISSION_DENIED;
    EXPECT_NE(for_admins, for_peers) << name << ": exactly one of peer and admin may call it";
    peer_methods += for_peers;
    admin_methods += for_admins;
  }
  EXPECT_EQ(peer_methods, 11);
  EXPECT_EQ(admin_methods, 5);
  EXPECT_GE(Value(node(1).registry(), "kvstore_grpc_permission_denied_total"),
            static_cast<uint64_t>(service->method_count() - 1));
  // None of those calls changed anything.
  EXPECT_EQ(node(1).Value("acked"), "value");
  EXPECT_EQ(node(0).Value("acked"), "value");
}

// The forged delete with the data token: refused before it is read; the
// backup keeps the acknowledged value and its applied seq.
TEST_F(PeerChecksTest, ADataClientCannotReplicate) {
  Start(2);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  ASSERT_TRUE(node(0).Put("acked", "value").ok());
  const uint64_t applied = node(1).installer().Status(0).applied_seq();
  const grpc::Status s =
      Replicate(1, Forged("acked", v1::REPLICA_OP_DELETE, ~uint64_t{0}), kDataToken);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_EQ(node(1).Value("acked"), "value");
  EXPECT_EQ(node(1).installer().Status(0).applied_seq(), applied);
}

// Even with the peer credential a seq no primary takes is refused: recorded,
// 2^64-1 would make this backup look newest to the controller and wrap the
// shard's seqs after a promotion.
TEST_F(PeerChecksTest, ASeqNoPrimaryTakesIsRefused) {
  Start(2);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  ASSERT_TRUE(node(0).Put("acked", "value").ok());
  const uint64_t applied = node(1).installer().Status(0).applied_seq();
  for (uint64_t seq : {~uint64_t{0}, kMaxReplicaSeq + 1, uint64_t{0}}) {
    const grpc::Status s = Replicate(1, Forged("acked", v1::REPLICA_OP_DELETE, seq));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << seq << ": " << s.error_message();
  }
  EXPECT_EQ(node(1).Value("acked"), "value");
  EXPECT_EQ(node(1).installer().Status(0).applied_seq(), applied);
  EXPECT_EQ(Value(node(1).registry(), "kvstore_replica_check_refusals_total{check=\"seq\"}"), 3u);
  // The primary's own next write still goes through.
  ASSERT_TRUE(node(0).Put("acked", "value2").ok());
  EXPECT_EQ(node(1).Value("acked"), "value2");
}

// n1 backs shard 0 and leads shard 1. A "shard 0" write of a shard-1 key
// would change n1's shard-1 data behind shard 1's replication: refused.
TEST_F(PeerChecksTest, AWriteOfAnotherShardsKeyIsRefused) {
  Start(2);
  maps_.Set(TwoShardMap(nodes(), {0, 1}, {1, 0}, v1::MIGRATION_STATE_UNSPECIFIED, 0));
  std::string other;  // a key of shard 1 (slots 8192..)
  std::string planted;
  for (int i = 0; other.empty() || planted.empty(); ++i) {
    std::string k = absl::StrCat("key", i);
    if (cluster::KeySlot(k) < 8192) continue;
    (other.empty() ? other : planted) = k;
  }
  ASSERT_TRUE(node(1).Put(other, "value").ok());  // n1 leads shard 1
  ASSERT_EQ(node(0).Value(other), "value");
  const grpc::Status del = Replicate(1, Forged(other, v1::REPLICA_OP_DELETE, 5));
  EXPECT_EQ(del.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << del.error_message();
  const grpc::Status put = Replicate(1, Forged(planted, v1::REPLICA_OP_PUT, 6));
  EXPECT_EQ(put.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << put.error_message();
  EXPECT_EQ(node(1).Value(other), "value");
  EXPECT_EQ(node(1).Value(planted), "<NOT_FOUND>");
  EXPECT_EQ(Value(node(1).registry(), "kvstore_replica_check_refusals_total{check=\"slot\"}"), 2u);
}

// Incarnation 0 used to skip the check: it is no wildcard.
TEST_F(PeerChecksTest, AZeroIncarnationIsNotTheSender) {
  Start(2);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  ASSERT_TRUE(node(0).Put("acked", "value").ok());
  v1::ReplicateRequest r = Forged("acked", v1::REPLICA_OP_DELETE, 1000);
  r.set_primary_incarnation(0);
  EXPECT_EQ(Replicate(1, r).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(node(1).Value("acked"), "value");
  EXPECT_EQ(
      Value(node(1).registry(), "kvstore_replica_check_refusals_total{check=\"incarnation\"}"), 1u);
}

// The backup's map checks are remembered per thread for the last write
// they passed (the writes of a batch share them): a write that differs in
// shard epoch, primary or incarnation is checked whole right after one that
// passed, and refused.
TEST_F(PeerChecksTest, ARememberedCheckCoversOnlyTheSameWrite) {
  Start(2);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {}));
  ASSERT_TRUE(node(0).Put("acked", "value").ok());  // n1 has the map
  const v1::ClusterMap map = maps_.Current();
  ReplicaCommit c;
  c.shard_id = 0;
  c.shard_epoch = map.shards(0).shard_epoch();
  c.primary_node_id = "n0";
  for (const v1::ClusterNode& n : map.nodes()) {
    if (n.node_id() == "n0") c.primary_incarnation = n.incarnation();
  }
  c.is_delete = true;
  c.key = "never-written";
  uint64_t seq = node(1).installer().Status(0).applied_seq();
  auto apply = [&](ReplicaCommit w) {
    w.seq = ++seq;
    return node(1).installer().ApplyReplicaCommit(w, [] { return absl::OkStatus(); });
  };
  ASSERT_TRUE(apply(c).ok());
  ASSERT_TRUE(apply(c).ok());  // answered from the memo
  ReplicaCommit other = c;
  other.primary_incarnation += 1;
  EXPECT_EQ(apply(other).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(apply(c).ok());
  other = c;
  other.primary_node_id = "n1";
  EXPECT_EQ(apply(other).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(apply(c).ok());
  other = c;
  other.shard_epoch += 1;
  EXPECT_FALSE(apply(other).ok());
  EXPECT_TRUE(apply(c).ok());
  EXPECT_EQ(node(1).Value("acked"), "value");
}

// The second probe: a client marks an empty replica in sync, then fails
// the shard over to it. Both calls are refused; the map is unchanged.
TEST_F(PeerChecksTest, ADataClientCannotPromoteAReplicaOrFailOver) {
  Start(3);
  maps_.Set(OneShardMap(nodes(), {0, 1}, {2}));
  const v1::ClusterMap before = maps_.Current();
  auto stub = node(0).NewStub(kDataToken);
  {
    grpc::ClientContext ctx;
    v1::ReportInSyncRequest req;
    req.set_shard_id(0);
    req.set_node_id("n2");
    req.set_incarnation(102);
    req.set_shard_epoch(1);
    v1::ReportInSyncResponse resp;
    EXPECT_EQ(stub->ReportInSync(&ctx, req, &resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  for (const std::string& token : {std::string(kDataToken), std::string(kTestClusterSecret)}) {
    grpc::ClientContext ctx;
    v1::FailoverRequest req;
    req.set_shard_id(0);
    req.set_target_node("n2");
    v1::FailoverResponse resp;
    EXPECT_EQ(node(0).NewStub(token)->Failover(&ctx, req, &resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(maps_.Current().SerializeAsString(), before.SerializeAsString());
}

}  // namespace
}  // namespace server
}  // namespace kvstore
