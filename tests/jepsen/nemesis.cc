// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/nemesis.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "proto/kv_cluster.grpc.pb.h"

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
};

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
  if (hold > absl::ZeroDuration()) absl::StrAppend(&s, " for ", absl::FormatDuration(hold));
  return s;
}

Nemesis::Nemesis(TestBed* bed, std::vector<FaultKind> kinds, uint64_t seed, absl::Duration ttl)
    : bed_(bed), kinds_(std::move(kinds)), ttl_(ttl), rng_(seed) {}

int Nemesis::RandomNode() {
  return std::uniform_int_distribution<int>(0, bed_->cluster().size() - 1)(rng_);
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
      return Failover(f.shard);
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
    default:
      return bed_->HealAll();
  }
}

absl::Status Nemesis::Failover(int shard) {
  absl::Status last = absl::UnavailableError("no node running");
  ClusterHarness& c = bed_->cluster();
  for (int i = 0; i < c.size(); ++i) {
    if (!c.Running(i)) continue;
    auto stub = v1::KvCluster::NewStub(
        grpc::CreateChannel(c.node(i)->control_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::FailoverRequest req;
    req.set_shard_id(static_cast<uint32_t>(shard));
    v1::FailoverResponse resp;
    grpc::Status s = stub->Failover(&ctx, req, &resp);
    if (s.ok()) return absl::OkStatus();
    last = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("failover via n", i + 1, ": ", s.error_message()));
  }
  return last;
}

}  // namespace jepsen
}  // namespace kvstore
