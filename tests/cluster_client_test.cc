// Copyright 2026 The kvstore Authors.
//
// The cluster client (client/internal/cluster/) against real single-node
// KvServers over TCP, with the cluster map handed out by an in-test
// KvCluster service (the servers' own cluster plane is tested elsewhere;
// here the map is whatever the test sets). A fake node that answers every
// RESP request with -MOVED stands in for a node that lost its slots.
//
// Shows: keys routed to their shard's primary for Get/Put/Delete/Exists/
// MultiGet/MultiPut and Scan across nodes; a MOVED makes the client refresh
// and succeed; an older map from a lagging node is ignored; bounded retries
// end with a clear error; plain servers still give a single-node client.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/slots.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "proto/kv_control.grpc.pb.h"
#include "server/kv_server.h"
#include "tests/test_cluster.h"
#include "tests/testing/fake_resp_server.h"

namespace kvstore {
namespace {

using ::kvstore::testing::FakeRespServer;
using server::KvServer;
using server::KvServerOptions;
using server::ServerTransport;
using ::testing::HasSubstr;

// KvCluster with a map the test sets; counts GetClusterMap calls.
class FakeClusterService final : public v1::KvCluster::Service {
 public:
  void SetMap(v1::ClusterMap map) {
    absl::MutexLock lock(&mu_);
    map_ = std::move(map);
    down_ = false;
  }
  void SetDown(bool down) {
    absl::MutexLock lock(&mu_);
    down_ = down;
  }
  int calls() const { return calls_.load(); }
  int failovers() const { return failovers_.load(); }

  grpc::Status GetClusterMap(grpc::ServerContext*, const v1::GetClusterMapRequest*,
                             v1::GetClusterMapResponse* resp) override {
    calls_.fetch_add(1);
    absl::MutexLock lock(&mu_);
    if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no map yet");
    *resp->mutable_map() = map_;
    resp->set_node_id("map-service");
    return grpc::Status::OK;
  }

  // Applies the failover itself: `target_node` becomes the shard's primary.
  grpc::Status Failover(grpc::ServerContext*, const v1::FailoverRequest* req,
                        v1::FailoverResponse* resp) override {
    failovers_.fetch_add(1);
    absl::MutexLock lock(&mu_);
    for (v1::Shard& s : *map_.mutable_shards()) {
      if (s.shard_id() != req->shard_id()) continue;
      s.clear_replicas();
      s.add_replicas(req->target_node());
      s.set_shard_epoch(s.shard_epoch() + 1);
      map_.set_epoch(map_.epoch() + 1);
      *resp->mutable_map() = map_;
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no such shard");
  }

 private:
  absl::Mutex mu_;
  v1::ClusterMap map_ ABSL_GUARDED_BY(mu_);
  bool down_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> calls_{0};
  std::atomic<int> failovers_{0};
};

// A listening socket on 127.0.0.1 with a kernel-chosen port (*port).
int ListenOnLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  listen(fd, 64);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// A node frozen by SIGSTOP, as its peers see it: the kernel completes TCP
// handshakes on its listening socket, but nothing ever answers.
class FrozenListener {
 public:
  FrozenListener() : fd_(ListenOnLoopback(&port_)) {}
  ~FrozenListener() { close(fd_); }
  int port() const { return port_; }

 private:
  int port_ = 0;
  int fd_ = -1;
};

// A RESP node answering every request with "-MOVED 0 <to>" (or the error
// `reply`, without its '-' and CRLF), or, with `hang_up`, closing the
// connection after reading one request: a node that died with the request
// in hand, whose outcome the client cannot know.
class MovedRespServer {
 public:
  explicit MovedRespServer(bool hang_up = false, std::string reply = "MOVED 0 127.0.0.1:1") {
    server_.OnAnyOther([hang_up, reply](const FakeRespServer::Request&) {
      return hang_up ? FakeRespServer::Reply::HangUp() : FakeRespServer::Reply::Error(reply);
    });
  }
  int port() const { return server_.port(); }
  int requests() const { return static_cast<int>(server_.received().size()); }

