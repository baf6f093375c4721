// Copyright 2026 The kvstore Authors.
//
// TestBed: the system under test of the fault suite. A multi-member etcd
// and N kvservers, every process in a network namespace of its own on one
// bridge (tests/cluster/netns.h), each namespace with a Firewall, so the
// nemesis can cut any pair of processes, one way or both, and the clients
// (this process, on the bridge address) separately:
//
//   bridge host_ip (clients, nemesis)
//     ├─ netns of node i   (kvserver n<i+1>)     i = 0 .. max_nodes-1
//     └─ netns of member m (etcd e<m+1>)        after the nodes
//
// Every kvserver is given every etcd endpoint, so the multi-endpoint paths
// (keepalive and watch moving between members) run. Nodes beyond `nodes`
// (up to `max_nodes`) have namespaces ready for ClusterHarness::AddNode.
//
// Errors: kFailedPrecondition when the machine cannot make namespaces or
// rules (not root, no nftables, a sandbox): callers skip; kInternal with the
// logs when etcd or a kvserver does not start.
//
// Thread safety: not thread-safe; the runner's main thread and the nemesis
// (one at a time) drive it.

#ifndef KVSTORE_TESTS_JEPSEN_TEST_BED_H_
#define KVSTORE_TESTS_JEPSEN_TEST_BED_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"
#include "tests/cluster/netns.h"
#include "tests/jepsen/fake_clock.h"
#include "tests/jepsen/firewall.h"

namespace kvstore {
namespace jepsen {

struct TestBedOptions {
  int nodes = 3;
  int max_nodes = 5;  // namespaces made for nodes (add-node uses the rest)
  int replicas = 2;
  int etcd_members = 3;
  std::string member_ttl = "3s";
  std::string fence_margin = "500ms";
  std::string replication_timeout = "1s";
  // Appended to every kvserver's flags.
  std::vector<std::string> extra_flags = {"--pool_size=64M", "--transport=tcp",
                                          "--grace_period=100ms"};
  // Every kvserver runs on a wall clock of its own (fake_clock.h) that
  // clocks() steps. kFailedPrecondition at Start without libfaketime.
  bool fake_clocks = false;
};

class TestBed {
 public:
  static absl::StatusOr<std::unique_ptr<TestBed>> Start(TestBedOptions options);
  ~TestBed();

  testing::ClusterHarness& cluster() { return *cluster_; }
  const TestBedOptions& options() const { return options_; }
  int etcd_members() const { return static_cast<int>(etcd_.size()); }
  testing::EtcdProcess& etcd(int m) { return *etcd_[m]; }
  // "ip:2379,..." as the kvservers are given it.
  std::string EtcdEndpoints() const;

  std::string client_ip() const { return network_->host_ip(); }
  std::string node_ip(int i) const { return network_->node_ip(i); }
  std::string etcd_ip(int m) const { return network_->node_ip(options_.max_nodes + m); }
  Firewall& node_firewall(int i) { return *firewalls_[i]; }
  Firewall& etcd_firewall(int m) { return *firewalls_[options_.max_nodes + m]; }

  // The index of the member etcd names leader (asked of every running,
  // unpaused member with etcdctl), or kUnavailable when none answers.
  absl::StatusOr<int> EtcdLeader();
  // Restarts member `m` (same data, ports and cluster) after Kill/Stop.
  absl::Status RestartEtcd(int m);

  // Removes every partition rule.
  absl::Status HealAll();

  // The nodes' wall clocks; nullptr unless options().fake_clocks.
  FakeClocks* clocks() { return clocks_.get(); }

  // A parked node was taken out on purpose (remove-node, then stopped): the
  // supervisor does not restart it.
  void Park(int i, bool parked);
  bool parked(int i) const { return parked_.count(i) > 0; }

 private:
  explicit TestBed(TestBedOptions options) : options_(std::move(options)) {}
  absl::Status StartEtcd();

  TestBedOptions options_;
  std::unique_ptr<testing::NetnsNetwork> network_;
  std::vector<std::unique_ptr<Firewall>> firewalls_;
  std::vector<std::unique_ptr<testing::EtcdProcess>> etcd_;
  std::unique_ptr<FakeClocks> clocks_;
  std::set<int> parked_;
  std::unique_ptr<testing::ClusterHarness> cluster_;
};

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_TEST_BED_H_
