// Copyright 2026 The kvstore Authors.

#include "tests/cluster/cluster_harness.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/cluster/cluster_map.h"
#include "grpcpp/grpcpp.h"
#include "proto/kv_cluster.grpc.pb.h"

namespace kvstore {
namespace testing {

absl::StatusOr<std::unique_ptr<ClusterHarness>> ClusterHarness::Start(ClusterOptions options) {
  if (options.etcd_endpoint.empty()) return absl::InvalidArgumentError("no etcd endpoint");
  if (options.nodes < 1) return absl::InvalidArgumentError("nodes < 1");
  if (options.cluster_name.empty()) {
    static int counter = 0;
    options.cluster_name = absl::StrCat("t", getpid(), "x", counter++);
  }
  std::unique_ptr<ClusterHarness> h(new ClusterHarness(std::move(options)));
  if (absl::Status s = h->WriteClusterSecret(); !s.ok()) return s;
  const int n = h->options_.nodes;
  h->nodes_.resize(n);
  h->control_ports_.assign(n, 0);
  h->resp_ports_.assign(n, 0);
  h->old_logs_.resize(n);
  h->node_flags_.resize(n);
  for (int i = 0; i < n; ++i) {
    absl::Status s = h->StartNode(i, 0, 0);
    if (!s.ok()) return s;
  }
  return h;
}

ClusterHarness::~ClusterHarness() {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[i] != nullptr) nodes_[i]->Stop(absl::Seconds(5));
  }
  if (!secret_file_.empty()) unlink(secret_file_.c_str());
}

absl::Status ClusterHarness::WriteClusterSecret() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  secret_file_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/cluster-secret.", getpid(), ".",
                              options_.cluster_name);
  // A test secret: unique per harness, never used outside the test.
  const std::string secret = absl::StrCat("test-secret-", options_.cluster_name, "-", getpid());
  const int fd = open(secret_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", secret_file_));
  const bool ok = write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot write ", secret_file_));
  return absl::OkStatus();
}

std::string ClusterHarness::NodeId(int index) { return absl::StrCat("n", index + 1); }

int ClusterHarness::IndexOf(const std::string& node_id) const {
  for (int i = 0; i < size(); ++i) {
    if (NodeId(i) == node_id) return i;
  }
  return -1;
}

std::string ClusterHarness::Host(int index) const {
  return options_.network != nullptr ? options_.network->node_ip(index) : "127.0.0.1";
}

absl::Status ClusterHarness::Partition(int index) {
  if (options_.network == nullptr) return absl::FailedPreconditionError("no network namespaces");
  return options_.network->Cut(index);
}

absl::Status ClusterHarness::Heal(int index) {
  if (options_.network == nullptr) return absl::FailedPreconditionError("no network namespaces");
  return options_.network->Heal(index);
}

