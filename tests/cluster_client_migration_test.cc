// Copyright 2026 The kvstore Authors.
//
// The cluster client across a slot migration (§19.9): a fake source primary
// (an in-test RESP listener and KvControl handshake) answers -TRYAGAIN and
// -ASK as a source in HANDOFF does, and a real single-node KvServer is the
// migration's target. The map (an in-test KvCluster service) puts the
// source's slots in a HANDOFF migration to the target's shard. The server
// side of these answers is tested against the real ClusterState in
// server/resp/resp_cluster_test.cc (MigrationAnswersTryAgainAskThenMoved).
//
// Shows: TRYAGAIN is retried at the same node after a short backoff; ASK
// sends the request once to the named node without a map refresh; both are
// counted; MultiGet/MultiPut keys answered so end up correct; a TRYAGAIN
// that never ends is bounded by cluster_max_attempts.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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
#include "server/kv_server.h"
#include "tests/testing/fake_resp_server.h"

namespace kvstore {
namespace {

using ::kvstore::testing::FakeRespServer;
using ::testing::HasSubstr;

// A RESP node answering the first `tryagains` requests -TRYAGAIN (as the
// RESP port words it) and every later one "-ASK <slot of the request's
// first key> <ask_to>"; commands without a key (READONLY, ASKING) get +OK
// and are not counted.
class HandoffRespServer {
 public:
  HandoffRespServer(int tryagains, std::string ask_to) {
    server_.OnAnyOther([this, tryagains, ask_to](const FakeRespServer::Request& r) {
      if (r.args.size() == 1) return FakeRespServer::Reply::Ok();
      const uint32_t slot = cluster::KeySlot(r.args[1]);
      if (requests_.fetch_add(1) < tryagains) {
        return FakeRespServer::Reply::Error(absl::StrCat(
            "TRYAGAIN Hash slot ", slot, " is being handed to another shard; retry shortly"));
      }
      return FakeRespServer::Reply::Error(absl::StrCat("ASK ", slot, " ", ask_to));
    });
  }
  int port() const { return server_.port(); }
  int requests() const { return requests_.load(); }

 private:
  std::atomic<int> requests_{0};
  FakeRespServer server_;  // last: its threads stop before requests_ goes
};

// KvControl whose handshake sends the client to a HandoffRespServer.
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

// KvCluster handing out one fixed map; counts the calls.
class FakeClusterService final : public v1::KvCluster::Service {
 public:
  explicit FakeClusterService(v1::ClusterMap map) : map_(std::move(map)) {}
  grpc::Status GetClusterMap(grpc::ServerContext*, const v1::GetClusterMapRequest*,
                             v1::GetClusterMapResponse* resp) override {
    calls_.fetch_add(1);
    *resp->mutable_map() = map_;
    resp->set_node_id("map-service");
    return grpc::Status::OK;
  }
  int calls() const { return calls_.load(); }

 private:
  const v1::ClusterMap map_;
  std::atomic<int> calls_{0};
};

struct GrpcServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
};
GrpcServer StartGrpc(std::vector<grpc::Service*> services) {
  GrpcServer g;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &g.port);
  for (grpc::Service* s : services) b.RegisterService(s);
  g.server = b.BuildAndStart();
  return g;
}

v1::ClusterNode NodeOf(const std::string& id, int control_port, int resp_port) {
  v1::ClusterNode n;
  n.set_node_id(id);
  n.set_incarnation(1);
  n.set_control_address(absl::StrCat("127.0.0.1:", control_port));
  n.set_resp_address(absl::StrCat("127.0.0.1:", resp_port));
  return n;
}

class ClusterClientMigrationTest : public ::testing::Test {
 protected:
  // The fake source answers `tryagains` TRYAGAINs, then ASKs to the target.
  void Start(int tryagains) {
    server::KvServerOptions so;
    so.control_port = 0;
    so.resp_port = 0;
    so.pool_bytes = 16ull << 20;
    so.segment_bytes = 1ull << 20;
    so.transport = server::ServerTransport::kTcp;
    auto s = server::KvServer::Start(so);
    ASSERT_TRUE(s.ok()) << s.status();
    target_ = *std::move(s);
    const v1::ClusterNode target = NodeOf("target", target_->control_port(), target_->resp_port());
    source_resp_ = std::make_unique<HandoffRespServer>(tryagains, target.resp_address());
    source_control_ = std::make_unique<FakeControlService>(source_resp_->port());
    source_grpc_ = StartGrpc({source_control_.get()});
    // Shard 0 (the source) owns the lower half, all of it in HANDOFF to
    // shard 1 (the target).
    v1::ClusterMap m;
    m.set_epoch(5);
    m.set_replication_factor(1);
    m.set_cluster_name("test");
    ranges_ = cluster::EvenSlotRanges(2);
    for (int i = 0; i < 2; ++i) {
      v1::Shard* shard = m.add_shards();
      shard->set_shard_id(i);
      shard->set_shard_epoch(1);
      *shard->add_slots() = ranges_[i];
      shard->add_replicas(i == 0 ? "source" : "target");
    }
    *m.add_nodes() = NodeOf("source", source_grpc_.port, source_resp_->port());
    *m.add_nodes() = target;
    v1::Migration* mig = m.add_migrations();
    mig->set_id(1);
    *mig->mutable_slots() = ranges_[0];
    mig->set_source_shard(0);
    mig->set_target_shard(1);
    mig->set_state(v1::MIGRATION_HANDOFF);
    m.set_next_migration_id(2);
    maps_ = std::make_unique<FakeClusterService>(m);
    map_grpc_ = StartGrpc({maps_.get()});
  }

