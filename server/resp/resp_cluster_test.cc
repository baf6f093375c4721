// Copyright 2026 The kvstore Authors.
//
// The RESP port in cluster mode, with no etcd: three in-process nodes, each
// a KvStore and a RespServer on 127.0.0.1:0 with its own ClusterState, all
// given one cluster map built here (three shards, the even split redis-cli
// --cluster create makes, two replicas each). Checks routing replies over
// raw sockets, the CLUSTER commands parsed, and the real redis-cli -c
// (Debian redis-tools) following MOVED between the nodes.

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cluster/cluster_map.h"
#include "common/cluster/refusal.h"
#include "common/cluster/slots.h"
#include "common/protocol/resp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/resp/cluster_commands.h"
#include "server/resp/cluster_routing.h"
#include "server/resp/connection.h"
#include "server/resp/resp_server.h"
#include "server/resp/resp_test_util.h"
#include "server/routing/cluster_state.h"
#include "server/storage/write_hook.h"

namespace kvstore {
namespace server {
namespace {

using resp::Reply;
using resp_internal::RedisNodeId;
using resp_test::Cmd;
using resp_test::Connect;
using resp_test::Read;
using resp_test::RedisCli;
using resp_test::Send;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kNodes = 3;

std::string NodeName(int i) { return absl::StrCat("node-", i); }
std::string ControlAddress(int i) { return absl::StrCat("127.0.0.1:", 7100 + i); }

// A write hook that refuses every write (or, with `only_key`, the writes of
// that key) as the replicator does when the map changed between routing and
// commit.
class RefusingHook : public WriteHook {
 public:
  absl::Status Write(absl::string_view key, absl::string_view,
                     absl::FunctionRef<absl::Status()> publish) override {
    if (refusal.ok() || (!only_key.empty() && key != only_key)) return publish();
    return refusal;
  }
  absl::Status refusal = cluster::ToStatus(cluster::Refusal::Moved(0, "node-x", "10.9.9.9:1"));
  std::string only_key;
};

class RespClusterTest : public ::testing::Test {
 protected:
  struct Node {
    std::unique_ptr<MemoryPool> pool;
    std::unique_ptr<KvStore> store;
    std::unique_ptr<ClusterState> state;
    std::unique_ptr<RespServer> server;
    std::string resp_address;
  };

  void SetUp() override {
    for (int i = 0; i < kNodes; ++i) {
      Node& n = nodes_[i];
      MemoryPoolOptions po;
      po.data_bytes = 32 << 20;
      po.index_bytes = 1 << 20;
      n.pool = *MemoryPool::Create(po);
      KvStoreOptions so;
      so.segment_bytes = 1 << 20;
      so.grace_period = absl::Milliseconds(10);
      so.limits.max_value_bytes = 8 << 20;
      so.write_hook = i == 2 ? &hook_ : nullptr;
      n.store = *KvStore::Create(n.pool.get(), so);
      n.state = std::make_unique<ClusterState>(NodeName(i));
      RespServerOptions o;
      o.port = 0;
      o.threads = 1;
      o.cluster = n.state.get();
      auto s = RespServer::Start(n.store.get(), o);
      ASSERT_TRUE(s.ok()) << s.status();
      n.server = std::move(*s);
      n.resp_address = absl::StrCat("127.0.0.1:", n.server->port());
    }
    hook_.refusal = absl::OkStatus();
    ranges_ = cluster::EvenSlotRanges(kNodes);
    Install(MakeMap(/*epoch=*/1));
  }

  // Shard i: the i-th even range, primary node i, backup node i+1.
  v1::ClusterMap MakeMap(uint64_t epoch) const {
    v1::ClusterMap map;
    map.set_epoch(epoch);
    map.set_replication_factor(2);
    map.set_cluster_name("test");
    map.set_controller(NodeName(0));
    for (int i = 0; i < kNodes; ++i) {
      v1::ClusterNode* node = map.add_nodes();
      node->set_node_id(NodeName(i));
      node->set_incarnation(100 + i);
      node->set_control_address(ControlAddress(i));
      node->set_resp_address(nodes_[i].resp_address);
      v1::Shard* shard = map.add_shards();
      shard->set_shard_id(i);
      shard->set_shard_epoch(10 + i);
      *shard->add_slots() = ranges_[i];
      shard->add_replicas(NodeName(i));
      shard->add_replicas(NodeName((i + 1) % kNodes));
    }
    return map;
  }
  void Install(v1::ClusterMap map) {
    auto view = cluster::ClusterMapView::Build(std::move(map));
    ASSERT_TRUE(view.ok()) << view.status();
    for (Node& n : nodes_) ASSERT_TRUE(n.state->Update(*view));
  }
  // The node leading `key`'s slot in MakeMap().
  int Owner(absl::string_view key) const {
    const uint32_t slot = cluster::KeySlot(key);
    for (int i = 0; i < kNodes; ++i) {
      if (slot >= ranges_[i].start() && slot <= ranges_[i].end()) return i;
    }
    return -1;
  }
  // A key led by node `owner`, from "<prefix>0", "<prefix>1", ...
  std::string KeyOn(int owner, absl::string_view prefix = "k") const {
    for (int i = 0;; ++i) {
      std::string key = absl::StrCat(prefix, i);
      if (Owner(key) == owner) return key;
    }
  }
  std::vector<Reply> Run(int node, const std::vector<std::string>& cmds_joined, size_t n) {
    int fd = Connect(nodes_[node].server->port());
    std::string batch;
    for (const std::string& c : cmds_joined) batch += c;
    Send(fd, batch);
    std::vector<Reply> r = Read(fd, n);
    close(fd);
    return r;
  }
  Reply RunOne(int node, std::vector<absl::string_view> args) {
    std::vector<Reply> r = Run(node, {Cmd(args)}, 1);
    return r.empty() ? Reply() : r[0];
  }
  std::string Moved(absl::string_view key) const {
    const int owner = Owner(key);
    return absl::StrCat("MOVED ", cluster::KeySlot(key), " ", nodes_[owner].resp_address);
  }