 private:
  FakeRespServer server_;
};

// KvControl whose handshake sends the client to a MovedRespServer.
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

// A gRPC server on a free loopback port with the given services.
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

KvServerOptions SmallServer() {
  KvServerOptions o;
  o.control_port = 0;
  o.resp_port = 0;
  o.pool_bytes = 16ull << 20;
  o.segment_bytes = 1ull << 20;
  o.transport = ServerTransport::kTcp;
  return o;
}

v1::ClusterNode NodeOf(const std::string& id, int control_port, int resp_port) {
  v1::ClusterNode n;
  n.set_node_id(id);
  n.set_incarnation(1);
  n.set_control_address(absl::StrCat("127.0.0.1:", control_port));
  n.set_resp_address(absl::StrCat("127.0.0.1:", resp_port));
  return n;
}

// A map of `primaries.size()` shards with even slot ranges; shard i is led
// by primaries[i] (an index into `nodes`).
v1::ClusterMap MakeMap(uint64_t epoch, const std::vector<v1::ClusterNode>& nodes,
                       const std::vector<int>& primaries) {
  v1::ClusterMap m;
  m.set_epoch(epoch);
  m.set_replication_factor(1);
  m.set_cluster_name("test");
  m.set_controller(nodes[0].node_id());
  const std::vector<v1::SlotRange> ranges =
      cluster::EvenSlotRanges(static_cast<uint32_t>(primaries.size()));
  for (size_t i = 0; i < primaries.size(); ++i) {
    v1::Shard* s = m.add_shards();
    s->set_shard_id(static_cast<uint32_t>(i));
    s->set_shard_epoch(epoch);
    *s->add_slots() = ranges[i];
    s->add_replicas(nodes[primaries[i]].node_id());
  }
  for (const auto& n : nodes) *m.add_nodes() = n;
  return m;
}

class ClusterClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      auto s = KvServer::Start(SmallServer());
      ASSERT_TRUE(s.ok()) << s.status();
      nodes_.push_back(NodeOf(absl::StrCat("n", i), (*s)->control_port(), (*s)->resp_port()));
      servers_.push_back(*std::move(s));
    }
    map_service_ = StartGrpc({&map_});
  }

  client::Options ClientOptions(std::vector<std::string> seeds) {
    client::Options o;
    o.servers = std::move(seeds);
    o.transport = client::TransportMode::kTcp;
    o.connect_timeout = absl::Seconds(5);
    o.op_timeout = absl::Seconds(5);
    return o;
  }