  std::unique_ptr<client::KvClient> Client(int max_attempts = 8) {
    client::Options o;
    o.servers = {map_grpc_.address()};
    o.transport = client::TransportMode::kTcp;
    o.connect_timeout = absl::Seconds(5);
    o.op_timeout = absl::Seconds(5);
    o.cluster_max_attempts = max_attempts;
    auto c = client::KvClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  // The target's own store, through a single-node client.
  std::unique_ptr<client::KvClient> Target() {
    client::Options o;
    o.servers = {absl::StrCat("127.0.0.1:", target_->control_port())};
    o.transport = client::TransportMode::kTcp;
    auto c = client::KvClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  // A key of the migrating (source) half, from "<prefix>0", "<prefix>1", ...
  std::string MigratingKey(absl::string_view prefix, int* i) const {
    for (;; ++*i) {
      std::string key = absl::StrCat(prefix, *i);
      if (cluster::KeySlot(key) <= ranges_[0].end()) return key;
    }
  }
  static uint64_t Metric(const client::KvClient& c, const std::string& name) {
    auto m = c.metrics();
    auto it = m.find(name);
    return it == m.end() ? 0 : it->second;
  }

  std::unique_ptr<server::KvServer> target_;
  std::unique_ptr<HandoffRespServer> source_resp_;
  std::unique_ptr<FakeControlService> source_control_;
  GrpcServer source_grpc_;
  std::unique_ptr<FakeClusterService> maps_;
  GrpcServer map_grpc_;
  std::vector<v1::SlotRange> ranges_;
};

TEST_F(ClusterClientMigrationTest, TryAgainThenAskReachTheTargetWithoutARefresh) {
  Start(/*tryagains=*/2);
  auto c = Client();
  ASSERT_NE(c, nullptr);
  const int map_calls = maps_->calls();
  int i = 0;
  const std::string key = MigratingKey("m", &i);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(c->Put(key, "v").ok());
  // Two TRYAGAINs (5 + 10 ms of backoff), one ASK, then the target.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(15));
  EXPECT_EQ(source_resp_->requests(), 3);
  EXPECT_EQ(*Target()->Get(key), "v");
  EXPECT_EQ(Metric(*c, "kvstore_client_cluster_tryagains_total"), 2u);
  EXPECT_EQ(Metric(*c, "kvstore_client_cluster_asks_total"), 1u);
  // An ASK changes nothing in the map: no refresh, the source asked again.
  EXPECT_EQ(maps_->calls(), map_calls);
  EXPECT_EQ(Metric(*c, "kvstore_client_cluster_map_refreshes_total"), 0u);
  EXPECT_EQ(*c->Get(key), "v");
  EXPECT_EQ(source_resp_->requests(), 4);
  EXPECT_EQ(Metric(*c, "kvstore_client_cluster_asks_total"), 2u);
  EXPECT_TRUE(*c->Exists(key));
  EXPECT_TRUE(c->Delete(key).ok());
  EXPECT_TRUE(absl::IsNotFound(Target()->Get(key).status()));
}

TEST_F(ClusterClientMigrationTest, BatchKeysAnsweredAskEndUpCorrect) {
  Start(/*tryagains=*/1);
  auto c = Client();
  ASSERT_NE(c, nullptr);
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> keys;
  for (int k = 0; k < 20; ++k) {
    // Both halves: the target's own slots and the migrating ones.
    pairs.emplace_back(absl::StrCat("b:", k), absl::StrCat("bv", k));
    keys.push_back(pairs.back().first);
  }
  int migrating = 0;
  for (const std::string& k : keys) migrating += cluster::KeySlot(k) <= ranges_[0].end() ? 1 : 0;
  ASSERT_GT(migrating, 0);
  ASSERT_LT(migrating, 20);
  ASSERT_TRUE(c->MultiPut(pairs).ok());
  auto target = Target();
  for (const auto& [k, v] : pairs) EXPECT_EQ(*target->Get(k), v) << k;
  auto got = c->MultiGet(keys);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t k = 0; k < keys.size(); ++k) {
    ASSERT_TRUE((*got)[k].ok()) << keys[k] << ": " << (*got)[k].status();
    EXPECT_EQ(*(*got)[k], pairs[k].second);
  }
  EXPECT_GE(Metric(*c, "kvstore_client_cluster_asks_total"), static_cast<uint64_t>(migrating));
  EXPECT_EQ(Metric(*c, "kvstore_client_cluster_tryagains_total"), 1u);
}

TEST_F(ClusterClientMigrationTest, EndlessTryAgainIsBounded) {
  Start(/*tryagains=*/1000);
  auto c = Client(/*max_attempts=*/4);
  ASSERT_NE(c, nullptr);
  int i = 0;
  const std::string key = MigratingKey("t", &i);
  const absl::Status s = c->Put(key, "v");
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("gave up after 4 attempt(s)"));
  EXPECT_EQ(source_resp_->requests(), 4);
  EXPECT_EQ(Metric(*c, "kvstore_client_cluster_tryagains_total"), 3u);
  EXPECT_TRUE(absl::IsNotFound(Target()->Get(key).status()));
}

}  // namespace
}  // namespace kvstore