  RefusingHook hook_;
  std::array<Node, kNodes> nodes_;
  std::vector<v1::SlotRange> ranges_;
};

TEST_F(RespClusterTest, KeyedCommandsServeOwnSlotsAndRedirectOthers) {
  const std::string mine = KeyOn(0), theirs = KeyOn(1);
  EXPECT_EQ(RunOne(0, {"SET", mine, "v"}).str, "OK");
  EXPECT_EQ(RunOne(0, {"GET", mine}).str, "v");
  for (auto args : std::vector<std::vector<absl::string_view>>{{"GET", theirs},
                                                               {"SET", theirs, "v"},
                                                               {"DEL", theirs},
                                                               {"EXISTS", theirs},
                                                               {"MGET", theirs},
                                                               {"MSET", theirs, "v"}}) {
    const Reply r = RunOne(0, args);
    EXPECT_EQ(r.type, Reply::Type::kError) << args[0];
    EXPECT_EQ(r.str, Moved(theirs)) << args[0];
  }
  // Nothing was written on node 0 for the other node's key.
  EXPECT_FALSE(nodes_[0].store->Exists(theirs));
  EXPECT_EQ(RunOne(0, {"DEL", mine}).integer, 1);
}

TEST_F(RespClusterTest, MultiKeyCommandsNeedOneSlotOrThisNode) {
  const std::string a = KeyOn(0, "a"), b = KeyOn(0, "b");
  ASSERT_NE(cluster::KeySlot(a), cluster::KeySlot(b));
  const std::string kCross = "CROSSSLOT Keys in request don't hash to the same slot";
  // Several slots all served here: served (kvstore's client batches per
  // node; Redis would say CROSSSLOT).
  EXPECT_EQ(RunOne(0, {"MSET", a, "1", b, "2"}).str, "OK");
  const Reply both = RunOne(0, {"MGET", a, b});
  ASSERT_EQ(both.elements.size(), 2u);
  EXPECT_EQ(both.elements[1].str, "2");
  EXPECT_EQ(RunOne(0, {"EXISTS", a, b}).integer, 2);
  EXPECT_EQ(RunOne(0, {"DEL", a, b}).integer, 2);
  // Several slots, one of them another node's: CROSSSLOT, as Redis.
  const std::string theirs = KeyOn(2, "c");
  EXPECT_EQ(RunOne(0, {"MSET", a, "1", theirs, "2"}).str, kCross);
  EXPECT_EQ(RunOne(0, {"MGET", a, theirs}).str, kCross);
  EXPECT_EQ(RunOne(0, {"DEL", a, theirs}).str, kCross);
  EXPECT_EQ(RunOne(0, {"EXISTS", theirs, a}).str, kCross);
  // A hash tag puts keys in one slot.
  const std::string tag = absl::StrCat("{", a, "}");
  const std::string t1 = tag + ".x", t2 = tag + ".y";
  EXPECT_EQ(RunOne(0, {"MSET", t1, "1", t2, "2"}).str, "OK");
  const Reply got = RunOne(0, {"MGET", t1, t2});
  ASSERT_EQ(got.elements.size(), 2u);
  EXPECT_EQ(got.elements[0].str, "1");
  EXPECT_EQ(got.elements[1].str, "2");
  EXPECT_EQ(RunOne(0, {"DEL", t1, t2}).integer, 2);
  // Tagged keys of another node's slot: MOVED, not CROSSSLOT.
  const std::string other = absl::StrCat("{", KeyOn(2), "}");
  EXPECT_THAT(RunOne(0, {"MSET", other + "1", "1", other + "2", "2"}).str, StartsWith("MOVED "));
}

// The cache commands route as GET and SET do: served for this node's
// slots, MOVED for another's; MSETNX and TOUCH need one slot (or keys all
// served here), as MSET and EXISTS do.
TEST_F(RespClusterTest, CacheCommandsRouteBySlot) {
  const std::string mine = KeyOn(0), theirs = KeyOn(1);
  const std::vector<std::vector<absl::string_view>> keyed = {{"INCR", "@"},
                                                             {"DECR", "@"},
                                                             {"INCRBY", "@", "2"},
                                                             {"DECRBY", "@", "2"},
                                                             {"INCRBYFLOAT", "@", "1.5"},
                                                             {"APPEND", "@", "x"},
                                                             {"STRLEN", "@"},
                                                             {"SETNX", "@", "v"},
                                                             {"GETSET", "@", "v"},
                                                             {"GETEX", "@", "PX", "100000"},
                                                             {"SETEX", "@", "100", "v"},
                                                             {"PSETEX", "@", "100000", "v"},
                                                             {"TYPE", "@"},
                                                             {"EXPIRE", "@", "100"},
                                                             {"PEXPIRE", "@", "100000"},
                                                             {"EXPIREAT", "@", "4000000000"},
                                                             {"PEXPIREAT", "@", "4000000000000"},
                                                             {"TTL", "@"},
                                                             {"PTTL", "@"},
                                                             {"EXPIRETIME", "@"},
                                                             {"PEXPIRETIME", "@"},
                                                             {"PERSIST", "@"},
                                                             {"GETDEL", "@"},
                                                             {"SET", "@", "v", "EX", "100"}};
  for (std::vector<absl::string_view> args : keyed) {
    for (auto& a : args) a = a == "@" ? absl::string_view(theirs) : a;
    const Reply r = RunOne(0, args);
    EXPECT_EQ(r.type, Reply::Type::kError) << args[0];
    EXPECT_EQ(r.str, Moved(theirs)) << args[0];
    for (auto& a : args) a = a == theirs ? absl::string_view(mine) : a;
    EXPECT_NE(RunOne(0, args).type, Reply::Type::kError) << args[0] << " on this node's key";
  }
  EXPECT_FALSE(nodes_[0].store->Exists(theirs));
  EXPECT_EQ(RunOne(1, {"GET", theirs}).type, Reply::Type::kNull);
  const std::string kCross = "CROSSSLOT Keys in request don't hash to the same slot";
  const std::string a = KeyOn(0, "a"), other = KeyOn(2, "c");
  EXPECT_EQ(RunOne(0, {"MSETNX", a, "1", other, "2"}).str, kCross);
  EXPECT_EQ(RunOne(0, {"TOUCH", other, a}).str, kCross);
  EXPECT_FALSE(nodes_[0].store->Exists(a));
  const std::string tag = absl::StrCat("{", KeyOn(2), "}");
  EXPECT_THAT(RunOne(0, {"MSETNX", tag + "1", "1", tag + "2", "2"}).str, StartsWith("MOVED "));
  EXPECT_EQ(RunOne(2, {"MSETNX", tag + "1", "1", tag + "2", "2"}).integer, 1);
  EXPECT_EQ(RunOne(2, {"TOUCH", tag + "1", tag + "2", tag + "3"}).integer, 2);
}

// FLUSHALL in a cluster empties only the slots this node leads, as Redis
// Cluster's per-node FLUSHALL does: a copy it holds as another shard's
// backup is that primary's to delete.
TEST_F(RespClusterTest, FlushAllTakesOnlyTheSlotsThisNodeLeads) {
  const std::string mine = KeyOn(0), backup_copy = KeyOn(2);
  EXPECT_EQ(RunOne(0, {"SET", mine, "v"}).str, "OK");
  auto writer = nodes_[0].store->NewWriter();
  ASSERT_TRUE(nodes_[0].store->Put(writer.get(), backup_copy, "copy").ok());
  writer.reset();
  EXPECT_EQ(RunOne(0, {"FLUSHALL"}).str, "OK");
  EXPECT_FALSE(nodes_[0].store->Exists(mine));
  EXPECT_TRUE(nodes_[0].store->Exists(backup_copy));
  EXPECT_EQ(RunOne(0, {"DBSIZE"}).type, Reply::Type::kInteger);
}

TEST_F(RespClusterTest, ClusterDownWithoutMapFencedOrPrimary) {
  const std::string key = KeyOn(0);
  const std::string kDown =
      "CLUSTERDOWN The cluster is down: this node has no cluster map yet, or is fenced (its lease "
      "may have lapsed)";
  nodes_[0].state->set_fenced(true);
  EXPECT_EQ(RunOne(0, {"GET", key}).str, kDown);
  EXPECT_EQ(RunOne(0, {"SET", key, "v"}).str, kDown);
  EXPECT_THAT(RunOne(0, {"CLUSTER", "INFO"}).str, HasSubstr("cluster_state:fail\r\n"));
  nodes_[0].state->set_fenced(false);
  EXPECT_THAT(RunOne(0, {"CLUSTER", "INFO"}).str, HasSubstr("cluster_state:ok\r\n"));
  // The lease deadline passed: as fenced.
  nodes_[0].state->set_lease_deadline(std::chrono::steady_clock::now());
  EXPECT_EQ(RunOne(0, {"GET", key}).str, kDown);
  nodes_[0].state->set_lease_deadline(std::chrono::steady_clock::time_point::max());
  // Shard 1 lost every replica: its keys are down everywhere, others work.
  v1::ClusterMap map = MakeMap(2);
  map.mutable_shards(1)->clear_replicas();
  Install(map);
  const std::string no_primary = absl::StrCat("CLUSTERDOWN Hash slot ", cluster::KeySlot(KeyOn(1)),
                                              " not served: its shard has no primary");
  EXPECT_EQ(RunOne(0, {"GET", KeyOn(1)}).str, no_primary);
  EXPECT_EQ(RunOne(1, {"SET", KeyOn(1), "v"}).str, no_primary);
  EXPECT_EQ(RunOne(0, {"SET", key, "v"}).str, "OK");
  const Reply info = RunOne(0, {"CLUSTER", "INFO"});
  EXPECT_THAT(info.str, HasSubstr("cluster_state:fail\r\n"));
  EXPECT_THAT(info.str, HasSubstr("cluster_size:2\r\n"));
  // No map at all (a node that just started).
  ClusterState fresh("node-0");
  RespServerOptions o;
  o.port = 0;
  o.threads = 1;
  o.cluster = &fresh;
  auto server = RespServer::Start(nodes_[0].store.get(), o);
  ASSERT_TRUE(server.ok());
  int fd = Connect((*server)->port());
  Send(fd, Cmd({"GET", key}) + Cmd({"CLUSTER", "SLOTS"}) + Cmd({"CLUSTER", "INFO"}));
  const std::vector<Reply> r = Read(fd, 3);
  close(fd);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].str, kDown);
  EXPECT_EQ(r[1].type, Reply::Type::kArray);
  EXPECT_TRUE(r[1].elements.empty());
  EXPECT_THAT(r[2].str, HasSubstr("cluster_state:fail\r\ncluster_slots_assigned:0\r\n"));
}

// A node that becomes a shard's primary holds it until its backups match
// it (ClusterState::HoldNewLeads; the reconciler releases the hold): reads
// and writes of it get a TRYAGAIN of no effect, also inside a command of
// several slots; its other shards and a backup's READONLY reads are served.
TEST_F(RespClusterTest, ANewPrimaryAnswersTryAgainUntilReconciled) {
  for (Node& n : nodes_) n.state->HoldNewLeads();
  v1::ClusterMap map = MakeMap(2);
  map.mutable_shards(0)->set_replicas(0, NodeName(1));  // failover: node 1 leads shard 0
  map.mutable_shards(0)->set_replicas(1, NodeName(0));
  Install(map);
  const std::string key = KeyOn(0), mine = KeyOn(1);
  const std::string held = absl::StrCat("TRYAGAIN Hash slot ", cluster::KeySlot(key),
                                        " has a new primary still making its replicas equal; "
                                        "retry shortly");
  EXPECT_EQ(RunOne(1, {"GET", key}).str, held);
  EXPECT_EQ(RunOne(1, {"SET", key, "v"}).str, held);
  EXPECT_EQ(RunOne(1, {"MGET", mine, key}).str, held);
  EXPECT_EQ(RunOne(1, {"SET", mine, "m"}).str, "OK");  // shard 1: led all along
  int fd = Connect(nodes_[0].server->port());
  Send(fd, Cmd({"READONLY"}) + Cmd({"GET", key}));
  const std::vector<Reply> r = Read(fd, 2);
  close(fd);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].type, Reply::Type::kNull);  // node 0, now a backup: a dirty read, not held

  nodes_[1].state->ReleaseHold(0, 2);
  EXPECT_EQ(RunOne(1, {"SET", key, "v"}).str, "OK");
  EXPECT_EQ(RunOne(1, {"GET", key}).str, "v");
}

