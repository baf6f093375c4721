// Copyright 2026 The kvstore Authors.
//
// The map-history checker on hand-written map sequences: the changes the
// controller, primaries and admin commands make must pass (failover after a
// death, refill, add-node + rebalance to the flip, a DOWN shard recovered by
// its returning copy, accept-loss, remove-node); each broken invariant must
// be reported, naming the shard or migration.

#include "tests/jepsen/map_history.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace jepsen {
namespace {

using ::testing::HasSubstr;

void SetNode(v1::ClusterMap* map, const std::string& id, uint64_t inc, const std::string& pid) {
  for (v1::ClusterNode& n : *map->mutable_nodes()) {
    if (n.node_id() == id) {
      n.set_incarnation(inc);
      n.set_process_id(pid);
      return;
    }
  }
  v1::ClusterNode* n = map->add_nodes();
  n->set_node_id(id);
  n->set_incarnation(inc);
  n->set_process_id(pid);
}

void DropNode(v1::ClusterMap* map, const std::string& id) {
  auto* nodes = map->mutable_nodes();
  for (int i = 0; i < nodes->size(); ++i) {
    if (nodes->Get(i).node_id() == id) {
      nodes->DeleteSubrange(i, 1);
      return;
    }
  }
}

void SetReplicas(v1::Shard* s, const std::vector<std::string>& in_sync,
                 const std::vector<std::string>& syncing = {}) {
  s->clear_replicas();
  s->clear_syncing();
  for (const std::string& id : in_sync) s->add_replicas(id);
  for (const std::string& id : syncing) s->add_syncing(id);
}

void SetSlots(v1::Shard* s, uint32_t start, uint32_t end) {
  s->clear_slots();
  v1::SlotRange* r = s->add_slots();
  r->set_start(start);
  r->set_end(end);
}

// n1..n3, R=2; shard 0 [n1,n2], 1 [n2,n3], 2 [n3,n1].
v1::ClusterMap Base() {
  v1::ClusterMap m;
  m.set_epoch(1);
  m.set_replication_factor(2);
  m.set_cluster_name("c");
  const std::vector<std::vector<std::string>> sets = {{"n1", "n2"}, {"n2", "n3"}, {"n3", "n1"}};
  for (int i = 0; i < 3; ++i) {
    v1::Shard* s = m.add_shards();
    s->set_shard_id(i);
    s->set_shard_epoch(1);
    SetSlots(s, i * 5461, i == 2 ? 16383 : i * 5461 + 5460);
    SetReplicas(s, sets[i]);
  }
  for (const char* id : {"n1", "n2", "n3"}) SetNode(&m, id, 1, std::string("p") + id);
  return m;
}

// Builds a history: each Next() copies the last map, bumps its epoch and
// lets the caller edit it.
class History {
 public:
  explicit History(v1::ClusterMap first) { maps_.push_back({1, std::move(first)}); }
  v1::ClusterMap& Next() {
    MapRevision r = maps_.back();
    r.revision += 1;
    r.map.set_epoch(r.map.epoch() + 1);
    maps_.push_back(std::move(r));
    return maps_.back().map;
  }
  v1::Shard* Shard(int i) { return maps_.back().map.mutable_shards(i); }
  void Bump(int i) { Shard(i)->set_shard_epoch(Shard(i)->shard_epoch() + 1); }
  MapHistoryResult Check(uint32_t min_insync = 2, std::set<uint32_t> accepted = {}) const {
    MapHistoryOptions o;
    o.min_insync = min_insync;
    o.accepted_loss = std::move(accepted);
    return CheckMapHistory(maps_, o);
  }

