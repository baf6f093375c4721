// Copyright 2026 The kvstore Authors.
//
// ClusterHarness: N real kvserver processes in cluster mode (architecture
// §19.6) against an etcd the test started (tests/cluster/etcd_process.h),
// on loopback, with the fault controls cluster tests need: kill -9, SIGSTOP
// and SIGCONT, restart under the same --node_id, and "where is the primary
// of this key" from the cluster map a node hands out (gRPC
// kvstore.v1.KvCluster/GetClusterMap).
//
//   auto etcd = EtcdProcess::Start();
//   ClusterOptions o;
//   o.etcd_endpoint = etcd->endpoint();
//   auto cluster = ClusterHarness::Start(o);        // n1..nN, ready files
//   (*cluster)->WaitHealthy(absl::Seconds(30));      // map: every shard full
//   int p = *(*cluster)->PrimaryIndexOf("key");
//   (*cluster)->KillNode(p);
//
// Nodes are numbered 0..N-1 and named "n1".."nN" (node_id). A restarted
// node keeps its ports when it can get them again, so the seed list a
// client was given stays valid.
//
// Thread safety: not thread-safe; drive it from the test's main thread.
// Client threads only use the addresses it handed out.

#ifndef KVSTORE_TESTS_CLUSTER_CLUSTER_HARNESS_H_
#define KVSTORE_TESTS_CLUSTER_CLUSTER_HARNESS_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "proto/kv_cluster.pb.h"
#include "tests/cluster/netns.h"
#include "tests/cluster/node_process.h"

namespace kvstore {
namespace testing {

struct ClusterOptions {
  std::string etcd_endpoint;  // "host:port", required
  int nodes = 3;
  int replicas = 2;
  // Defaults to a name unique to this process, so tests sharing an etcd do
  // not see each other's members.
  std::string cluster_name;
  std::string member_ttl = "2s";
  std::string fence_margin = "500ms";
  std::string replication_timeout = "1s";
  // Appended to every node's flags: small pools, the TCP data path.
  std::vector<std::string> extra_flags = {"--pool_size=64M", "--transport=tcp",
                                          "--grace_period=100ms"};
  // Set: node i runs in network->netns(i) and listens on node_ip(i), so
  // Partition() can cut it off (etcd_endpoint must then be reachable from
  // the namespaces, e.g. a TcpProxy on host_ip()). Not owned; outlives the
  // harness.
  NetnsNetwork* network = nullptr;
  // Set: the environment ("NAME=value") of node `index`'s process, at every
  // start (e.g. a libfaketime clock of its own).
  std::function<std::vector<std::string>(int index)> node_env;
  // The nodes' binary (NodeLaunch::binary): kvserver, or its build with
  // the system allocator where libfaketime is preloaded (tests/jepsen
  // fake_clock.h says why).
  std::string kvserver_binary = "server/kvserver";
  // How the harness itself calls the nodes' control ports (GetClusterMap):
  // null for plaintext; TLS credentials when extra_flags turn TLS on.
  std::shared_ptr<grpc::ChannelCredentials> control_credentials;
  // Sent as the bearer token on the harness's own calls; empty: none.
  std::string auth_token;
};

class ClusterHarness {
 public:
  // Starts every node and waits for their ready files (not for the map:
  // see WaitHealthy). kInvalidArgument without an etcd endpoint.
  static absl::StatusOr<std::unique_ptr<ClusterHarness>> Start(ClusterOptions options);
  ~ClusterHarness();

  int size() const { return static_cast<int>(nodes_.size()); }
  // The --cluster_secret_file every node gets (cluster mode needs one).
  const std::string& cluster_secret_file() const { return secret_file_; }
  const ClusterOptions& options() const { return options_; }
  static std::string NodeId(int index);  // "n1" for 0
  // -1 for a name that is not one of ours.
  int IndexOf(const std::string& node_id) const;

  // The node, or nullptr while it is down (killed and not restarted).
  NodeProcess* node(int index) { return nodes_[index].get(); }
  bool Running(int index);
  // Every running node's control address (seeds for a client).
  std::vector<std::string> ControlAddresses();

  // The cluster map as node `index` serves it (1 s deadline).
  absl::StatusOr<v1::ClusterMap> MapFrom(int index);
  // The map with the highest epoch among the running nodes that answer.
  absl::StatusOr<v1::ClusterMap> GetMap();

  // Waits until every running node serves the same map epoch, every shard
  // has min(R, running nodes) in-sync replicas that are all running nodes
  // (not the earlier life of one restarted since: see RestartNode), and
  // nothing is syncing. kDeadlineExceeded describes the last map seen.
  absl::Status WaitHealthy(absl::Duration timeout);
  // Waits until some running node serves a map in which the shard of `key`
  // has a primary other than `old_primary` (a node id). Returns it.
  absl::StatusOr<std::string> WaitNewPrimary(const std::string& key, const std::string& old_primary,
                                             absl::Duration timeout);