TEST_F(RespClusterTest, ReadOnlyLetsABackupServeReads) {
  // Node 1 backs shard 0. No replicator runs here, so put the value into
  // node 1's store directly, as a replicated write would.
  const std::string key = KeyOn(0);
  auto writer = nodes_[1].store->NewWriter();
  ASSERT_TRUE(nodes_[1].store->Put(writer.get(), key, "replica").ok());
  int fd = Connect(nodes_[1].server->port());
  Send(fd, Cmd({"GET", key}) + Cmd({"READONLY"}) + Cmd({"GET", key}) + Cmd({"MGET", key}) +
               Cmd({"EXISTS", key}) + Cmd({"SET", key, "w"}) + Cmd({"DEL", key}) +
               Cmd({"READWRITE"}) + Cmd({"GET", key}));
  const std::vector<Reply> r = Read(fd, 9);
  close(fd);
  ASSERT_EQ(r.size(), 9u);
  EXPECT_EQ(r[0].str, Moved(key));
  EXPECT_EQ(r[1].str, "OK");
  EXPECT_EQ(r[2].str, "replica");
  ASSERT_EQ(r[3].elements.size(), 1u);
  EXPECT_EQ(r[3].elements[0].str, "replica");
  EXPECT_EQ(r[4].integer, 1);
  EXPECT_EQ(r[5].str, Moved(key));  // writes always need the primary
  EXPECT_EQ(r[6].str, Moved(key));
  EXPECT_EQ(r[7].str, "OK");
  EXPECT_EQ(r[8].str, Moved(key));
  // Node 2 is no replica of shard 0: READONLY does not make it serve.
  fd = Connect(nodes_[2].server->port());
  Send(fd, Cmd({"READONLY"}) + Cmd({"GET", key}));
  const std::vector<Reply> r2 = Read(fd, 2);
  close(fd);
  ASSERT_EQ(r2.size(), 2u);
  EXPECT_EQ(r2[1].str, Moved(key));
}