  // A single-node client of server `i` (the real server's KvCluster
  // service answers "single-node mode", so Connect falls back to it).
  std::unique_ptr<client::KvClient> Direct(int i) {
    auto c = client::KvClient::Connect(ClientOptions({nodes_[i].control_address()}));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // The node index owning `key` in a map of 3 shards led by n0, n1, n2.
  static int OwnerOf(const std::string& key) {
    const uint32_t slot = cluster::KeySlot(key);
    const auto ranges = cluster::EvenSlotRanges(3);
    for (int i = 0; i < 3; ++i) {
      if (slot >= ranges[i].start() && slot <= ranges[i].end()) return i;
    }
    return -1;
  }

  static uint64_t Metric(const client::KvClient& c, const std::string& name) {
    auto m = c.metrics();
    auto it = m.find(name);
    return it == m.end() ? 0 : it->second;
  }

  std::vector<std::unique_ptr<KvServer>> servers_;
  std::vector<v1::ClusterNode> nodes_;
  FakeClusterService map_;
  GrpcServer map_service_;
};

// Every key lands on its shard's primary and only there, and every
// operation finds it there.
TEST_F(ClusterClientTest, RoutesEveryOperationBySlot) {
  map_.SetMap(MakeMap(5, nodes_, {0, 1, 2}));
  auto c = client::KvClient::Connect(ClientOptions({map_service_.address()}));
  ASSERT_TRUE(c.ok()) << c.status();
  client::KvClient& cl = **c;
  EXPECT_EQ(cl.transport_name(), "tcp");
  EXPECT_EQ(Metric(cl, "kvstore_client_cluster_map_epoch"), 5u);
  std::vector<std::unique_ptr<client::KvClient>> direct;
  for (int i = 0; i < 3; ++i) direct.push_back(Direct(i));

  std::set<int> owners;
  for (int k = 0; k < 60; ++k) {
    const std::string key = absl::StrCat("key:", k);
    ASSERT_TRUE(cl.Put(key, absl::StrCat("v", k)).ok()) << key;
    const int owner = OwnerOf(key);
    owners.insert(owner);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(direct[i]->Get(key).ok(), i == owner) << key << " on n" << i;
    }
    auto v = cl.Get(key);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, absl::StrCat("v", k));
    EXPECT_TRUE(*cl.Exists(key));
  }
  EXPECT_EQ(owners.size(), 3u);  // the keys cover every node

  // A key stored directly on its owner is found; on another node it is not.
  ASSERT_TRUE(direct[OwnerOf("only-here")]->Put("only-here", "x").ok());
  EXPECT_EQ(*cl.Get("only-here"), "x");
  ASSERT_TRUE(direct[(OwnerOf("elsewhere") + 1) % 3]->Put("elsewhere", "x").ok());
  EXPECT_TRUE(absl::IsNotFound(cl.Get("elsewhere").status()));

  // Delete reaches the owner.
  ASSERT_TRUE(cl.Delete("key:7").ok());
  EXPECT_TRUE(absl::IsNotFound(direct[OwnerOf("key:7")]->Get("key:7").status()));
  EXPECT_TRUE(absl::IsNotFound(cl.Delete("key:7")));

  // MultiPut and MultiGet split by node, results in the caller's order.
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> keys;
  for (int k = 0; k < 40; ++k) {
    pairs.emplace_back(absl::StrCat("m:", k), absl::StrCat("mv", k));
    keys.push_back(absl::StrCat("m:", k));
  }
  keys.insert(keys.begin() + 3, "missing");
  ASSERT_TRUE(cl.MultiPut(pairs).ok());
  for (const auto& [k, v] : pairs) EXPECT_EQ(*direct[OwnerOf(k)]->Get(k), v) << k;
  auto got = cl.MultiGet(keys);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == "missing") {
      EXPECT_TRUE(absl::IsNotFound((*got)[i].status()));
    } else {
      ASSERT_TRUE((*got)[i].ok()) << keys[i];
      EXPECT_EQ(*(*got)[i], "mv" + keys[i].substr(2));
    }
  }

  // Scan lists every key of the cluster once, across the nodes. The key put
  // on a node that does not own it is not listed.
  std::set<std::string> listed;
  uint64_t cursor = 0;
  int pages = 0;
  do {
    auto page = cl.Scan(cursor, 7, "m:");
    ASSERT_TRUE(page.ok()) << page.status();
    for (auto& k : page->keys) EXPECT_TRUE(listed.insert(k).second) << k;
    cursor = page->cursor;
    ASSERT_LT(++pages, 100);
  } while (cursor != 0);
  EXPECT_EQ(listed.size(), 40u);
  ASSERT_TRUE(cl.Stats().ok());
  EXPECT_EQ(Metric(cl, "kvstore_client_cluster_redirects_total"), 0u);
}

