// Copyright 2026 The kvstore Authors.
//
// `kvctl cluster`: subcommand and flag parsing, and the text and JSON
// renderings of a map with a healthy shard, a shard that is down and a
// syncing node.

#include <set>
#include <string>
#include <vector>

#include "client/kvctl/kvctl_cluster_command.h"
#include "client/kvctl/kvctl_cluster_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kvstore {
namespace client {
namespace kvctl {
namespace {

using ::testing::HasSubstr;

v1::ClusterMap SampleMap() {
  v1::ClusterMap m;
  m.set_epoch(7);
  m.set_controller("n1");
  m.set_cluster_name("prod");
  m.set_replication_factor(2);
  v1::Shard* s0 = m.add_shards();
  s0->set_shard_id(0);
  s0->set_shard_epoch(3);
  v1::SlotRange* r = s0->add_slots();
  r->set_start(0);
  r->set_end(8191);
  s0->add_replicas("n0");
  s0->add_replicas("n1");
  s0->add_syncing("n2");
  v1::Shard* s1 = m.add_shards();
  s1->set_shard_id(1);
  s1->set_shard_epoch(9);
  r = s1->add_slots();
  r->set_start(8192);
  r->set_end(16383);
  // No replicas: shard 1 is down.
  for (int i = 0; i < 3; ++i) {
    v1::ClusterNode* n = m.add_nodes();
    n->set_node_id("n" + std::to_string(i));
    n->set_incarnation(100 + i);
    n->set_control_address("10.0.0." + std::to_string(i) + ":7300");
    n->set_resp_address("10.0.0." + std::to_string(i) + ":6380");
  }
  return m;
}

TEST(ParseClusterRequestTest, Subcommands) {
  EXPECT_EQ(ParseClusterRequest("status", -1, "", {})->kind, ClusterRequest::Kind::kStatus);
  EXPECT_EQ(ParseClusterRequest("nodes", -1, "", {})->kind, ClusterRequest::Kind::kNodes);
  EXPECT_EQ(ParseClusterRequest("slots", -1, "", {})->kind, ClusterRequest::Kind::kSlots);
  auto f = ParseClusterRequest("failover", 2, "n1", {"shard", "to"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kind, ClusterRequest::Kind::kFailover);
  EXPECT_EQ(f->shard, 2);
  EXPECT_EQ(f->target, "n1");
  // --to is optional: the controller picks.
  EXPECT_TRUE(ParseClusterRequest("failover", 0, "", {"shard"}).ok());
}

TEST(ParseClusterRequestTest, UsageErrors) {
  EXPECT_THAT(ParseClusterRequest("reshard", -1, "", {}).status().message(),
              HasSubstr("unknown cluster subcommand \"reshard\""));
  EXPECT_THAT(ParseClusterRequest("failover", -1, "", {}).status().message(),
              HasSubstr("needs --shard"));
  EXPECT_THAT(ParseClusterRequest("failover", -3, "", {"shard"}).status().message(),
              HasSubstr("0 or more"));
  EXPECT_THAT(ParseClusterRequest("failover", 1, "", {"shard", "to"}).status().message(),
              HasSubstr("--to needs"));
  EXPECT_THAT(ParseClusterRequest("status", 1, "", {"shard"}).status().message(),
              HasSubstr("only to cluster failover"));
  EXPECT_FALSE(ParseClusterRequest("slots", -1, "n1", {"to"}).ok());
}

TEST(FormatClusterTest, StatusText) {
  const std::string out = FormatClusterStatus(SampleMap(), false);
  EXPECT_EQ(out,
            "epoch 7 controller n1 cluster prod replicas 2\n"
            "shard 0  up    slots 0-8191  primary n0  backups n1  syncing n2  shard_epoch 3\n"
            "shard 1  DOWN  slots 8192-16383  primary -  backups -  syncing -  shard_epoch 9\n");
}

TEST(FormatClusterTest, StatusJson) {
  auto j = nlohmann::json::parse(FormatClusterStatus(SampleMap(), true));
  EXPECT_EQ(j["epoch"], 7);
  EXPECT_EQ(j["controller"], "n1");
  ASSERT_EQ(j["shards"].size(), 2u);
  EXPECT_EQ(j["shards"][0]["primary"], "n0");
  EXPECT_EQ(j["shards"][0]["backups"], nlohmann::json::array({"n1"}));
  EXPECT_EQ(j["shards"][0]["syncing"], nlohmann::json::array({"n2"}));
  EXPECT_EQ(j["shards"][0]["slots"], nlohmann::json::parse("[[0,8191]]"));
  EXPECT_EQ(j["shards"][0]["up"], true);
  EXPECT_TRUE(j["shards"][1]["primary"].is_null());
  EXPECT_EQ(j["shards"][1]["up"], false);
}

TEST(FormatClusterTest, Nodes) {
  const std::string text = FormatClusterNodes(SampleMap(), false);
  EXPECT_THAT(text, HasSubstr("n0  control 10.0.0.0:7300  resp 10.0.0.0:6380  incarnation 100  "
                              "roles primary:0\n"));
  EXPECT_THAT(text, HasSubstr("n1  control 10.0.0.1:7300  resp 10.0.0.1:6380  incarnation 101  "
                              "roles backup:0\n"));
  EXPECT_THAT(text, HasSubstr("roles syncing:0\n"));
  auto j = nlohmann::json::parse(FormatClusterNodes(SampleMap(), true));
  ASSERT_EQ(j["nodes"].size(), 3u);
  EXPECT_EQ(j["nodes"][1]["incarnation"], 101);
  EXPECT_EQ(j["nodes"][1]["roles"], nlohmann::json::array({"backup:0"}));
}

TEST(FormatClusterTest, Slots) {
  EXPECT_EQ(FormatClusterSlots(SampleMap(), false),
            "0-8191  shard 0  primary n0 10.0.0.0:7300\n"
            "8192-16383  shard 1  primary down\n");
  auto j = nlohmann::json::parse(FormatClusterSlots(SampleMap(), true));
  ASSERT_EQ(j["slots"].size(), 2u);
  EXPECT_EQ(j["slots"][0]["primary_address"], "10.0.0.0:7300");
  EXPECT_TRUE(j["slots"][1]["primary"].is_null());
}

TEST(ParseClusterRequestTest, RemoveNode) {
  auto r = ParseClusterRequest("remove-node", -1, "", {}, {"n2"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, ClusterRequest::Kind::kRemoveNode);
  EXPECT_EQ(r->node, "n2");
  EXPECT_THAT(ParseClusterRequest("remove-node", -1, "", {}).status().message(),
              HasSubstr("exactly one NODE"));
  EXPECT_THAT(ParseClusterRequest("remove-node", -1, "", {}, {""}).status().message(),
              HasSubstr("exactly one NODE"));
  EXPECT_THAT(ParseClusterRequest("remove-node", 1, "", {"shard"}, {"n2"}).status().message(),
              HasSubstr("only to cluster failover"));
  EXPECT_THAT(ParseClusterRequest("status", -1, "", {}, {"n2"}).status().message(),
              HasSubstr("takes no operand"));
  EXPECT_THAT(ParseClusterRequest("failover", 0, "", {"shard"}, {"n2"}).status().message(),
              HasSubstr("takes no operand"));
}

// remove-node prints the map it wrote as status prints it: the drained
// node is in no shard and listed as draining.
TEST(ClusterFormatTest, StatusListsDrainingNodes) {
  v1::ClusterMap map = SampleMap();
  v1::ClusterNode* mark = map.add_draining();
  mark->set_node_id("n9");
  mark->set_incarnation(3);
  EXPECT_EQ(FormatClusterStatus(map, false),
            "epoch 7 controller n1 cluster prod replicas 2\n"
            "draining n9\n"
            "shard 0  up    slots 0-8191  primary n0  backups n1  syncing n2  shard_epoch 3\n"
            "shard 1  DOWN  slots 8192-16383  primary -  backups -  syncing -  shard_epoch 9\n");
  auto j = nlohmann::json::parse(FormatClusterStatus(map, true));
  EXPECT_EQ(j["draining"], nlohmann::json::array({"n9"}));
  auto none = nlohmann::json::parse(FormatClusterStatus(SampleMap(), true));
  EXPECT_EQ(none["draining"], nlohmann::json::array());
}

TEST(ParseClusterRequestTest, AddNodeAndRebalance) {
  auto a = ParseClusterRequest("add-node", -1, "", {}, {"n4"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kind, ClusterRequest::Kind::kAddNode);
  EXPECT_EQ(a->node, "n4");
  EXPECT_THAT(ParseClusterRequest("add-node", -1, "", {}).status().message(),
              HasSubstr("add-node needs exactly one NODE"));
  auto r = ParseClusterRequest("rebalance", -1, "", {"wait"}, {}, false, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, ClusterRequest::Kind::kRebalance);
  EXPECT_TRUE(r->wait);
  EXPECT_FALSE(r->dry_run);
  auto d = ParseClusterRequest("rebalance", -1, "", {"dry_run"}, {}, true, false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->dry_run);
  EXPECT_THAT(ParseClusterRequest("rebalance", -1, "", {"dry_run", "wait"}, {}, true, true)
                  .status()
                  .message(),
              HasSubstr("exclude each other"));
  EXPECT_THAT(ParseClusterRequest("status", -1, "", {"wait"}, {}, false, true).status().message(),
              HasSubstr("only to cluster rebalance"));
  EXPECT_THAT(ParseClusterRequest("rebalance", -1, "", {}, {"x"}).status().message(),
              HasSubstr("takes no operand"));
  EXPECT_THAT(ParseClusterRequest("rebalance", 1, "", {"shard"}).status().message(),
              HasSubstr("only to cluster failover"));
}

TEST(ParseClusterRequestTest, AcceptLoss) {
  auto a = ParseClusterRequest("accept-loss", 1, "", {"shard", "yes"}, {}, false, false, true);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kind, ClusterRequest::Kind::kAcceptLoss);
  EXPECT_EQ(a->shard, 1);
  EXPECT_TRUE(a->yes);
  EXPECT_FALSE(ParseClusterRequest("accept-loss", 1, "", {"shard"})->yes);
  EXPECT_THAT(ParseClusterRequest("accept-loss", -1, "", {}).status().message(),
              HasSubstr("accept-loss needs --shard"));
  EXPECT_THAT(
      ParseClusterRequest("status", -1, "", {"yes"}, {}, false, false, true).status().message(),
      HasSubstr("--yes applies only to cluster accept-loss"));
  EXPECT_FALSE(ParseClusterRequest("accept-loss", 1, "n1", {"shard", "to"}).ok());
}

// accept-loss says what it costs before anything changes.
TEST(ClusterFormatTest, DescribeLossNamesTheShardsSlotsAndWhatItWaitsFor) {
  v1::ClusterMap map = SampleMap();
  map.mutable_shards(1)->add_last_in_sync()->set_node_id("n3");
  EXPECT_EQ(DescribeLoss(map, 1),
            "accept-loss of shard 1: every key of shard 1 is lost, slots 8192-16383 (8192 "
            "slots), every acknowledged write included; the shard then serves again, empty.\n"
            "it waits for its last in-sync replicas (n3) to register again with their copy; if "
            "one can still come back, start it instead.\n");
  EXPECT_EQ(DescribeLoss(map, 0), "");  // up
  EXPECT_EQ(DescribeLoss(map, 7), "");  // no such shard
}

v1::Migration Move(uint32_t id, uint32_t start, uint32_t end, uint32_t from, uint32_t to,
                   v1::MigrationState state) {
  v1::Migration m;
  m.set_id(id);
  m.mutable_slots()->set_start(start);
  m.mutable_slots()->set_end(end);
  m.set_source_shard(from);
  m.set_target_shard(to);
  m.set_state(state);
  return m;
}

TEST(ClusterFormatTest, StatusAndSlotsShowMigrations) {
  v1::ClusterMap map = SampleMap();
  *map.add_migrations() = Move(7, 4096, 8191, 0, 1, v1::MIGRATION_COPYING);
  *map.add_migrations() = Move(8, 0, 9, 0, 1, v1::MIGRATION_PENDING);
  const std::string lines =
      "migration 7  COPYING  slots 4096-8191  count 4096  shard 0 -> shard 1\n"
      "migration 8  PENDING  slots 0-9  count 10  shard 0 -> shard 1\n";
  EXPECT_EQ(FormatClusterStatus(map, false), FormatClusterStatus(SampleMap(), false) + lines);
  EXPECT_EQ(FormatClusterSlots(map, false), FormatClusterSlots(SampleMap(), false) + lines);
  for (const std::string& out : {FormatClusterStatus(map, true), FormatClusterSlots(map, true)}) {
    auto j = nlohmann::json::parse(out);
    ASSERT_EQ(j["migrations"].size(), 2u);
    EXPECT_EQ(j["migrations"][0],
              nlohmann::json::parse(R"({"id":7,"state":"COPYING","start":4096,"end":8191,)"
                                    R"("count":4096,"source_shard":0,"target_shard":1})"));
    EXPECT_EQ(j["migrations"][1]["state"], "PENDING");
  }
  EXPECT_EQ(nlohmann::json::parse(FormatClusterStatus(SampleMap(), true))["migrations"],
            nlohmann::json::array());
}

TEST(ClusterFormatTest, RebalancePlan) {
  const std::vector<v1::Migration> planned = {Move(3, 100, 199, 0, 2, v1::MIGRATION_PENDING),
                                              Move(4, 300, 300, 1, 2, v1::MIGRATION_PENDING)};
  EXPECT_EQ(FormatRebalancePlan(planned, 9, false, false),
            "queued 2 migration(s) in map epoch 9\n"
            "migration 3  slots 100-199  count 100  shard 0 -> shard 2\n"
            "migration 4  slots 300-300  count 1  shard 1 -> shard 2\n");
  EXPECT_THAT(FormatRebalancePlan(planned, 8, true, false),
              HasSubstr("dry run: 2 migration(s) planned, nothing written\n"));
  EXPECT_EQ(FormatRebalancePlan({}, 8, false, false), "slots are already even: nothing to move\n");
  auto j = nlohmann::json::parse(FormatRebalancePlan(planned, 9, true, true));
  EXPECT_EQ(j["dry_run"], true);
  EXPECT_EQ(j["epoch"], 9);
  ASSERT_EQ(j["planned"].size(), 2u);
  EXPECT_EQ(j["planned"][1]["count"], 1);
  EXPECT_EQ(j["planned"][0]["target_shard"], 2);
}

TEST(ClusterFormatTest, RebalanceProgress) {
  // SampleMap: shard 0 owns 0-8191, shard 1 8192-16383. Migration 1
  // (8000-8191 to shard 1) flipped, 2 runs, 3 waits, 4 (to shard 0) was
  // dropped: its slots are still shard 1's.
  const std::vector<v1::Migration> planned = {Move(1, 8000, 8191, 0, 1, v1::MIGRATION_PENDING),
                                              Move(2, 7000, 7999, 0, 1, v1::MIGRATION_PENDING),
                                              Move(3, 6000, 6999, 0, 1, v1::MIGRATION_PENDING),
                                              Move(4, 9000, 9001, 1, 0, v1::MIGRATION_PENDING)};
  v1::ClusterMap map = SampleMap();
  map.mutable_shards(0)->mutable_slots(0)->set_end(7999);
  map.mutable_shards(1)->mutable_slots(0)->set_start(8000);
  *map.add_migrations() = Move(2, 7000, 7999, 0, 1, v1::MIGRATION_HANDOFF);
  *map.add_migrations() = Move(3, 6000, 6999, 0, 1, v1::MIGRATION_PENDING);
  RebalanceProgress p = ProgressOf(map, planned);
  EXPECT_EQ(p.total, 4);
  EXPECT_EQ(p.done, 1);
  EXPECT_EQ(p.dropped, 1);
  EXPECT_EQ(p.pending, 1);
  EXPECT_EQ(p.running.id(), 2u);
  EXPECT_FALSE(p.finished());
  EXPECT_EQ(FormatRebalanceProgress(p, false),
            "epoch 7: 1 of 4 done, 1 pending, 1 DROPPED (a shard went down); running migration 2 "
            "HANDOFF slots 7000-7999  count 1000  shard 0 -> shard 1\n");
  auto j = nlohmann::json::parse(FormatRebalanceProgress(p, true));
  EXPECT_EQ(j["done"], 1);
  EXPECT_EQ(j["running"]["state"], "HANDOFF");
  map.clear_migrations();
  map.mutable_shards(0)->mutable_slots(0)->set_end(5999);
  map.mutable_shards(1)->mutable_slots(0)->set_start(6000);
  p = ProgressOf(map, planned);
  EXPECT_TRUE(p.finished());
  EXPECT_EQ(p.done, 3);
  EXPECT_EQ(FormatRebalanceProgress(p, false),
            "epoch 7: 3 of 4 done, 0 pending, 1 DROPPED (a shard went down)\n");
  EXPECT_TRUE(nlohmann::json::parse(FormatRebalanceProgress(p, true))["running"].is_null());
}

TEST(ClusterHelpTest, NamesEverySubcommand) {
  const std::string help = ClusterHelpText();
  for (const char* word : {"status", "nodes", "slots", "failover --shard=N [--to=NODE]",
                           "remove-node NODE", "add-node NODE", "rebalance [--dry-run] [--wait]",
                           "--wait_timeout", "FAILED_PRECONDITION", "--json"}) {
    EXPECT_THAT(help, HasSubstr(word));
  }
}

}  // namespace
}  // namespace kvctl
}  // namespace client
}  // namespace kvstore