TEST_F(RespClusterTest, StreamedSetOfAMovedKeySkipsItsValue) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937_64 rng(seed);
  std::string big(4 << 20, '\0');
  for (auto& ch : big) ch = static_cast<char>(rng());
  const std::string theirs = KeyOn(1), mine = KeyOn(0);
  int fd = Connect(nodes_[0].server->port());
  // Header first: the MOVED must come before the value is sent.
  const std::string set = Cmd({"SET", theirs, big});
  const size_t header = set.find("\r\n", set.find(absl::StrCat("$", big.size()))) + 2;
  Send(fd, set.substr(0, header));
  std::vector<Reply> r = Read(fd, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].str, Moved(theirs));
  // The value is drained in bounded reads; the connection stays in step.
  Send(fd, set.substr(header) + Cmd({"SET", mine, "small"}) + Cmd({"GET", mine}));
  r = Read(fd, 2);
  close(fd);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].str, "OK");
  EXPECT_EQ(r[1].str, "small");
  EXPECT_FALSE(nodes_[0].store->Exists(theirs));
  EXPECT_EQ(nodes_[0].store->size(), 1u);
}

// What a write hook's refusal is answered with (the reply bytes queued).
TEST_F(RespClusterTest, StoreRefusalsAreAnsweredAsRedisCluster) {
  auto reply = [&](const absl::Status& s) {
    resp_internal::Connection c(-1);
    resp_internal::ReplyStoreStatus(nodes_[2].state.get(), &c, s);
    std::string out;
    for (const auto& chunk : c.out) out += std::string(chunk.data());
    return out;
  };
  auto moved = [](uint32_t slot) {
    return cluster::ToStatus(cluster::Refusal::Moved(slot, "node-x", "10.9.9.9:1"));
  };
  // The hook's address is replaced by the RESP address of the slot's primary.
  EXPECT_EQ(reply(moved(ranges_[1].start())),
            absl::StrCat("-MOVED ", ranges_[1].start(), " ", nodes_[1].resp_address, "\r\n"));
  // A slot out of range, or one this node serves after all: as the hook said.
  EXPECT_EQ(reply(moved(99999)), "-MOVED 99999 10.9.9.9:1\r\n");
  EXPECT_EQ(reply(moved(ranges_[2].start())),
            absl::StrCat("-MOVED ", ranges_[2].start(), " 10.9.9.9:1\r\n"));
  EXPECT_EQ(reply(cluster::ToStatus(cluster::Refusal::ClusterDown("no primary"))),
            "-CLUSTERDOWN no primary\r\n");
  // A write whose outcome is unknown is not redirected: its own words.
  EXPECT_EQ(
      reply(cluster::OutcomeUnknown(moved(ranges_[1].start()))),
      absl::StrCat("-UNKNOWN outcome unknown: MOVED ", ranges_[1].start(), " 10.9.9.9:1\r\n"));
  // Other errors keep their usual code words, whatever their message says.
  EXPECT_EQ(reply(absl::UnavailableError("busy")), "-TRYAGAIN busy\r\n");
  EXPECT_EQ(reply(absl::FailedPreconditionError("x")), "-PRECONDITION x\r\n");
  EXPECT_EQ(reply(absl::FailedPreconditionError("MOVED 1 h:1")), "-PRECONDITION MOVED 1 h:1\r\n");
  EXPECT_EQ(reply(absl::OkStatus()), "+OK\r\n");
}

