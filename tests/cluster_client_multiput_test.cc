// Copyright 2026 The kvstore Authors.
//
// The cluster client's MultiPut gives every pair its own outcome. One fake
// node (an in-test RESP listener with a small store, a KvControl handshake
// and a KvCluster map naming it primary of every slot) scripts the answers:
//   * k1 is stored, k2 is refused TRYAGAIN (no effect), and meanwhile
//     another client's write of k1 is acknowledged: the client stores k2
//     again, alone, and never k1, which keeps the other client's value (a
//     resent k1 would undo a write acknowledged after it was stored);
//   * the connection breaks after the pairs were sent: those pairs are of
//     unknown outcome, reported so, and not sent again.

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/kv_client.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/slots.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "proto/kv_control.grpc.pb.h"
#include "tests/testing/fake_resp_server.h"

namespace kvstore {
namespace {

using ::kvstore::testing::FakeRespServer;
using ::testing::HasSubstr;

// KvControl whose handshake sends the client to the RESP port `resp_port`.
class FakeControlService final : public v1::KvControl::Service {
 public:
  explicit FakeControlService(int resp_port) : resp_port_(resp_port) {}
  grpc::Status Handshake(grpc::ServerContext*, const v1::HandshakeRequest*,
                         v1::HandshakeResponse* resp) override {
    resp->set_epoch(1);
    resp->mutable_limits()->set_max_key_bytes(1024);
    resp->mutable_limits()->set_max_value_bytes(1 << 20);
    resp->mutable_limits()->set_max_batch_keys(128);
    resp->mutable_endpoints()->set_resp_address(absl::StrCat("127.0.0.1:", resp_port_));
    return grpc::Status::OK;
  }

 private:
  const int resp_port_;
};

// KvCluster handing out one map, whose node's control address is set once
// the gRPC server listens.
class FakeClusterService final : public v1::KvCluster::Service {
 public:
  explicit FakeClusterService(v1::ClusterMap map) : map_(std::move(map)) {}
  void SetControlAddress(const std::string& address) {
    absl::MutexLock lock(&mu_);
    map_.mutable_nodes(0)->set_control_address(address);
  }
  grpc::Status GetClusterMap(grpc::ServerContext*, const v1::GetClusterMapRequest*,
                             v1::GetClusterMapResponse* resp) override {
    absl::MutexLock lock(&mu_);
    *resp->mutable_map() = map_;
    resp->set_node_id("n1");
    return grpc::Status::OK;
  }

 private:
  absl::Mutex mu_;
  v1::ClusterMap map_ ABSL_GUARDED_BY(mu_);
};

// The fake node's store; the test scripts what each SET does.
class Store {
 public:
  void Set(const std::string& k, const std::string& v) {
    absl::MutexLock lock(&mu_);
    values_[k] = v;
  }
  std::string Get(const std::string& k) const {
    absl::MutexLock lock(&mu_);
    auto it = values_.find(k);
    return it == values_.end() ? "<absent>" : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

class ClusterClientMultiPutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    control_ = std::make_unique<FakeControlService>(resp_.port());
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &grpc_port_);
    b.RegisterService(control_.get());
    v1::ClusterMap m;
    m.set_epoch(3);
    m.set_replication_factor(1);
    m.set_cluster_name("test");
    v1::Shard* shard = m.add_shards();
    shard->set_shard_id(0);
    shard->set_shard_epoch(1);
    *shard->add_slots() = cluster::EvenSlotRanges(1)[0];
    shard->add_replicas("n1");
    v1::ClusterNode* n = m.add_nodes();
    n->set_node_id("n1");
    n->set_incarnation(1);
    n->set_resp_address(absl::StrCat("127.0.0.1:", resp_.port()));
    // The map service is on the node's own gRPC server, as on a kvserver.
    cluster_ = std::make_unique<FakeClusterService>(m);
    b.RegisterService(cluster_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    cluster_->SetControlAddress(absl::StrCat("127.0.0.1:", grpc_port_));
  }
  void TearDown() override { server_->Shutdown(); }