  // Waits until no shard of the map (highest epoch) names node `index` as
  // an in-sync replica or a syncing one: the cluster has noticed it is gone.
  absl::Status WaitNodeOutOfMap(int index, absl::Duration timeout);

  // The index of the node the map names as the primary of `key`'s shard.
  absl::StatusOr<int> PrimaryIndexOf(const std::string& key);
  // Indexes of the in-sync backups of `key`'s shard.
  absl::StatusOr<std::vector<int>> BackupIndexesOf(const std::string& key);

  // Starts one more node (index size(), node_id "n<size()+1>") against the
  // same etcd and cluster name, and waits for its ready file. It registers
  // as a member and serves nothing until the controller gives it a role
  // (refill, or `kvctl cluster add-node`). Returns its index.
  absl::StatusOr<int> AddNode();

  // Waits until the map (highest epoch) has no migration left and is
  // healthy (WaitHealthy). kDeadlineExceeded names what is left.
  absl::Status WaitMigrationsDone(absl::Duration timeout);

  void KillNode(int index);    // SIGKILL; node(index) becomes nullptr
  void PauseNode(int index);   // SIGSTOP
  void ResumeNode(int index);  // SIGCONT
  // Cuts node `index` off the network / brings it back (needs
  // ClusterOptions::network; kFailedPrecondition otherwise).
  absl::Status Partition(int index);
  absl::Status Heal(int index);
  // SIGTERM and wait; node(index) becomes nullptr. Returns its exit status.
  int StopNode(int index);
  // Waits for node `index` to exit on its own; its status, or nullopt on
  // timeout. Reaped: node(index) becomes nullptr.
  std::optional<int> WaitNodeExit(int index, absl::Duration timeout);
  // Waits until the running node `index` has registered again after its
  // lease expired (its log says so; it keeps running and its memory);
  // kDeadlineExceeded after `timeout`, kFailedPrecondition if it exited.
  absl::Status WaitReregistered(int index, absl::Duration timeout);
  // Starts node `index` again (same node_id, the same ports if free).
  // By default it first waits (30 s at most) until the map no longer names
  // the node: a map still listing the old incarnation as in sync would make
  // WaitHealthy() pass for a node that came back empty. Pass false to
  // restart at once (a new incarnation racing the old one's lease); the
  // incarnation the map names then is remembered as an earlier life, which
  // WaitHealthy does not count as a running replica.
  // REQUIRES: it is not running.
  absl::Status RestartNode(int index, bool wait_out_of_map = true);

  // Flags appended to node `index`'s from its next start on (after
  // extra_flags: a later flag wins, e.g. a smaller --pool_size). Replaces
  // what an earlier call set; {} for none.
  void SetNodeFlags(int index, std::vector<std::string> flags);

  // Why `map` is not healthy for the nodes `running` with R = `replicas`,
  // or "" when it is: every shard has min(R, running) in-sync replicas, all
  // of them running, and nothing syncing. A replica whose record in the map
  // has the incarnation `earlier_lives` gives for its node id is a process
  // that was restarted since (empty): not running. Pure; WaitHealthy's test.
  static std::string MapProblem(const v1::ClusterMap& map, const std::set<std::string>& running,
                                int replicas,
                                const std::map<std::string, uint64_t>& earlier_lives = {});

  // The logs of every node, for a failed test's output.
  std::string Logs(size_t tail_bytes = 4000);

 private:
  explicit ClusterHarness(ClusterOptions options) : options_(std::move(options)) {}
  // Writes the cluster secret every node is started with (a file of this
  // process's, mode 0600, in TEST_TMPDIR or /tmp).
  absl::Status WriteClusterSecret();
  std::vector<std::string> FlagsFor(int index) const;
  std::string Host(int index) const;  // the address node `index` listens on
  absl::Status StartNode(int index, int control_port, int resp_port);
  std::set<std::string> RunningIds();

  ClusterOptions options_;
  std::string secret_file_;
  std::vector<std::unique_ptr<NodeProcess>> nodes_;
  std::vector<int> control_ports_, resp_ports_;       // last known, for restarts
  std::vector<std::string> old_logs_;                 // logs of earlier lives
  std::vector<std::vector<std::string>> node_flags_;  // SetNodeFlags
  // Node id -> the incarnation the map named when it was restarted at once.
  std::map<std::string, uint64_t> earlier_lives_;
};

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_CLUSTER_CLUSTER_HARNESS_H_