// End to end through KvStore's write hook: a refusal the hook makes after
// routing (a map change in between) becomes the Redis error.
TEST_F(RespClusterTest, WriteHookRefusalsBecomeRedisErrors) {
  // Node 2 (which has the hook) leads shard 2. The replicator refuses with
  // the address it knows; the reply names the primary's RESP address from
  // the map instead.
  const std::string key = KeyOn(2);
  const uint32_t slot = cluster::KeySlot(key);
  const std::string moved_to_0 =
      absl::StrCat("MOVED ", ranges_[0].start(), " ", nodes_[0].resp_address);
  hook_.refusal =
      cluster::ToStatus(cluster::Refusal::Moved(ranges_[0].start(), "node-x", "10.9.9.9:1"));
  EXPECT_EQ(RunOne(2, {"SET", key, "v"}).str, moved_to_0);
  EXPECT_EQ(RunOne(2, {"MSET", key, "v"}).str, moved_to_0);
  EXPECT_EQ(RunOne(2, {"DEL", key}).str, moved_to_0);
  hook_.refusal = cluster::ToStatus(cluster::Refusal::ClusterDown("backup dropped"));
  EXPECT_EQ(RunOne(2, {"SET", key, "v"}).str, "CLUSTERDOWN backup dropped");
  // A write whose backups may hold it: the client is told its outcome is
  // unknown, in words no cluster client retries.
  hook_.refusal = cluster::ToStatus(
      cluster::Refusal::ClusterDown("cannot drop failed backup node-1").WithUnknownEffect());
  EXPECT_EQ(RunOne(2, {"SET", key, "v"}).str,
            "UNKNOWN outcome unknown: CLUSTERDOWN cannot drop failed backup node-1");
  EXPECT_EQ(RunOne(2, {"DEL", key}).str,
            "UNKNOWN outcome unknown: CLUSTERDOWN cannot drop failed backup node-1");
  hook_.refusal = absl::OkStatus();
  EXPECT_EQ(RunOne(2, {"SET", key, "v"}).str, "OK");
  EXPECT_EQ(Owner(key), 2);
  EXPECT_LT(slot, cluster::kSlotCount);
}

// MSET and DEL write key by key: a refusal of no effect met after an earlier
// key was written is answered as of unknown effect, so that no cluster
// client resends the command and writes the earlier key twice.
TEST_F(RespClusterTest, ARefusalAfterEarlierKeysOfTheCommandIsOfUnknownEffect) {
  std::string tag;
  for (int i = 0; tag.empty(); ++i) {
    const std::string t = absl::StrCat("{t", i, "}");
    if (Owner(t) == 2) tag = t;
  }
  const std::string k1 = tag + "1", k2 = tag + "2";
  hook_.only_key = k2;
  hook_.refusal = cluster::ToStatus(cluster::Refusal::TryAgain(cluster::KeySlot(k2), "handoff"));
  // Refused first: nothing was written, the refusal stands.
  EXPECT_EQ(RunOne(2, {"MSET", k2, "a", k1, "a"}).str,
            absl::StrCat("TRYAGAIN Hash slot ", cluster::KeySlot(k2), " handoff"));
  const Reply mset = RunOne(2, {"MSET", k1, "b", k2, "b"});
  EXPECT_THAT(mset.str, StartsWith("UNKNOWN outcome unknown: TRYAGAIN Hash slot"));
  {
    auto v = nodes_[2].store->Get(k1);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->value(), "b");
  }
  const Reply del = RunOne(2, {"DEL", k1, k2});
  EXPECT_THAT(del.str, StartsWith("UNKNOWN outcome unknown: TRYAGAIN Hash slot"));
  EXPECT_TRUE(absl::IsNotFound(nodes_[2].store->Get(k1).status()));
  hook_.only_key.clear();
  hook_.refusal = absl::OkStatus();
}