  std::unique_ptr<client::KvClient> Client() {
    client::Options o;
    o.servers = {absl::StrCat("127.0.0.1:", grpc_port_)};
    o.transport = client::TransportMode::kTcp;
    o.connect_timeout = absl::Seconds(5);
    o.op_timeout = absl::Seconds(30);
    auto c = client::KvClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  // The SETs the node received, as "key=value".
  std::vector<std::string> Sets() const {
    std::vector<std::string> out;
    for (const auto& r : resp_.received()) {
      if (r.args.size() == 3 && r.args[0] == "SET") out.push_back(r.args[1] + "=" + r.args[2]);
    }
    return out;
  }

  Store store_;
  FakeRespServer resp_;
  std::unique_ptr<FakeControlService> control_;
  std::unique_ptr<FakeClusterService> cluster_;
  std::unique_ptr<grpc::Server> server_;
  int grpc_port_ = 0;
};

TEST_F(ClusterClientMultiPutTest, APairRefusedIsSentAgainAloneAndAStoredPairNever) {
  std::atomic<int> k2_sets{0};
  resp_.On("SET", [&](const FakeRespServer::Request& r) {
    if (r.args[1] == "k2" && k2_sets.fetch_add(1) == 0) {
      // While k2 is refused, another client's write of k1 is acknowledged.
      store_.Set("k1", "c1");
      return FakeRespServer::Reply::Error(absl::StrCat(
          "TRYAGAIN Hash slot ", cluster::KeySlot("k2"), " is being handed to another shard"));
    }
    store_.Set(r.args[1], r.args[2]);
    return FakeRespServer::Reply::Ok();
  });
  auto c = Client();
  ASSERT_NE(c, nullptr);
  const absl::Status s = c->MultiPut({{"k1", "a1"}, {"k2", "a2"}});
  EXPECT_TRUE(s.ok()) << s;
  // k1 was stored once and keeps the later write; k2 was stored on its retry.
  EXPECT_EQ(store_.Get("k1"), "c1");
  EXPECT_EQ(store_.Get("k2"), "a2");
  EXPECT_THAT(Sets(), ::testing::ElementsAre("k1=a1", "k2=a2", "k2=a2"));
}

// The node breaks the connection on k2's SET: k2, and k3 sent with it, may
// or may not have been stored. Each is reported kUnknown, k1 as stored, and
// none is sent again; MultiPut sums it up as kUnknown naming k2.
TEST_F(ClusterClientMultiPutTest, PairsOfUnknownOutcomeAreReportedSoAndNotSentAgain) {
  resp_.On("SET", [&](const FakeRespServer::Request& r) {
    if (r.args[1] == "k2") return FakeRespServer::Reply::HangUp();
    store_.Set(r.args[1], r.args[2]);
    return FakeRespServer::Reply::Ok();
  });
  auto c = Client();
  ASSERT_NE(c, nullptr);
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"k1", "a1"}, {"k2", "a2"}, {"k3", "a3"}};
  auto each = c->MultiPutEach(pairs);
  ASSERT_TRUE(each.ok()) << each.status();
  ASSERT_EQ(each->size(), 3u);
  EXPECT_TRUE((*each)[0].ok()) << (*each)[0];
  EXPECT_EQ((*each)[1].code(), absl::StatusCode::kUnknown) << (*each)[1];
  EXPECT_THAT(std::string((*each)[1].message()), HasSubstr("outcome unknown"));
  EXPECT_EQ((*each)[2].code(), absl::StatusCode::kUnknown) << (*each)[2];
  const std::vector<std::string> sets = Sets();
  EXPECT_EQ(std::count(sets.begin(), sets.end(), "k1=a1"), 1);
  EXPECT_EQ(std::count(sets.begin(), sets.end(), "k2=a2"), 1);
  EXPECT_LE(std::count(sets.begin(), sets.end(), "k3=a3"), 1);

  resp_.On("SET", [&](const FakeRespServer::Request& r) {
    if (r.args[1] == "k2") return FakeRespServer::Reply::HangUp();
    return FakeRespServer::Reply::Ok();
  });
  const absl::Status s = c->MultiPut({{"k1", "b1"}, {"k2", "b2"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("MultiPut pair 1 of 2, key \"k2\""));
}

}  // namespace
}  // namespace kvstore