// The map names a node that answers MOVED for everything; after the client
// connected, the map service moves its slots to n1. The client refreshes on
// the MOVED and the write lands on n1.
TEST_F(ClusterClientTest, MovedMakesTheClientRefreshAndSucceed) {
  MovedRespServer moved;
  FakeControlService control(moved.port());
  GrpcServer fake_node = StartGrpc({&control});
  std::vector<v1::ClusterNode> nodes = nodes_;
  nodes.push_back(NodeOf("stale", fake_node.port, moved.port()));
  map_.SetMap(MakeMap(1, nodes, {3}));  // one shard, on the stale node
  auto c = client::KvClient::Connect(ClientOptions({map_service_.address()}));
  ASSERT_TRUE(c.ok()) << c.status();
  map_.SetMap(MakeMap(2, nodes, {1}));  // now on n1

  ASSERT_TRUE((*c)->Put("moving", "v").ok());
  EXPECT_GE(moved.requests(), 1);
  EXPECT_EQ(*Direct(1)->Get("moving"), "v");
  EXPECT_EQ(*(*c)->Get("moving"), "v");
  EXPECT_GE(Metric(**c, "kvstore_client_cluster_redirects_total"), 1u);
  EXPECT_GE(Metric(**c, "kvstore_client_cluster_map_refreshes_total"), 1u);
  EXPECT_EQ(Metric(**c, "kvstore_client_cluster_map_epoch"), 2u);

  // The same for batches: a client routing everything to the stale node
  // learns the 3-shard map on the first MOVED and splits the batch by it.
  map_.SetMap(MakeMap(3, nodes, {3}));
  auto c2 = client::KvClient::Connect(ClientOptions({map_service_.address()}));
  ASSERT_TRUE(c2.ok()) << c2.status();
  map_.SetMap(MakeMap(4, nodes, {0, 1, 2}));
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> keys;
  for (int k = 0; k < 30; ++k) {
    pairs.emplace_back(absl::StrCat("b:", k), absl::StrCat("bv", k));
    keys.push_back(absl::StrCat("b:", k));
  }
  const int before = moved.requests();
  ASSERT_TRUE((*c2)->MultiPut(pairs).ok());
  EXPECT_GT(moved.requests(), before);
  for (const auto& [k, v] : pairs) EXPECT_EQ(*Direct(OwnerOf(k))->Get(k), v) << k;
  map_.SetMap(MakeMap(5, nodes, {3}));  // a client that starts on the stale node again
  auto c3 = client::KvClient::Connect(ClientOptions({map_service_.address()}));
  ASSERT_TRUE(c3.ok()) << c3.status();
  map_.SetMap(MakeMap(6, nodes, {0, 1, 2}));
  auto got = (*c3)->MultiGet(keys);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE((*got)[i].ok()) << keys[i] << ": " << (*got)[i].status();
    EXPECT_EQ(*(*got)[i], pairs[i].second);
  }
  EXPECT_EQ(Metric(**c3, "kvstore_client_cluster_map_epoch"), 6u);
}