TEST_F(RespClusterTest, ClusterCommandsDescribeTheMap) {
  EXPECT_EQ(RunOne(0, {"CLUSTER", "KEYSLOT", "foo"}).integer, 12182);  // redis-server's answer
  EXPECT_EQ(RunOne(0, {"CLUSTER", "KEYSLOT", "{user1}.name"}).integer,
            static_cast<int64_t>(cluster::KeySlot("user1")));
  EXPECT_EQ(RunOne(1, {"CLUSTER", "MYID"}).str, RedisNodeId(NodeName(1)));
  EXPECT_THAT(RunOne(0, {"CLUSTER", "NOPE"}).str, StartsWith("ERR unknown subcommand 'NOPE'"));
  EXPECT_EQ(RunOne(0, {"CLUSTER", "KEYSLOT"}).str,
            "ERR wrong number of arguments for 'cluster|keyslot' command");
  EXPECT_EQ(RunOne(0, {"ASKING"}).str, "OK");
  EXPECT_EQ(RunOne(0, {"WAIT", "1", "0"}).integer, 1);  // shard 0 has one backup
  EXPECT_THAT(RunOne(0, {"INFO"}).str, HasSubstr("# Cluster\r\ncluster_enabled:1\r\n"));
  const Reply hello = RunOne(0, {"HELLO", "2"});
  ASSERT_EQ(hello.elements.size(), 14u);
  EXPECT_EQ(hello.elements[8].str, "mode");
  EXPECT_EQ(hello.elements[9].str, "cluster");

  // CLUSTER SLOTS: one entry per range, primary then backup.
  const Reply slots = RunOne(0, {"CLUSTER", "SLOTS"});
  ASSERT_EQ(slots.elements.size(), static_cast<size_t>(kNodes));
  for (int i = 0; i < kNodes; ++i) {
    const Reply& e = slots.elements[i];
    ASSERT_EQ(e.elements.size(), 4u);
    EXPECT_EQ(e.elements[0].integer, ranges_[i].start());
    EXPECT_EQ(e.elements[1].integer, ranges_[i].end());
    const int backup = (i + 1) % kNodes;
    for (auto [pos, node] : {std::pair<int, int>{2, i}, {3, backup}}) {
      const Reply& n = e.elements[pos];
      ASSERT_EQ(n.elements.size(), 4u);
      EXPECT_EQ(n.elements[0].str, "127.0.0.1");
      EXPECT_EQ(n.elements[1].integer, nodes_[node].server->port());
      EXPECT_EQ(n.elements[2].str, RedisNodeId(NodeName(node)));
    }
  }

  // CLUSTER SHARDS: slots and nodes maps.
  const Reply shards = RunOne(0, {"CLUSTER", "SHARDS"});
  ASSERT_EQ(shards.elements.size(), static_cast<size_t>(kNodes));
  for (int i = 0; i < kNodes; ++i) {
    const Reply& s = shards.elements[i];
    ASSERT_EQ(s.elements.size(), 4u);
    EXPECT_EQ(s.elements[0].str, "slots");
    ASSERT_EQ(s.elements[1].elements.size(), 2u);
    EXPECT_EQ(s.elements[1].elements[0].integer, ranges_[i].start());
    EXPECT_EQ(s.elements[1].elements[1].integer, ranges_[i].end());
    EXPECT_EQ(s.elements[2].str, "nodes");
    ASSERT_EQ(s.elements[3].elements.size(), 2u);
    std::map<std::string, Reply> primary;
    const Reply& p = s.elements[3].elements[0];
    for (size_t k = 0; k + 1 < p.elements.size(); k += 2)
      primary[p.elements[k].str] = p.elements[k + 1];
    EXPECT_EQ(primary["id"].str, RedisNodeId(NodeName(i)));
    EXPECT_EQ(primary["port"].integer, nodes_[i].server->port());
    EXPECT_EQ(primary["ip"].str, "127.0.0.1");
    EXPECT_EQ(primary["role"].str, "master");
    EXPECT_EQ(primary["health"].str, "online");
  }

  // CLUSTER NODES: "<id> <ip:port@cport> <flags> <master> 0 0 <epoch> connected <slots>".
  const Reply nodes = RunOne(1, {"CLUSTER", "NODES"});
  std::vector<std::string> lines = absl::StrSplit(nodes.str, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(kNodes));
  for (int i = 0; i < kNodes; ++i) {
    std::vector<std::string> f = absl::StrSplit(lines[i], ' ');
    ASSERT_EQ(f.size(), 9u) << lines[i];
    EXPECT_EQ(f[0], RedisNodeId(NodeName(i)));
    EXPECT_EQ(f[1], absl::StrCat(nodes_[i].resp_address, "@", 7100 + i));
    EXPECT_EQ(f[2], i == 1 ? "myself,master" : "master");
    EXPECT_EQ(f[3], "-");
    EXPECT_EQ(f[6], absl::StrCat(10 + i));
    EXPECT_EQ(f[7], "connected");
    EXPECT_EQ(f[8], absl::StrCat(ranges_[i].start(), "-", ranges_[i].end()));
  }

  const Reply info = RunOne(0, {"CLUSTER", "INFO"});
  for (const char* field :
       {"cluster_state:ok\r\n", "cluster_slots_assigned:16384\r\n", "cluster_known_nodes:3\r\n",
        "cluster_size:3\r\n", "cluster_current_epoch:1\r\n", "cluster_my_epoch:10\r\n"}) {
    EXPECT_THAT(info.str, HasSubstr(field));
  }
}

TEST(RedisNodeIdTest, FortyHexDigitsStableAndDistinct) {
  const std::string a = RedisNodeId("10.0.0.1:7000");
  EXPECT_EQ(a.size(), 40u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(a, RedisNodeId("10.0.0.1:7000"));
  EXPECT_NE(a, RedisNodeId("10.0.0.1:7001"));
}

// The real redis-cli -c: every SET and GET goes to node 0 first and follows
// MOVED; each value must land on its slot's primary only.
TEST_F(RespClusterTest, RedisCliFollowsMoved) {
  std::string sets, gets;
  constexpr int kKeys = 30;
  for (int i = 0; i < kKeys; ++i) {
    absl::StrAppend(&sets, "SET key:", i, " value:", i, "\n");
    absl::StrAppend(&gets, "GET key:", i, "\n");
  }
  const std::string port0 = absl::StrCat(nodes_[0].server->port());
  const std::string set_out = RedisCli({"-c", "-p", port0}, sets);
  std::vector<int> per_node(kNodes, 0);
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = absl::StrCat("key:", i);
    const int owner = Owner(key);
    ++per_node[owner];
    for (int n = 0; n < kNodes; ++n) {
      EXPECT_EQ(nodes_[n].store->Exists(key), n == owner) << key << " on node " << n << "\n"
                                                          << set_out;
    }
  }
  for (int n = 0; n < kNodes; ++n) EXPECT_GT(per_node[n], 0) << "keys spread over all nodes";
  // Read back through another node, again following MOVED.
  const std::string get_out = RedisCli({"-c", "-p", absl::StrCat(nodes_[2].server->port())}, gets);
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_THAT(get_out, HasSubstr(absl::StrCat("value:", i, "\n")));
  }
  // CLUSTER KEYSLOT through redis-cli, against the slots redis-server prints.
  EXPECT_EQ(RedisCli({"-p", port0, "CLUSTER", "KEYSLOT", "somekey"}, ""), "11058\n");
  // redis-cli's own cluster check reads CLUSTER NODES / INFO.
  const std::string check = RedisCli({"--cluster", "check", nodes_[0].resp_address}, "");
  EXPECT_THAT(check, HasSubstr("[OK] All 16384 slots covered.")) << check;
}