 private:
  std::vector<MapRevision> maps_;
};

std::string All(const MapHistoryResult& r) { return absl::StrJoin(r.violations, "\n"); }

TEST(MapHistoryTest, DeathFailoverAndRefillPass) {
  History h(Base());
  v1::ClusterMap& m = h.Next();  // n1 died: shard 0 fails over to n2
  SetReplicas(h.Shard(0), {"n2"});
  SetReplicas(h.Shard(2), {"n3"});
  h.Bump(0);
  h.Bump(2);
  DropNode(&m, "n1");
  SetNode(&h.Next(), "n1", 2, "pn1b");  // n1 back as a new process, syncing
  SetReplicas(h.Shard(0), {"n2"}, {"n1"});
  h.Bump(0);
  h.Next();
  SetReplicas(h.Shard(0), {"n2", "n1"});
  h.Bump(0);
  const MapHistoryResult r = h.Check();
  EXPECT_TRUE(r.ok()) << All(r);
  EXPECT_EQ(r.maps, 4u);
}

TEST(MapHistoryTest, AddNodeRebalanceToTheFlipPasses) {
  History h(Base());
  v1::ClusterMap* m = &h.Next();
  SetNode(m, "n4", 1, "pn4");
  v1::Shard* s = m->add_shards();
  s->set_shard_id(3);
  s->set_shard_epoch(1);
  SetReplicas(s, {"n4", "n1"});
  m = &h.Next();
  v1::Migration* mig = m->add_migrations();
  mig->set_id(0);
  mig->mutable_slots()->set_start(0);
  mig->mutable_slots()->set_end(1000);
  mig->set_source_shard(0);
  mig->set_target_shard(3);
  mig->set_state(v1::MIGRATION_PENDING);
  m->set_next_migration_id(1);
  h.Next().mutable_migrations(0)->set_state(v1::MIGRATION_COPYING);
  h.Next().mutable_migrations(0)->set_state(v1::MIGRATION_HANDOFF);
  m = &h.Next();  // the flip
  m->clear_migrations();
  SetSlots(h.Shard(0), 1001, 5460);
  SetSlots(h.Shard(3), 0, 1000);
  h.Bump(0);
  h.Bump(3);
  const MapHistoryResult r = h.Check();
  EXPECT_TRUE(r.ok()) << All(r);
}

TEST(MapHistoryTest, DownShardBackFromItsCopyOrAcceptedLossPasses) {
  History h(Base());
  v1::ClusterMap* m = &h.Next();  // n1 and n2 gone: shard 0 DOWN
  for (const char* id : {"n1", "n2"}) {
    v1::ClusterNode* last = h.Shard(0)->add_last_in_sync();
    last->set_node_id(id);
    last->set_incarnation(1);
    last->set_process_id(std::string("p") + id);
  }
  SetReplicas(h.Shard(0), {});
  SetReplicas(h.Shard(1), {"n3"});
  SetReplicas(h.Shard(2), {"n3"});
  for (int i : {0, 1, 2}) h.Bump(i);
  DropNode(m, "n1");
  DropNode(m, "n2");
  History accepted = h;
  m = &h.Next();  // n2 re-registered after a lease lapse, memory kept
  SetNode(m, "n2", 7, "pn2");
  SetReplicas(h.Shard(0), {"n2"});
  h.Shard(0)->clear_last_in_sync();
  h.Bump(0);
  MapHistoryResult r = h.Check();
  EXPECT_TRUE(r.ok()) << All(r);

  m = &accepted.Next();  // accept-loss: n3 leads shard 0, empty
  SetReplicas(accepted.Shard(0), {"n3"});
  accepted.Shard(0)->clear_last_in_sync();
  accepted.Bump(0);
  r = accepted.Check(2, {0});
  EXPECT_TRUE(r.ok()) << All(r);
  r = accepted.Check(2, {});
  EXPECT_THAT(All(r), HasSubstr("DOWN shard 0 came back with primary n3"));
}

TEST(MapHistoryTest, RemoveNodeBelowTheFloorPasses) {
  History h(Base());
  v1::ClusterMap& m = h.Next();
  SetReplicas(h.Shard(0), {"n1"});
  SetReplicas(h.Shard(1), {"n3"});
  h.Bump(0);
  h.Bump(1);
  v1::ClusterNode* d = m.add_draining();
  d->set_node_id("n2");
  d->set_incarnation(1);
  const MapHistoryResult r = h.Check();
  EXPECT_TRUE(r.ok()) << All(r);
}

struct Broken {
  const char* name;
  void (*edit)(History&);
  const char* expect;
};

const Broken kBroken[] = {
    {"epoch repeats", [](History& h) { h.Next().set_epoch(1); }, "epoch did not increase"},
    {"shard epoch goes back", [](History& h) { h.Next().mutable_shards(1)->set_shard_epoch(0); },
     "shard 1 shard_epoch went back"},
    {"in-sync change keeps the shard epoch",
     [](History& h) {
       h.Next();
       SetReplicas(h.Shard(0), {"n2", "n1"});
     },
     "shard 0 changed its in-sync list or slots without a new shard_epoch"},
    {"a syncing replica promoted",
     [](History& h) {
       h.Next();
       SetReplicas(h.Shard(0), {"n1", "n2"}, {"n3"});
       h.Bump(0);
       h.Next();
       SetReplicas(h.Shard(0), {"n3", "n2"});
       h.Bump(0);
     },
     "shard 0 primary n3 was not in sync"},
    {"a restarted process stays in sync",
     [](History& h) {
       SetNode(&h.Next(), "n2", 2, "pn2b");
       h.Bump(0);
     },
     "in-sync replica n2 is another process"},
    {"joined without syncing",
     [](History& h) {
       h.Next();
       SetReplicas(h.Shard(0), {"n1", "n2", "n3"});
       h.Bump(0);
     },
     "n3 joined the in-sync set without syncing first"},
    {"a slot in two shards", [](History& h) { SetSlots(h.Next().mutable_shards(1), 0, 10922); },
     "slots owned by two shards"},
    {"slots moved without a migration",
     [](History& h) {
       h.Next();
       SetSlots(h.Shard(0), 0, 5000);
       SetSlots(h.Shard(1), 5001, 10922);
       h.Bump(0);
       h.Bump(1);
     },
     "460 slots moved from shard 0 to shard 1 without the flip"},
    {"a DOWN shard refilled empty",
     [](History& h) {
       v1::ClusterMap& m = h.Next();
       SetReplicas(h.Shard(0), {});
       for (const char* id : {"n1", "n2"}) {
         v1::ClusterNode* last = h.Shard(0)->add_last_in_sync();
         last->set_node_id(id);
         last->set_incarnation(1);
         last->set_process_id(std::string("p") + id);
       }
       h.Bump(0);
       (void)m;
       h.Next();
       SetReplicas(h.Shard(0), {"n3"});
       h.Shard(0)->clear_last_in_sync();
       h.Bump(0);
     },
     "DOWN shard 0 came back with primary n3"},
    {"a DOWN shard forgets a holder",
     [](History& h) {
       h.Next();
       SetReplicas(h.Shard(0), {});
       v1::ClusterNode* last = h.Shard(0)->add_last_in_sync();
       last->set_node_id("n1");
       last->set_incarnation(1);
       last->set_process_id("pn1");
       h.Bump(0);
     },
     "DOWN shard 0 last_in_sync [n1] is not its last in-sync set [n1,n2]"},
    {"a live backup dropped below the floor",
     [](History& h) {
       h.Next();
       SetReplicas(h.Shard(0), {"n1"});
       h.Bump(0);
     },
     "shard 0 dropped live replica n2 to 1 in sync, below min_insync 2"},
    {"a new shard owning slots",
     [](History& h) {
       v1::ClusterMap& m = h.Next();
       SetSlots(h.Shard(2), 10923, 16000);
       h.Bump(2);
       v1::Shard* s = m.add_shards();
       s->set_shard_id(3);
       SetSlots(s, 16001, 16383);
       SetReplicas(s, {"n1"});
     },
     "new shard 3 owns slots from the start"},
    {"a migration handed back to its source",
     [](History& h) {
       v1::ClusterMap& m = h.Next();
       v1::Migration* mig = m.add_migrations();
       mig->set_id(0);
       mig->mutable_slots()->set_start(0);
       mig->mutable_slots()->set_end(10);
       mig->set_source_shard(0);
       mig->set_target_shard(1);
       mig->set_state(v1::MIGRATION_HANDOFF);
       m.set_next_migration_id(1);
       h.Next().clear_migrations();
     },
     "migration 0 appeared MIGRATION_HANDOFF"},
    {"a migration going back",
     [](History& h) {
       v1::ClusterMap& m = h.Next();
       v1::Migration* mig = m.add_migrations();
       mig->set_id(0);
       mig->mutable_slots()->set_start(0);
       mig->mutable_slots()->set_end(10);
       mig->set_source_shard(0);
       mig->set_target_shard(1);
       mig->set_state(v1::MIGRATION_PENDING);
       m.set_next_migration_id(1);
       h.Next().mutable_migrations(0)->set_state(v1::MIGRATION_HANDOFF);
       h.Next().mutable_migrations(0)->set_state(v1::MIGRATION_COPYING);
       h.Next().clear_migrations();
     },
     "migration 0 went back from MIGRATION_HANDOFF to MIGRATION_COPYING"},
    {"a draining node placed",
     [](History& h) {
       v1::ClusterMap& m = h.Next();
       v1::ClusterNode* d = m.add_draining();
       d->set_node_id("n3");
       d->set_incarnation(1);
       SetReplicas(h.Shard(0), {"n1", "n2"}, {"n3"});
       h.Bump(0);
     },
     "draining n3 was placed in shard 0"},
};

TEST(MapHistoryTest, EachBrokenInvariantIsReported) {
  for (const Broken& b : kBroken) {
    History h(Base());
    b.edit(h);
    const MapHistoryResult r = h.Check();
    EXPECT_FALSE(r.ok()) << b.name;
    EXPECT_THAT(All(r), HasSubstr(b.expect)) << b.name;
  }
}

TEST(MapHistoryTest, HandoffLeftWithoutFlipIsReported) {
  History h(Base());
  v1::ClusterMap* m = &h.Next();
  v1::Migration* mig = m->add_migrations();
  mig->set_id(0);
  mig->mutable_slots()->set_start(0);
  mig->mutable_slots()->set_end(10);
  mig->set_source_shard(0);
  mig->set_target_shard(1);
  mig->set_state(v1::MIGRATION_PENDING);
  m->set_next_migration_id(1);
  h.Next().mutable_migrations(0)->set_state(v1::MIGRATION_COPYING);
  h.Next().mutable_migrations(0)->set_state(v1::MIGRATION_HANDOFF);
  h.Next().clear_migrations();  // dropped: the slots stay with the source
  const MapHistoryResult r = h.Check();
  EXPECT_THAT(All(r), HasSubstr("migration 0 left HANDOFF without its slots reaching shard 1"));
  EXPECT_THAT(r.Text(5), HasSubstr("1 VIOLATIONS"));
}

}  // namespace
}  // namespace jepsen
}  // namespace kvstore