// A write whose outcome is unknown is not sent again, even though a newer
// map names a primary that would take it: the first attempt may have been
// applied. Before, the client retried it there, and in the compose VM test
// a PUT applied by a primary that then froze was applied a second time by
// the new primary, after other clients had overwritten it.
TEST_F(ClusterClientTest, AWriteWhoseOutcomeIsUnknownIsNotSentAgain) {
  MovedRespServer dies(/*hang_up=*/true);
  FakeControlService control(dies.port());
  GrpcServer fake_node = StartGrpc({&control});
  std::vector<v1::ClusterNode> nodes = nodes_;
  nodes.push_back(NodeOf("dying", fake_node.port, dies.port()));
  map_.SetMap(MakeMap(1, nodes, {3}));
  auto c = client::KvClient::Connect(ClientOptions({map_service_.address()}));
  ASSERT_TRUE(c.ok()) << c.status();
  map_.SetMap(MakeMap(2, nodes, {0}));  // the failover the client would find

  const absl::Status put = (*c)->Put("k", "v");
  EXPECT_FALSE(put.ok());
  // It says so, with a code of its own.
  EXPECT_EQ(put.code(), absl::StatusCode::kUnknown) << put;
  EXPECT_THAT(std::string(put.message()), ::testing::StartsWith("outcome unknown: UNAVAILABLE"));
  EXPECT_EQ(dies.requests(), 1);
  EXPECT_TRUE(absl::IsNotFound(Direct(0)->Get("k").status()));
  // The same for a batch, from a client that routes by the old map again.
  map_.SetMap(MakeMap(3, nodes, {3}));
  auto cb = client::KvClient::Connect(ClientOptions({map_service_.address()}));
  ASSERT_TRUE(cb.ok()) << cb.status();
  map_.SetMap(MakeMap(4, nodes, {0}));
  const absl::Status batch = (*cb)->MultiPut({{"k", "v"}});
  EXPECT_FALSE(batch.ok());
  EXPECT_EQ(dies.requests(), 2);
  EXPECT_TRUE(absl::IsNotFound(Direct(0)->Get("k").status()));
  // A read is retried: it changes nothing.
  map_.SetMap(MakeMap(5, nodes, {3}));
  ASSERT_TRUE(Direct(0)->Put("k", "on-n0").ok());
  auto c2 = client::KvClient::Connect(ClientOptions({map_service_.address()}));
  ASSERT_TRUE(c2.ok()) << c2.status();
  map_.SetMap(MakeMap(6, nodes, {0}));
  auto got = (*c2)->Get("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "on-n0");
}

// The node answers the write instead of dying: only a refusal that says the
// write had no effect (here cluster-down, before any backup was contacted)
// sends it again, to the primary a refreshed map names. A node that could
// not publish a write its backups may hold says its outcome is unknown, and
// the write is not sent again; nor is one refused with an untyped failed
// precondition (an older server passed a backup's "stale shard epoch" on
// after other backups had installed the write, and the client resent it).
TEST_F(ClusterClientTest, OnlyAWriteRefusedWithNoEffectIsSentAgain) {
  struct Case {
    std::string reply;
    bool resent;
  };
  const Case cases[] = {
      {"CLUSTERDOWN The cluster is down", true},
      {"UNKNOWN outcome unknown: CLUSTERDOWN Hash slot 0 cannot drop failed backup n9", false},
      {"UNKNOWN outcome unknown: TRYAGAIN Hash slot 0 migration target n9 unavailable", false},
      {"PRECONDITION stale shard epoch 3 < 4 of shard 0; refresh the map", false},
  };
  uint64_t epoch = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reply);
    MovedRespServer node(/*hang_up=*/false, c.reply);
    FakeControlService control(node.port());
    GrpcServer fake_node = StartGrpc({&control});
    std::vector<v1::ClusterNode> nodes = nodes_;
    nodes.push_back(NodeOf("answering", fake_node.port, node.port()));
    map_.SetMap(MakeMap(++epoch, nodes, {3}));
    auto client = client::KvClient::Connect(ClientOptions({map_service_.address()}));
    ASSERT_TRUE(client.ok()) << client.status();
    map_.SetMap(MakeMap(++epoch, nodes, {0}));  // the map a refresh finds
    const std::string key = absl::StrCat("k", epoch);
    const absl::Status put = (*client)->Put(key, "v");
    EXPECT_EQ(node.requests(), 1);
    if (c.resent) {
      EXPECT_TRUE(put.ok()) << put;
      EXPECT_EQ(*Direct(0)->Get(key), "v");
    } else {
      EXPECT_FALSE(put.ok());
      EXPECT_TRUE(absl::IsNotFound(Direct(0)->Get(key).status()));
    }
    if (absl::StartsWith(c.reply, "UNKNOWN")) {
      EXPECT_EQ(put.code(), absl::StatusCode::kUnknown) << put;
      EXPECT_THAT(std::string(put.message()), ::testing::StartsWith("outcome unknown: "));
    }
  }
}

// A lagging node hands out an older map than the client holds: it is
// ignored, and with nothing newer anywhere the retries stop at the bound
// with an error that says so.
TEST_F(ClusterClientTest, OlderMapIsIgnoredAndRetriesAreBounded) {
  MovedRespServer moved;
  FakeControlService control(moved.port());
  GrpcServer fake_node = StartGrpc({&control});
  std::vector<v1::ClusterNode> nodes = nodes_;
  nodes.push_back(NodeOf("stale", fake_node.port, moved.port()));
  map_.SetMap(MakeMap(5, nodes, {3}));
  FakeClusterService lagging;
  lagging.SetMap(MakeMap(3, nodes, {1}));  // older: would send keys to n1
  GrpcServer lagging_service = StartGrpc({&lagging});

  client::Options o = ClientOptions({map_service_.address(), lagging_service.address()});
  o.cluster_max_attempts = 4;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Time start = absl::Now();
  absl::Status s = (*c)->Put("k", "v");
  const absl::Duration took = absl::Now() - start;
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("MOVED"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("gave up after 4 attempt(s); map epoch 5"));
  EXPECT_EQ(moved.requests(), 4);
  EXPECT_GE(lagging.calls(), 1);                                   // it was asked ...
  EXPECT_EQ(Metric(**c, "kvstore_client_cluster_map_epoch"), 5u);  // ... and ignored
  EXPECT_TRUE(absl::IsNotFound(Direct(1)->Get("k").status()));
  EXPECT_EQ(Metric(**c, "kvstore_client_cluster_retries_total"), 3u);
  // Backoff 20 + 40 + 80 ms, well inside op_timeout.
  EXPECT_GE(took, absl::Milliseconds(140));
  EXPECT_LT(took, absl::Seconds(4));
}