// A slot migration (§19.9) from shard 0 (node 0) to shard 1 (node 1), as
// ClusterState routes it: COPYING is served by the source; HANDOFF answers
// TRYAGAIN before MarkHandedOff and ASK after, while the target serves once
// it accepted the handoff (ASKING or not); the flip map answers MOVED.
// CLUSTER NODES marks the migration on both primaries' lines, and redis-cli
// -c follows the ASK.
TEST_F(RespClusterTest, MigrationAnswersTryAgainAskThenMoved) {
  const std::string key = KeyOn(0, "mig");
  const uint32_t slot = cluster::KeySlot(key);
  const std::string other = KeyOn(0, "stay");  // a slot that does not move
  ASSERT_NE(cluster::KeySlot(other), slot);
  v1::ClusterMap map = MakeMap(2);
  v1::Migration* m = map.add_migrations();
  m->set_id(1);
  m->mutable_slots()->set_start(slot);
  m->mutable_slots()->set_end(slot);
  m->set_source_shard(0);
  m->set_target_shard(1);
  m->set_state(v1::MIGRATION_COPYING);
  map.set_next_migration_id(2);
  Install(map);
  // COPYING: the source serves, the target redirects to it.
  EXPECT_EQ(RunOne(0, {"SET", key, "v1"}).str, "OK");
  EXPECT_EQ(RunOne(0, {"GET", key}).str, "v1");
  EXPECT_EQ(RunOne(1, {"GET", key}).str, absl::StrCat("MOVED ", slot, " ", nodes_[0].resp_address));
  const std::string nodes_text = RunOne(0, {"CLUSTER", "NODES"}).str;
  EXPECT_THAT(nodes_text,
              HasSubstr(absl::StrCat(" [", slot, "->-", RedisNodeId(NodeName(1)), "]")));
  EXPECT_THAT(nodes_text,
              HasSubstr(absl::StrCat(" [", slot, "-<-", RedisNodeId(NodeName(0)), "]")));
  for (absl::string_view line : absl::StrSplit(nodes_text, '\n', absl::SkipEmpty())) {
    const bool source = absl::StartsWith(line, RedisNodeId(NodeName(0)));
    const bool target = absl::StartsWith(line, RedisNodeId(NodeName(1)));
    EXPECT_EQ(absl::StrContains(line, "->-"), source) << line;
    EXPECT_EQ(absl::StrContains(line, "-<-"), target) << line;
  }

  // HANDOFF, before MarkHandedOff: TRYAGAIN at the source, MOVED to the
  // source at a target that has not accepted.
  map.set_epoch(3);
  map.mutable_migrations(0)->set_state(v1::MIGRATION_HANDOFF);
  Install(map);
  const std::string try_again =
      absl::StrCat("TRYAGAIN Hash slot ", slot, " is being handed to another shard; retry shortly");
  EXPECT_EQ(RunOne(0, {"GET", key}).str, try_again);
  EXPECT_EQ(RunOne(0, {"SET", key, "x"}).str, try_again);
  EXPECT_EQ(RunOne(0, {"GET", other}).type, Reply::Type::kNull);  // other slots: as ever
  EXPECT_EQ(RunOne(1, {"GET", key}).str, absl::StrCat("MOVED ", slot, " ", nodes_[0].resp_address));
  EXPECT_THAT(RunOne(0, {"CLUSTER", "NODES"}).str, HasSubstr(absl::StrCat("[", slot, "->-")));

  // Handed off: ASK to the target, which serves with or without ASKING.
  nodes_[1].state->AcceptHandoff(1);
  nodes_[0].state->MarkHandedOff(1);
  const std::string ask = absl::StrCat("ASK ", slot, " ", nodes_[1].resp_address);
  EXPECT_EQ(RunOne(0, {"GET", key}).str, ask);
  EXPECT_EQ(RunOne(0, {"SET", key, "x"}).str, ask);
  EXPECT_EQ(RunOne(1, {"SET", key, "v2"}).str, "OK");
  const std::vector<Reply> asking =
      Run(1, {Cmd({"ASKING"}), Cmd({"GET", key}), Cmd({"SET", key, "v3"})}, 3);
  ASSERT_EQ(asking.size(), 3u);
  EXPECT_EQ(asking[0].str, "OK");
  EXPECT_EQ(asking[1].str, "v2");
  EXPECT_EQ(asking[2].str, "OK");
  // redis-cli -c follows the ASK (ASKING, then the command at the target).
  const std::string port0 = absl::StrCat(nodes_[0].server->port());
  EXPECT_THAT(RedisCli({"-c", "-p", port0}, absl::StrCat("GET ", key, "\n")),
              HasSubstr(absl::StrCat("located at ", nodes_[1].resp_address, "\nv3\n")));
  // The write went to the target: the source still has the copy of before.
  EXPECT_EQ(nodes_[0].store->Get(key)->value(), "v1");

  // The flip: the slot is shard 1's, the source answers MOVED.
  v1::ClusterMap flipped = MakeMap(4);
  v1::SlotRange range;
  range.set_start(slot);
  range.set_end(slot);
  cluster::MoveSlots(range, flipped.mutable_shards(0), flipped.mutable_shards(1));
  Install(flipped);
  EXPECT_EQ(RunOne(0, {"GET", key}).str, absl::StrCat("MOVED ", slot, " ", nodes_[1].resp_address));
  EXPECT_EQ(RunOne(1, {"GET", key}).str, "v3");
  EXPECT_THAT(RunOne(0, {"CLUSTER", "NODES"}).str, ::testing::Not(HasSubstr("->-")));
}