std::vector<std::string> ClusterHarness::FlagsFor(int index) const {
  std::vector<std::string> flags = {
      "--etcd=" + options_.etcd_endpoint,
      "--node_id=" + NodeId(index),
      "--cluster_name=" + options_.cluster_name,
      "--advertise_host=" + Host(index),
      "--listen=" + Host(index),
      absl::StrCat("--replicas=", options_.replicas),
      absl::StrCat("--cluster_min_nodes=", options_.nodes),
      "--member_ttl=" + options_.member_ttl,
      "--fence_margin=" + options_.fence_margin,
      "--replication_timeout=" + options_.replication_timeout,
      "--cluster_secret_file=" + secret_file_,
  };
  // A bridge address is not loopback: without a token the server refuses
  // to start unless told that the (private, test-only) network is fine.
  if (options_.network != nullptr) flags.push_back("--insecure");
  flags.insert(flags.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  flags.insert(flags.end(), node_flags_[index].begin(), node_flags_[index].end());
  return flags;
}

void ClusterHarness::SetNodeFlags(int index, std::vector<std::string> flags) {
  node_flags_[index] = std::move(flags);
}

absl::Status ClusterHarness::StartNode(int index, int control_port, int resp_port) {
  NodeLaunch launch;
  launch.flags = FlagsFor(index);
  launch.control_port = control_port;
  launch.resp_port = resp_port;
  launch.log_tag = NodeId(index);
  if (options_.node_env) launch.env = options_.node_env(index);
  launch.binary = options_.kvserver_binary;
  launch.host = Host(index);
  if (options_.network != nullptr) launch.netns = options_.network->netns(index);
  absl::StatusOr<std::unique_ptr<NodeProcess>> p = NodeProcess::Start(launch);
  if (!p.ok() && control_port != 0) {
    // The old ports may still be held (TIME_WAIT, a stray process): any
    // ports will do, clients find the node through the map.
    launch.control_port = 0;
    launch.resp_port = 0;
    p = NodeProcess::Start(launch);
  }
  if (!p.ok()) {
    return absl::Status(p.status().code(), absl::StrCat(NodeId(index), ": ", p.status().message()));
  }
  nodes_[index] = std::move(*p);
  control_ports_[index] = nodes_[index]->control_port();
  resp_ports_[index] = nodes_[index]->resp_port();
  return absl::OkStatus();
}

absl::StatusOr<int> ClusterHarness::AddNode() {
  const int index = size();
  nodes_.emplace_back();
  control_ports_.push_back(0);
  resp_ports_.push_back(0);
  old_logs_.emplace_back();
  node_flags_.emplace_back();
  if (absl::Status s = StartNode(index, 0, 0); !s.ok()) return s;
  return index;
}

absl::Status ClusterHarness::WaitMigrationsDone(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string why = "no map yet";
  while (absl::Now() < deadline) {
    absl::StatusOr<v1::ClusterMap> m = GetMap();
    if (!m.ok()) {
      why = m.status().ToString();
    } else if (m->migrations_size() > 0) {
      why = absl::StrCat(m->migrations_size(), " migrations left at map epoch ", m->epoch(),
                         ", the first ", m->migrations(0).id(), " ",
                         v1::MigrationState_Name(m->migrations(0).state()));
    } else {
      return WaitHealthy(deadline - absl::Now());
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("migrations not done: ", why));
}

bool ClusterHarness::Running(int index) {
  return nodes_[index] != nullptr && nodes_[index]->Running();
}

std::vector<std::string> ClusterHarness::ControlAddresses() {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) {
    if (Running(i)) out.push_back(nodes_[i]->control_address());
  }
  return out;
}

absl::StatusOr<v1::ClusterMap> ClusterHarness::MapFrom(int index) {
  if (!Running(index)) return absl::UnavailableError(absl::StrCat(NodeId(index), " is down"));
  auto stub = v1::KvCluster::NewStub(grpc::CreateChannel(nodes_[index]->control_address(),
                                                         options_.control_credentials != nullptr
                                                             ? options_.control_credentials
                                                             : grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  if (!options_.auth_token.empty()) {
    ctx.AddMetadata("authorization", "Bearer " + options_.auth_token);
  }
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  v1::GetClusterMapRequest req;
  v1::GetClusterMapResponse resp;
  grpc::Status s = stub->GetClusterMap(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat(NodeId(index), ": GetClusterMap: ", s.error_message()));
  }
  return resp.map();
}

absl::StatusOr<v1::ClusterMap> ClusterHarness::GetMap() {
  std::optional<v1::ClusterMap> best;
  absl::Status last = absl::UnavailableError("no node is running");
  for (int i = 0; i < size(); ++i) {
    absl::StatusOr<v1::ClusterMap> m = MapFrom(i);
    if (!m.ok()) {
      last = m.status();
      continue;
    }
    if (!best.has_value() || m->epoch() > best->epoch()) best = std::move(*m);
  }
  if (!best.has_value()) return last;
  return *best;
}

std::set<std::string> ClusterHarness::RunningIds() {
  std::set<std::string> running;
  for (int i = 0; i < size(); ++i) {
    if (Running(i)) running.insert(NodeId(i));
  }
  return running;
}

std::string ClusterHarness::MapProblem(const v1::ClusterMap& map,
                                       const std::set<std::string>& running, int replicas,
                                       const std::map<std::string, uint64_t>& earlier_lives) {
  const size_t want = std::min<size_t>(replicas, running.size());
  if (map.shards().empty()) return "no shards yet";
  for (const v1::Shard& shard : map.shards()) {
    const std::string name =
        absl::StrCat("shard ", shard.shard_id(), " [", absl::StrJoin(shard.replicas(), ","),
                     "] syncing [", absl::StrJoin(shard.syncing(), ","), "]");
    if (static_cast<size_t>(shard.replicas_size()) != want) {
      return absl::StrCat(name, ": want ", want, " in-sync replicas");
    }
    if (!shard.syncing().empty()) return absl::StrCat(name, ": still syncing");
    for (const std::string& r : shard.replicas()) {
      if (running.count(r) == 0) return absl::StrCat(name, ": ", r, " is not running");
      auto earlier = earlier_lives.find(r);
      if (earlier == earlier_lives.end()) continue;
      for (const v1::ClusterNode& n : map.nodes()) {
        if (n.node_id() == r && n.incarnation() == earlier->second) {
          return absl::StrCat(name, ": ", r, " is an earlier incarnation (restarted since)");
        }
      }
    }
  }
  return "";
}

absl::Status ClusterHarness::WaitHealthy(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string why = "no answer yet";
  while (absl::Now() < deadline) {
    // Every running node must serve the same, healthy map.
    std::optional<uint64_t> epoch;
    bool agreed = true;
    for (int i = 0; i < size() && agreed; ++i) {
      if (!Running(i)) continue;
      absl::StatusOr<v1::ClusterMap> m = MapFrom(i);
      if (!m.ok()) {
        why = m.status().ToString();
        agreed = false;
      } else if (epoch.has_value() && *epoch != m->epoch()) {
        why = absl::StrCat("nodes disagree: epochs ", *epoch, " and ", m->epoch());
        agreed = false;
      } else {
        epoch = m->epoch();
        why = MapProblem(*m, RunningIds(), options_.replicas, earlier_lives_);
        if (!why.empty()) {
          why = absl::StrCat(NodeId(i), " epoch ", m->epoch(), ": ", why);
          agreed = false;
        }
      }
    }
    if (agreed && epoch.has_value()) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("cluster not healthy: ", why));
}

absl::StatusOr<int> ClusterHarness::PrimaryIndexOf(const std::string& key) {
  absl::StatusOr<v1::ClusterMap> map = GetMap();
  if (!map.ok()) return map.status();
  auto view = cluster::ClusterMapView::Build(*std::move(map));
  if (!view.ok()) return view.status();
  const v1::Shard* shard = (*view)->ShardForKey(key);
  if (shard == nullptr || shard->replicas().empty()) {
    return absl::UnavailableError(absl::StrCat("no primary for ", key));
  }
  const int index = IndexOf(shard->replicas(0));
  if (index < 0) return absl::InternalError(absl::StrCat("unknown node ", shard->replicas(0)));
  return index;
}

absl::StatusOr<std::vector<int>> ClusterHarness::BackupIndexesOf(const std::string& key) {
  absl::StatusOr<v1::ClusterMap> map = GetMap();
  if (!map.ok()) return map.status();
  auto view = cluster::ClusterMapView::Build(*std::move(map));
  if (!view.ok()) return view.status();
  const v1::Shard* shard = (*view)->ShardForKey(key);
  if (shard == nullptr) return absl::UnavailableError(absl::StrCat("no shard for ", key));
  std::vector<int> out;
  for (int i = 1; i < shard->replicas_size(); ++i) out.push_back(IndexOf(shard->replicas(i)));
  return out;
}

absl::StatusOr<std::string> ClusterHarness::WaitNewPrimary(const std::string& key,
                                                           const std::string& old_primary,
                                                           absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<int> p = PrimaryIndexOf(key);
    if (p.ok() && NodeId(*p) != old_primary) return NodeId(*p);
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("no new primary for ", key));
}

absl::Status ClusterHarness::WaitNodeOutOfMap(int index, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string id = NodeId(index);
  while (absl::Now() < deadline) {
    absl::StatusOr<v1::ClusterMap> map = GetMap();
    bool named = !map.ok();
    if (map.ok()) {
      for (const v1::Shard& shard : map->shards()) {
        for (const std::string& r : shard.replicas()) named |= r == id;
        for (const std::string& r : shard.syncing()) named |= r == id;
      }
    }
    if (!named) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("the map still names ", id));
}

void ClusterHarness::KillNode(int index) {
  if (nodes_[index] == nullptr) return;
  nodes_[index]->Kill();
  old_logs_[index] += nodes_[index]->Log();
  nodes_[index].reset();
}

void ClusterHarness::PauseNode(int index) {
  if (nodes_[index] != nullptr) nodes_[index]->Pause();
}

void ClusterHarness::ResumeNode(int index) {
  if (nodes_[index] != nullptr) nodes_[index]->Resume();
}

int ClusterHarness::StopNode(int index) {
  if (nodes_[index] == nullptr) return -1;
  const int code = nodes_[index]->Stop();
  old_logs_[index] += nodes_[index]->Log();
  nodes_[index].reset();
  return code;
}

std::optional<int> ClusterHarness::WaitNodeExit(int index, absl::Duration timeout) {
  if (nodes_[index] == nullptr) return std::nullopt;
  std::optional<int> code = nodes_[index]->WaitExit(timeout);
  if (code.has_value()) {
    old_logs_[index] += nodes_[index]->Log();
    nodes_[index].reset();
  }
  return code;
}

absl::Status ClusterHarness::WaitReregistered(int index, absl::Duration timeout) {
  for (const absl::Time end = absl::Now() + timeout;; absl::SleepFor(absl::Milliseconds(50))) {
    if (!Running(index)) {
      return absl::FailedPreconditionError(absl::StrCat(NodeId(index), " is not running"));
    }
    if (absl::StrContains(nodes_[index]->Log(), "registered again as incarnation")) {
      return absl::OkStatus();
    }
    if (absl::Now() > end) {
      return absl::DeadlineExceededError(absl::StrCat(
          NodeId(index), " did not register again within ", absl::FormatDuration(timeout)));
    }
  }
}

absl::Status ClusterHarness::RestartNode(int index, bool wait_out_of_map) {
  if (Running(index)) {
    return absl::FailedPreconditionError(absl::StrCat(NodeId(index), " is running"));
  }
  if (wait_out_of_map && !RunningIds().empty()) {
    absl::Status s = WaitNodeOutOfMap(index, absl::Seconds(30));
    if (!s.ok()) return s;
  }
  // Restarted at once, the node may still be in sync in the map as its
  // earlier life, whose copies died with it: not healthy until replaced.
  earlier_lives_.erase(NodeId(index));
  if (absl::StatusOr<v1::ClusterMap> map = GetMap(); map.ok()) {
    for (const v1::ClusterNode& n : map->nodes()) {
      if (n.node_id() == NodeId(index) && n.incarnation() != 0) {
        earlier_lives_[n.node_id()] = n.incarnation();
      }
    }
  }
  if (nodes_[index] != nullptr) {
    old_logs_[index] += nodes_[index]->Log();
    nodes_[index].reset();
  }
  return StartNode(index, control_ports_[index], resp_ports_[index]);
}

std::string ClusterHarness::Logs(size_t tail_bytes) {
  std::string out;
  for (int i = 0; i < size(); ++i) {
    std::string log = old_logs_[i];
    if (nodes_[i] != nullptr) log += nodes_[i]->Log();
    if (log.size() > tail_bytes) log = "..." + log.substr(log.size() - tail_bytes);
    absl::StrAppend(&out, "===== ", NodeId(i), " =====\n", log, "\n");
  }
  return out;
}

}  // namespace testing
}  // namespace kvstore