// Servers without the KvCluster service (single-node, or older) give the
// single-node client, exactly as before; an unreachable seed fails as it
// always did.
TEST_F(ClusterClientTest, SingleNodeServersAreUsedAsBefore) {
  auto c = client::KvClient::Connect(ClientOptions({nodes_[0].control_address()}));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Put("a", "1").ok());
  EXPECT_EQ(*(*c)->Get("a"), "1");
  EXPECT_EQ(Metric(**c, "kvstore_client_cluster_map_epoch"), 0u);
  // Nothing listens on port 1.
  auto bad = client::KvClient::Connect(ClientOptions({"127.0.0.1:1"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("handshake with 127.0.0.1:1"));
}

// A node that stops answering: the client refreshes, learns the map that
// moved its shard, and the operation succeeds on the new primary.
TEST_F(ClusterClientTest, UnreachableNodeMakesTheClientRefresh) {
  map_.SetMap(MakeMap(1, nodes_, {2}));
  auto c = client::KvClient::Connect(ClientOptions({map_service_.address()}));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Put("before", "1").ok());
  servers_[2].reset();  // its sockets close, as a killed process's do
  map_.SetMap(MakeMap(2, nodes_, {0}));
  const absl::Status after = (*c)->Put("after", "2");
  ASSERT_TRUE(after.ok()) << after;
  EXPECT_EQ(*Direct(0)->Get("after"), "2");
  EXPECT_EQ(Metric(**c, "kvstore_client_cluster_map_epoch"), 2u);
  EXPECT_GE(Metric(**c, "kvstore_client_cluster_retries_total"), 1u);
}

// A frozen primary: the handshake with it waits out connect_timeout, which
// here is the whole op_timeout. The failed operation must still refresh the
// map (it did not: the refresh had no budget left, so every operation went
// to the frozen node again), and the next one reaches the new primary.
TEST_F(ClusterClientTest, FrozenPrimaryThatEatsTheBudgetStillLetsTheClientRefresh) {
  FrozenListener frozen;
  std::vector<v1::ClusterNode> nodes = nodes_;
  nodes[2] = NodeOf("n2", frozen.port(), frozen.port());
  map_.SetMap(MakeMap(1, nodes, {2}));
  client::Options o = ClientOptions({map_service_.address()});
  o.connect_timeout = absl::Seconds(2);
  o.op_timeout = absl::Seconds(2);
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  map_.SetMap(MakeMap(2, nodes, {0}));  // the failover
  const absl::Status first = (*c)->Put("k", "1");
  EXPECT_FALSE(first.ok());  // its budget went into the handshake
  const absl::Status second = (*c)->Put("k", "2");
  ASSERT_TRUE(second.ok()) << second;
  EXPECT_EQ(*Direct(0)->Get("k"), "2");
  EXPECT_EQ(Metric(**c, "kvstore_client_cluster_map_epoch"), 2u);
}

