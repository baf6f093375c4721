// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/test_bed.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace jepsen {

using testing::ClusterHarness;
using testing::ClusterOptions;
using testing::EtcdMemberOptions;
using testing::EtcdProcess;
using testing::NetnsNetwork;
using testing::ProcessResult;
using testing::RunProcess;
using testing::TempDir;
namespace {

constexpr int kClientPort = 2379;
constexpr int kPeerPort = 2380;

std::string MemberName(int m) { return absl::StrCat("e", m + 1); }

}  // namespace

absl::StatusOr<std::unique_ptr<TestBed>> TestBed::Start(TestBedOptions options) {
  if (absl::Status s = FirewallAvailable(); !s.ok()) return s;
  if (options.nodes < 1 || options.max_nodes < options.nodes || options.etcd_members < 1) {
    return absl::InvalidArgumentError("TestBed: need 1 <= nodes <= max_nodes and etcd members");
  }
  std::unique_ptr<TestBed> bed(new TestBed(std::move(options)));
  const int spaces = bed->options_.max_nodes + bed->options_.etcd_members;
  absl::StatusOr<std::unique_ptr<NetnsNetwork>> net = NetnsNetwork::Create(spaces);
  if (!net.ok()) return net.status();
  bed->network_ = *std::move(net);
  for (int i = 0; i < spaces; ++i) {
    bed->firewalls_.push_back(std::make_unique<Firewall>(bed->network_->netns(i)));
  }
  if (absl::Status s = bed->StartEtcd(); !s.ok()) return s;
  ClusterOptions c;
  c.etcd_endpoint = bed->EtcdEndpoints();
  c.nodes = bed->options_.nodes;
  c.replicas = bed->options_.replicas;
  c.member_ttl = bed->options_.member_ttl;
  c.fence_margin = bed->options_.fence_margin;
  c.replication_timeout = bed->options_.replication_timeout;
  c.extra_flags = bed->options_.extra_flags;
  c.network = bed->network_.get();
  if (bed->options_.fake_clocks) {
    if (absl::Status s = FakeClocks::Available(); !s.ok()) return s;
    bed->clocks_ = std::make_unique<FakeClocks>(absl::StrCat(TempDir(), "/faketime.", getpid()));
    FakeClocks* clocks = bed->clocks_.get();
    c.node_env = [clocks](int i) { return clocks->Env(i); };
    c.kvserver_binary = std::string(FakeClocks::kServerBinary);
  }
  absl::StatusOr<std::unique_ptr<ClusterHarness>> cluster = ClusterHarness::Start(std::move(c));
  if (!cluster.ok()) return cluster.status();
  bed->cluster_ = *std::move(cluster);
  return bed;
}

TestBed::~TestBed() {
  (void)HealAll();
  cluster_.reset();  // the kvservers first: they would log every etcd loss
  etcd_.clear();
}

absl::Status TestBed::StartEtcd() {
  std::vector<std::string> peers;
  for (int m = 0; m < options_.etcd_members; ++m) {
    peers.push_back(absl::StrCat(MemberName(m), "=http://", etcd_ip(m), ":", kPeerPort));
  }
  for (int m = 0; m < options_.etcd_members; ++m) {
    EtcdMemberOptions o;
    o.name = MemberName(m);
    o.netns = network_->netns(options_.max_nodes + m);
    o.ip = etcd_ip(m);
    o.client_port = kClientPort;
    o.peer_port = kPeerPort;
    o.initial_cluster = absl::StrJoin(peers, ",");
    // etcd's defaults (100 ms heartbeat, 1 s election) on a loaded 2-core
    // machine elect leaders for nothing; the suite wants its own faults.
    o.extra_flags = {"--heartbeat-interval=200", "--election-timeout=2000",
                     "--initial-cluster-state=new", "--initial-cluster-token=kvjepsen"};
    etcd_.push_back(std::make_unique<EtcdProcess>(std::move(o)));
    if (absl::Status s = etcd_.back()->StartAsync(); !s.ok()) return s;
  }
  for (auto& e : etcd_) {
    if (absl::Status s = e->WaitHealthy(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string TestBed::EtcdEndpoints() const {
  std::vector<std::string> eps;
  for (int m = 0; m < options_.etcd_members; ++m) {
    eps.push_back(absl::StrCat(etcd_ip(m), ":", kClientPort));
  }
  return absl::StrJoin(eps, ",");
}

absl::StatusOr<int> TestBed::EtcdLeader() {
  // `etcdctl endpoint status` prints, per endpoint, "ep, id, version, db
  // size, is leader, is learner, raft term, ...".
  for (int m = 0; m < etcd_members(); ++m) {
    if (!etcd_[m]->Running()) continue;
    ProcessResult r = RunProcess({"/usr/bin/etcdctl", "--endpoints=" + etcd_[m]->endpoint(),
                                  "--command-timeout=2s", "endpoint", "status"},
                                 "", 5);
    if (r.exit_code != 0) continue;
    std::vector<std::string> f = absl::StrSplit(absl::StripTrailingAsciiWhitespace(r.out), ", ");
    if (f.size() > 4 && f[4] == "true") return m;
  }
  return absl::UnavailableError("no etcd member says it is the leader");
}

void TestBed::Park(int i, bool parked) {
  if (parked) {
    parked_.insert(i);
  } else {
    parked_.erase(i);
  }
}

absl::Status TestBed::RestartEtcd(int m) { return etcd_[m]->Start(); }

absl::Status TestBed::HealAll() {
  absl::Status first;
  for (auto& f : firewalls_) {
    absl::Status s = f->Clear();
    if (first.ok()) first = s;
  }
  return first;
}

}  // namespace jepsen
}  // namespace kvstore