// A cluster-aware client library: redis-py's RedisCluster (Debian
// python3-redis) routes by CLUSTER SLOTS and COMMAND on its own; the script
// checks what it reads back, this test where the values landed.
TEST_F(RespClusterTest, RedisPyClusterClient) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  ASSERT_NE(srcdir, nullptr);
  ASSERT_NE(workspace, nullptr);
  const std::string script =
      absl::StrCat(srcdir, "/", workspace, "/server/resp/redis_cluster_client_test.py");
  const uint32_t seed = std::random_device{}();
  constexpr int kKeys = 100;
  const std::string cmd = absl::StrCat("timeout 60 python3 '", script, "' ",
                                       nodes_[1].server->port(), " ", seed, " ", kKeys, " 2>&1");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  std::printf("%s", out.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("PASS ", kKeys, " keys over 3 primaries")));
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = absl::StrCat("py:", i);
    for (int node = 0; node < kNodes; ++node) {
      EXPECT_EQ(nodes_[node].store->Exists(key), node == Owner(key)) << key << " on " << node;
    }
  }
  // The script's counters and TTLs (cache_commands) landed on their
  // primaries only.
  for (int i = 0; i < 30; ++i) {
    const std::string key = absl::StrCat("cache:", i);
    for (int node = 0; node < kNodes; ++node) {
      EXPECT_EQ(nodes_[node].store->Exists(key), node == Owner(key)) << key << " on " << node;
    }
  }
}

// redis-py's RedisCluster follows -ASK: the key's slot is handed off from
// node 0 to node 1, the client (which learnt node 0 from CLUSTER SLOTS)
// sends ASKING and the command to node 1.
TEST_F(RespClusterTest, MigrationRedisPyFollowsAsk) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  ASSERT_NE(srcdir, nullptr);
  ASSERT_NE(workspace, nullptr);
  const std::string key = KeyOn(0, "pyask");
  const uint32_t slot = cluster::KeySlot(key);
  v1::ClusterMap map = MakeMap(2);
  v1::Migration* m = map.add_migrations();
  m->set_id(1);
  m->mutable_slots()->set_start(slot);
  m->mutable_slots()->set_end(slot);
  m->set_source_shard(0);
  m->set_target_shard(1);
  m->set_state(v1::MIGRATION_HANDOFF);
  map.set_next_migration_id(2);
  Install(map);
  nodes_[1].state->AcceptHandoff(1);
  nodes_[0].state->MarkHandedOff(1);
  const std::string script =
      absl::StrCat(srcdir, "/", workspace, "/server/resp/redis_cluster_client_test.py");
  const uint32_t seed = std::random_device{}();
  const std::string cmd =
      absl::StrCat("timeout 60 python3 '", script, "' ", nodes_[2].server->port(), " ", seed,
                   " 0 ask ", key, " 2>&1");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  std::printf("%s", out.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("PASS ask ", key)));
  // The write landed on the target only.
  EXPECT_TRUE(nodes_[1].store->Exists(key));
  EXPECT_FALSE(nodes_[0].store->Exists(key));
}

// Single-node mode answers as a Redis without cluster support.
TEST(RespSingleNodeTest, ClusterCommandsAreRefusedAsRedisDoes) {
  MemoryPoolOptions po;
  po.data_bytes = 8 << 20;
  po.index_bytes = 1 << 20;
  auto pool = *MemoryPool::Create(po);
  KvStoreOptions so;
  so.segment_bytes = 1 << 20;
  auto store = *KvStore::Create(pool.get(), so);
  RespServerOptions o;
  o.port = 0;
  o.threads = 1;
  auto server = *RespServer::Start(store.get(), o);
  int fd = Connect(server->port());
  Send(fd, Cmd({"CLUSTER", "INFO"}) + Cmd({"CLUSTER", "SLOTS"}) + Cmd({"READONLY"}) +
               Cmd({"READWRITE"}) + Cmd({"ASKING"}) + Cmd({"WAIT", "1", "0"}) + Cmd({"INFO"}) +
               Cmd({"SET", "a", "1"}) + Cmd({"MSET", "a", "1", "b", "2"}) + Cmd({"GET", "b"}));
  const std::vector<Reply> r = Read(fd, 10);
  close(fd);
  ASSERT_EQ(r.size(), 10u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r[i].type, Reply::Type::kError);
    EXPECT_EQ(r[i].str, "ERR This instance has cluster support disabled");
  }
  EXPECT_EQ(r[5].integer, 0);
  EXPECT_THAT(r[6].str, HasSubstr("# Cluster\r\ncluster_enabled:0\r\n"));
  EXPECT_EQ(r[7].str, "OK");
  EXPECT_EQ(r[8].str, "OK");  // no CROSSSLOT without a cluster
  EXPECT_EQ(r[9].str, "2");
}

}  // namespace
}  // namespace server
}  // namespace kvstore