// read_from_replicas sends reads to the in-sync backup (writes still go to
// the primary); without it reads go to the primary.
TEST_F(ClusterClientTest, ReplicaReadsGoToTheBackup) {
  v1::ClusterMap m = MakeMap(1, nodes_, {0});
  m.mutable_shards(0)->add_replicas("n1");  // n0 primary, n1 in-sync backup
  map_.SetMap(m);
  ASSERT_TRUE(Direct(1)->Put("r", "on-backup").ok());
  client::Options o = ClientOptions({map_service_.address()});
  auto primary_reader = client::KvClient::Connect(o);
  ASSERT_TRUE(primary_reader.ok()) << primary_reader.status();
  EXPECT_TRUE(absl::IsNotFound((*primary_reader)->Get("r").status()));
  o.read_from_replicas = true;
  auto replica_reader = client::KvClient::Connect(o);
  ASSERT_TRUE(replica_reader.ok()) << replica_reader.status();
  EXPECT_EQ(*(*replica_reader)->Get("r"), "on-backup");
  auto got = (*replica_reader)->MultiGet({"r"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*(*got)[0], "on-backup");
  ASSERT_TRUE((*replica_reader)->Put("w", "x").ok());
  EXPECT_EQ(*Direct(0)->Get("w"), "x");
  EXPECT_TRUE(absl::IsNotFound(Direct(1)->Get("w").status()));
}

// A backup that redirects a replica read: the client reads from the
// primary at once, without a map refresh or a backoff.
TEST_F(ClusterClientTest, RedirectedReplicaReadFallsBackToThePrimary) {
  MovedRespServer moved;
  FakeControlService control(moved.port());
  GrpcServer fake_node = StartGrpc({&control});
  std::vector<v1::ClusterNode> nodes = nodes_;
  nodes.push_back(NodeOf("stale", fake_node.port, moved.port()));
  v1::ClusterMap m = MakeMap(1, nodes, {0});
  m.mutable_shards(0)->add_replicas("stale");
  map_.SetMap(m);
  ASSERT_TRUE(Direct(0)->Put("r", "on-primary").ok());
  client::Options o = ClientOptions({map_service_.address()});
  o.read_from_replicas = true;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*(*c)->Get("r"), "on-primary");
  EXPECT_GE(moved.requests(), 2);  // READONLY, then the GET
  EXPECT_EQ(Metric(**c, "kvstore_client_cluster_redirects_total"), 1u);
  EXPECT_EQ(Metric(**c, "kvstore_client_cluster_map_refreshes_total"), 0u);
}

// kvctl cluster through the binary: status, slots --json, failover (the
// fake applies it: the target becomes the primary, epoch + 1), and the
// exit code against a single-node server (its KvCluster service says so).
TEST_F(ClusterClientTest, KvctlClusterCommands) {
  map_.SetMap(MakeMap(5, nodes_, {0, 1, 2}));
  const std::string kvctl = testing::BinaryPath("client/kvctl/kvctl");
  const std::string server = absl::StrCat("--server=", map_service_.address());
  testing::ProcessResult r = testing::RunProcess({kvctl, server, "cluster", "status"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("epoch 5 controller n0 cluster test replicas 1\n"));
  EXPECT_THAT(r.out, HasSubstr("shard 1  up    slots 5461-10922  primary n1"));

  r = testing::RunProcess({kvctl, server, "--json", "cluster", "slots"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"start\":0,\"end\":5460,\"shard_id\":0,\"primary\":\"n0\""));

  r = testing::RunProcess({kvctl, server, "cluster", "failover", "--shard=2", "--to=n0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("epoch 6 "));
  EXPECT_THAT(r.out, HasSubstr("shard 2  up    slots 10923-16383  primary n0"));
  EXPECT_EQ(map_.failovers(), 1);

  r = testing::RunProcess({kvctl, server, "cluster", "failover"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs --shard"));
  r = testing::RunProcess({kvctl, "cluster", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("Usage: kvctl [flags] cluster SUBCOMMAND"));

  r = testing::RunProcess(
      {kvctl, absl::StrCat("--server=", nodes_[0].control_address()), "cluster", "nodes"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("kvctl: FAILED_PRECONDITION: cluster map from"));
  EXPECT_THAT(r.err, HasSubstr("single-node mode"));
}

}  // namespace
}  // namespace kvstore
