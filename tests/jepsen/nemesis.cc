// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/nemesis.h"

#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace kvstore {
namespace jepsen {

using testing::ClusterHarness;
namespace {

struct KindName {
  FaultKind kind;
  const char* name;
};
constexpr KindName kNames[] = {
    {FaultKind::kKill, "kill"},
    {FaultKind::kPause, "pause"},
    {FaultKind::kCutEtcd, "cut-etcd"},
    {FaultKind::kCutPeer, "cut-peer"},
    {FaultKind::kCutClients, "cut-clients"},
    {FaultKind::kOneWay, "one-way"},
    {FaultKind::kCutAll, "cut-all"},
    {FaultKind::kEtcdKill, "etcd-kill"},
    {FaultKind::kEtcdPause, "etcd-pause"},
    {FaultKind::kEtcdIsolate, "etcd-isolate"},
    {FaultKind::kFailover, "failover"},
    {FaultKind::kClockStep, "clock-step"},
    {FaultKind::kFullPool, "full-pool"},
    {FaultKind::kAddRemove, "add-remove"},
};

// The pool a full-pool node restarts with: room for its share of the
// workload's keys (it must copy its shards back and be in sync first), far
// less than the others' 64M, so the filler runs it full alone.
constexpr char kSmallPool[] = "--pool_size=16M";
constexpr uint64_t kFillBytes = 24ull << 20;

}  // namespace

std::string FaultName(FaultKind kind) {
  for (const KindName& k : kNames) {
    if (k.kind == kind) return k.name;
  }
  return "?";
}

absl::Status ParseFaults(const std::string& list, std::vector<FaultKind>* out) {
  out->clear();
  for (absl::string_view word : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    if (word == "all") {
      for (const KindName& k : kNames) out->push_back(k.kind);
      continue;
    }
    bool found = false;
    for (const KindName& k : kNames) {
      if (word == k.name) {
        out->push_back(k.kind);
        found = true;
      }
    }
    if (!found) return absl::InvalidArgumentError(absl::StrCat("unknown fault '", word, "'"));
  }
  if (out->empty()) return absl::InvalidArgumentError("no fault named");
  return absl::OkStatus();
}

std::string Fault::Describe() const {
  std::string s = FaultName(kind);
  if (node >= 0) absl::StrAppend(&s, " n", node + 1);
  if (other >= 0) {
    absl::StrAppend(&s, kind == FaultKind::kCutPeer ? " <-> n" : " e", other + 1);
  }
  if (shard >= 0) absl::StrAppend(&s, " shard ", shard);
  if (step != absl::ZeroDuration()) {
    absl::StrAppend(&s, " step ", step > absl::ZeroDuration() ? "+" : "",
                    absl::FormatDuration(step));
  }
  if (hold > absl::ZeroDuration()) absl::StrAppend(&s, " for ", absl::FormatDuration(hold));
  return s;
}

Nemesis::Nemesis(TestBed* bed, std::vector<FaultKind> kinds, uint64_t seed, absl::Duration ttl)
    : bed_(bed), kinds_(std::move(kinds)), ttl_(ttl), rng_(seed), admin_(&bed->cluster()) {}

std::string Nemesis::TakeNote() { return std::exchange(note_, ""); }

int Nemesis::RandomNode() {
  // Nodes in service: not the parked spare (a draw may still hit a node
  // that has just exited; its injection then fails and is counted).
  std::vector<int> in;
  for (int i = 0; i < bed_->cluster().size(); ++i) {
    if (!bed_->parked(i)) in.push_back(i);
  }
  if (in.empty()) return 0;
  return in[std::uniform_int_distribution<size_t>(0, in.size() - 1)(rng_)];
}

int Nemesis::PrimaryOrRandom() {
  absl::StatusOr<v1::ClusterMap> map = bed_->cluster().GetMap();
  const int fallback = RandomNode();
  if (!map.ok() || map->shards_size() == 0) return fallback;
  const v1::Shard& s =
      map->shards(std::uniform_int_distribution<int>(0, map->shards_size() - 1)(rng_));
  if (s.replicas_size() == 0) return fallback;
  const int i = bed_->cluster().IndexOf(s.replicas(0));
  return i >= 0 ? i : fallback;
}

int Nemesis::BackupOrRandom() {
  absl::StatusOr<v1::ClusterMap> map = bed_->cluster().GetMap();
  const int fallback = RandomNode();
  if (!map.ok() || map->shards_size() == 0) return fallback;
  const v1::Shard& s =
      map->shards(std::uniform_int_distribution<int>(0, map->shards_size() - 1)(rng_));
  if (s.replicas_size() < 2) return fallback;
  const int b = std::uniform_int_distribution<int>(1, s.replicas_size() - 1)(rng_);
  const int i = bed_->cluster().IndexOf(s.replicas(b));
  return i >= 0 ? i : fallback;
}

Fault Nemesis::Next() {
  Fault f;
  f.kind = kinds_[std::uniform_int_distribution<size_t>(0, kinds_.size() - 1)(rng_)];
  // Holds between a fraction of the TTL and a few TTLs: shorter than the
  // lease (nothing should change hands) and longer (a failover must).
  const double ttls[] = {0.3, 0.9, 1.5, 3, 5};
  f.hold = ttl_ * ttls[std::uniform_int_distribution<int>(0, 4)(rng_)];
  switch (f.kind) {
    case FaultKind::kKill:
    case FaultKind::kPause:
    case FaultKind::kCutEtcd:
    case FaultKind::kCutClients:
    case FaultKind::kOneWay:
    case FaultKind::kCutAll:
      f.node = PrimaryOrRandom();
      break;
    case FaultKind::kCutPeer:
      f.node = PrimaryOrRandom();
      do {
        f.other = RandomNode();
      } while (f.other == f.node && bed_->cluster().size() > 1);
      break;
    case FaultKind::kEtcdKill:
    case FaultKind::kEtcdPause:
    case FaultKind::kEtcdIsolate:
      f.other = std::uniform_int_distribution<int>(0, bed_->etcd_members() - 1)(rng_);
      break;
    case FaultKind::kFailover: {
      absl::StatusOr<v1::ClusterMap> map = bed_->cluster().GetMap();
      const int shards = map.ok() ? map->shards_size() : 1;
      f.shard = std::uniform_int_distribution<int>(0, std::max(shards, 1) - 1)(rng_);
      f.hold = absl::ZeroDuration();
      break;
    }
    case FaultKind::kClockStep: {
      f.node = PrimaryOrRandom();
      const double ttls[] = {2, -2, 5, -5};
      f.step = absl::Seconds(std::ceil(
          absl::ToDoubleSeconds(ttl_ * ttls[std::uniform_int_distribution<int>(0, 3)(rng_)])));
      break;
    }
    case FaultKind::kFullPool:
      f.node = BackupOrRandom();
      // Time for the filler to run the pool full (a second or two) and for
      // the shard to meet it for a few seconds; longer only piles up
      // unknown writes, which the linearizability search pays for.
      f.hold = ttl_ * 2;
      break;
    case FaultKind::kAddRemove:
      f.node = bed_->options().max_nodes - 1;  // the spare
      break;
  }
  return f;
}

absl::Status Nemesis::CutPair(Firewall& a, const std::string& a_ip, Firewall& b,
                              const std::string& b_ip) {
  if (absl::Status s = a.Drop(b_ip, Direction::kIn); !s.ok()) return s;
  return b.Drop(a_ip, Direction::kIn);
}

absl::Status Nemesis::Inject(Fault& f) {
  ClusterHarness& c = bed_->cluster();
  switch (f.kind) {
    case FaultKind::kKill:
      if (!c.Running(f.node)) return absl::FailedPreconditionError("not running");
      c.KillNode(f.node);
      return absl::OkStatus();
    case FaultKind::kPause:
      if (!c.Running(f.node)) return absl::FailedPreconditionError("not running");
      c.PauseNode(f.node);
      return absl::OkStatus();
    case FaultKind::kCutAll:
      for (int i = 0; i < c.size(); ++i) {
        if (i == f.node) continue;
        if (absl::Status s = CutPair(bed_->node_firewall(f.node), bed_->node_ip(f.node),
                                     bed_->node_firewall(i), bed_->node_ip(i));
            !s.ok()) {
          return s;
        }
      }
      if (absl::Status s = bed_->node_firewall(f.node).Drop(bed_->client_ip(), Direction::kBoth);
          !s.ok()) {
        return s;
      }
      [[fallthrough]];
    case FaultKind::kCutEtcd:
      for (int m = 0; m < bed_->etcd_members(); ++m) {
        if (absl::Status s = CutPair(bed_->node_firewall(f.node), bed_->node_ip(f.node),
                                     bed_->etcd_firewall(m), bed_->etcd_ip(m));
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    case FaultKind::kCutPeer:
      return CutPair(bed_->node_firewall(f.node), bed_->node_ip(f.node),
                     bed_->node_firewall(f.other), bed_->node_ip(f.other));
    case FaultKind::kCutClients:
      return bed_->node_firewall(f.node).Drop(bed_->client_ip(), Direction::kBoth);
    case FaultKind::kOneWay:
      for (int i = 0; i < c.size(); ++i) {
        if (i == f.node) continue;
        if (absl::Status s = bed_->node_firewall(i).Drop(bed_->node_ip(f.node), Direction::kIn);
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    case FaultKind::kEtcdKill:
    case FaultKind::kEtcdPause: {
      absl::StatusOr<int> leader = bed_->EtcdLeader();
      if (leader.ok()) f.other = *leader;
      if (f.kind == FaultKind::kEtcdKill) {
        bed_->etcd(f.other).Kill();
      } else {
        bed_->etcd(f.other).Pause();
      }
      return absl::OkStatus();
    }
    case FaultKind::kEtcdIsolate:
      for (int m = 0; m < bed_->etcd_members(); ++m) {
        if (m == f.other) continue;
        if (absl::Status s = CutPair(bed_->etcd_firewall(f.other), bed_->etcd_ip(f.other),
                                     bed_->etcd_firewall(m), bed_->etcd_ip(m));
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    case FaultKind::kFailover:
      return admin_.Failover(static_cast<uint32_t>(f.shard));
    case FaultKind::kClockStep:
      if (bed_->clocks() == nullptr) return absl::FailedPreconditionError("no fake clocks");
      return bed_->clocks()->Step(f.node, f.step);
    case FaultKind::kFullPool:
      return InjectFullPool(f);
    case FaultKind::kAddRemove:
      return InjectAddRemove(f);
  }
  return absl::OkStatus();
}

absl::Status Nemesis::Heal(const Fault& f) {
  ClusterHarness& c = bed_->cluster();
  switch (f.kind) {
    case FaultKind::kKill:
      // A restart inside the TTL races the old incarnation's lease.
      return c.RestartNode(f.node, /*wait_out_of_map=*/false);
    case FaultKind::kPause:
      c.ResumeNode(f.node);
      return absl::OkStatus();
    case FaultKind::kEtcdKill:
      return bed_->RestartEtcd(f.other);
    case FaultKind::kEtcdPause:
      bed_->etcd(f.other).Resume();
      return absl::OkStatus();
    case FaultKind::kFailover:
      return absl::OkStatus();
    case FaultKind::kClockStep:
      return bed_->clocks()->Step(f.node, absl::ZeroDuration());
    case FaultKind::kFullPool:
      return HealFullPool(f);
    case FaultKind::kAddRemove:
      return HealAddRemove(f);
    default:
      return bed_->HealAll();
  }
}

absl::Status Nemesis::RestartWith(int node, std::vector<std::string> flags) {
  ClusterHarness& c = bed_->cluster();
  c.KillNode(node);
  c.SetNodeFlags(node, std::move(flags));
  return c.RestartNode(node, /*wait_out_of_map=*/true);
}

absl::Status Nemesis::InjectFullPool(const Fault& f) {
  ClusterHarness& c = bed_->cluster();
  if (!c.Running(f.node)) return absl::FailedPreconditionError("not running");
  absl::Status s = RestartWith(f.node, {kSmallPool});
  // Back in sync with the small pool before the filler starts: the fault
  // is a full backup, not a copy that does not fit.
  if (s.ok()) s = c.WaitHealthy(absl::Seconds(30));
  absl::StatusOr<v1::ClusterMap> map = c.GetMap();
  if (s.ok()) s = map.status();
  if (s.ok()) {
    filler_ = std::make_unique<PoolFiller>(c.ControlAddresses(), *map,
                                           ClusterHarness::NodeId(f.node), kFillBytes);
    s = filler_->Start();
  }
  if (!s.ok()) {
    filler_.reset();
    (void)RestartWith(f.node, {});  // not injected: the usual pool again
  }
  return s;
}

absl::Status Nemesis::HealFullPool(const Fault& f) {
  if (filler_ != nullptr) {
    filler_->Stop();
    note_ = absl::StrCat("filler of n", f.node + 1, ": ", filler_->Summary());
    filler_.reset();
  }
  return RestartWith(f.node, {});
}

absl::Status Nemesis::InjectAddRemove(const Fault& f) {
  ClusterHarness& c = bed_->cluster();
  const int spare = f.node;
  if (spare < bed_->options().nodes) return absl::FailedPreconditionError("no spare namespace");
  if (spare >= c.size()) {
    absl::StatusOr<int> added = c.AddNode();
    if (!added.ok()) return added.status();
    if (*added != spare) return absl::InternalError("the spare got another index");
  } else if (!c.Running(spare)) {
    if (absl::Status s = c.RestartNode(spare, /*wait_out_of_map=*/false); !s.ok()) return s;
  }
  bed_->Park(spare, false);
  const std::string id = ClusterHarness::NodeId(spare);
  // Its member key appears within a moment of its start.
  absl::StatusOr<uint32_t> shard = absl::NotFoundError("not tried");
  for (absl::Time end = absl::Now() + absl::Seconds(10); absl::Now() < end;) {
    shard = admin_.AddNode(id);
    if (!absl::IsNotFound(shard.status())) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  // The controller may place the returning node first (a refill, or a
  // balance move): add-node then refuses, and the node is back as a
  // replica — remove-node and add-back, still an admin round trip.
  const bool placed = absl::IsFailedPrecondition(shard.status()) &&
                      absl::StrContains(shard.status().message(), "already serves");
  if (!shard.ok() && !placed) {
    (void)HealAddRemove(f);  // not injected: out again
    return shard.status();
  }
  absl::StatusOr<int> planned = admin_.Rebalance();
  note_ = absl::StrCat(
      id, shard.ok() ? absl::StrCat(" leads new shard ", *shard) : " was placed by the controller",
      "; rebalance: ",
      planned.ok() ? absl::StrCat(*planned, " migrations planned") : planned.status().ToString());
  return absl::OkStatus();
}

absl::Status Nemesis::HealAddRemove(const Fault& f) {
  ClusterHarness& c = bed_->cluster();
  const std::string id = ClusterHarness::NodeId(f.node);
  // Refused while the drain would leave a shard without an in-sync replica
  // (its backups still copying): ask again until it is accepted.
  absl::Status removed = absl::UnavailableError("not tried");
  for (absl::Time end = absl::Now() + absl::Seconds(30); absl::Now() < end;) {
    removed = admin_.RemoveNode(id);
    if (removed.ok()) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  note_ = absl::StrCat("remove-node ", id, ": ", removed.ok() ? "ok" : removed.ToString());
  if (!removed.ok()) return removed;
  if (absl::Status s = c.WaitNodeOutOfMap(f.node, absl::Seconds(30)); !s.ok()) return s;
  c.StopNode(f.node);
  bed_->Park(f.node, true);
  return absl::OkStatus();
}

}  // namespace jepsen
}  // namespace kvstore
