// Copyright 2026 The kvstore Authors.
//
// Network partitions for cluster tests, with Linux network namespaces:
// every node gets a namespace of its own, joined to a bridge in the test's
// namespace by a veth pair:
//
//   test process (host side)  bridge 10.X.Y.1/24
//     veth kh<tag>_<i>  <->  kp<tag>_<i> in netns kv<tag>n<i>, 10.X.Y.(11+i)
//
// Cut(i) takes node i's host-side link down: it can reach nothing (etcd,
// other nodes, clients) and nothing reaches it, while its process runs on.
// Heal(i) brings the link back. X.Y are derived from the pid so concurrent
// tests do not collide.
//
// Needs root and `ip` (iproute2), and a writable /var/run/netns (run the
// test unsandboxed: tags = ["local"]). Create() fails with
// kFailedPrecondition, naming the command, when the kernel or the sandbox
// refuses: callers skip then.
//
// TcpProxy forwards a listening address to another, byte for byte: etcd
// (tests/cluster/etcd_process.h) listens on 127.0.0.1 of the test's
// namespace, which a node inside its own namespace cannot reach; the proxy
// listens on the bridge address instead.
//
// Thread safety: NetnsNetwork is driven by one thread. TcpProxy runs its own
// threads; its methods are called from one thread.

#ifndef KVSTORE_TESTS_CLUSTER_NETNS_H_
#define KVSTORE_TESTS_CLUSTER_NETNS_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kvstore {
namespace testing {

class NetnsNetwork {
 public:
  static absl::StatusOr<std::unique_ptr<NetnsNetwork>> Create(int nodes);
  ~NetnsNetwork();  // deletes the namespaces, veths and the bridge
  NetnsNetwork(const NetnsNetwork&) = delete;
  NetnsNetwork& operator=(const NetnsNetwork&) = delete;

  const std::string& host_ip() const { return host_ip_; }
  std::string node_ip(int i) const;
  std::string netns(int i) const;

  absl::Status Cut(int i);
  absl::Status Heal(int i);

 private:
  NetnsNetwork() = default;
  std::string HostVeth(int i) const;
  std::string PeerVeth(int i) const;

  std::string tag_;
  std::string prefix_;  // "10.X.Y."
  std::string host_ip_;
  std::string bridge_;
  int nodes_ = 0;
};

class TcpProxy {
 public:
  // Listens on listen_ip:0 and forwards each connection to `target`
  // ("host:port").
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(const std::string& listen_ip,
                                                         const std::string& target);
  ~TcpProxy();  // closes every connection and joins the threads
  std::string address() const;

 private:
  TcpProxy() = default;
  void AcceptLoop();
  void Pump(int a, int b);

  int listen_fd_ = -1;
  int port_ = 0;
  std::string ip_;
  std::string target_host_;
  int target_port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing
}  // namespace kvstore

#endif  // KVSTORE_TESTS_CLUSTER_NETNS_H_
