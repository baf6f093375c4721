// Copyright 2026 The kvstore Authors.

#include "tests/cluster/netns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

absl::Status Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, "", 10);
  if (r.exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("`", absl::StrJoin(argv, " "), "` failed: ", r.err));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<NetnsNetwork>> NetnsNetwork::Create(int nodes) {
  std::unique_ptr<NetnsNetwork> n(new NetnsNetwork());
  const int pid = getpid();
  n->tag_ = absl::StrCat(pid % 100000);
  n->prefix_ = absl::StrCat("10.", 200 + (pid / 256) % 50, ".", pid % 256, ".");
  n->host_ip_ = n->prefix_ + "1";
  n->bridge_ = "kb" + n->tag_;
  // Set before the first command: the destructor undoes what was made.
  n->nodes_ = nodes;
  // Names are made from the pid, and a killed earlier run with the same pid
  // may have left its links behind (a namespace stays alive while a process
  // runs in it): clear them first, best effort.
  for (int i = 0; i < nodes; ++i) {
    (void)Ip({"netns", "del", n->netns(i)});
    (void)Ip({"link", "del", n->HostVeth(i)});
  }
  (void)Ip({"link", "del", n->bridge_});
  absl::Status s = Ip({"link", "add", n->bridge_, "type", "bridge"});
  if (s.ok()) s = Ip({"addr", "add", n->host_ip_ + "/24", "dev", n->bridge_});
  if (s.ok()) s = Ip({"link", "set", n->bridge_, "up"});
  for (int i = 0; i < nodes && s.ok(); ++i) {
    const std::string ns = n->netns(i);
    s = Ip({"netns", "add", ns});
    if (s.ok())
      s = Ip({"link", "add", n->HostVeth(i), "type", "veth", "peer", "name", n->PeerVeth(i)});
    if (s.ok()) s = Ip({"link", "set", n->HostVeth(i), "master", n->bridge_});
    if (s.ok()) s = Ip({"link", "set", n->HostVeth(i), "up"});
    if (s.ok()) s = Ip({"link", "set", n->PeerVeth(i), "netns", ns});
    if (s.ok()) s = Ip({"-n", ns, "addr", "add", n->node_ip(i) + "/24", "dev", n->PeerVeth(i)});
    if (s.ok()) s = Ip({"-n", ns, "link", "set", n->PeerVeth(i), "up"});
    if (s.ok()) s = Ip({"-n", ns, "link", "set", "lo", "up"});
  }
  if (!s.ok()) return s;
  return n;
}

NetnsNetwork::~NetnsNetwork() {
  for (int i = 0; i < nodes_; ++i) {
    (void)Ip({"netns", "del", netns(i)});  // takes the veth pair with it
  }
  (void)Ip({"link", "del", bridge_});
}

std::string NetnsNetwork::node_ip(int i) const { return absl::StrCat(prefix_, 11 + i); }
std::string NetnsNetwork::netns(int i) const { return absl::StrCat("kv", tag_, "n", i + 1); }
std::string NetnsNetwork::HostVeth(int i) const { return absl::StrCat("kh", tag_, "_", i + 1); }
std::string NetnsNetwork::PeerVeth(int i) const { return absl::StrCat("kp", tag_, "_", i + 1); }

absl::Status NetnsNetwork::Cut(int i) { return Ip({"link", "set", HostVeth(i), "down"}); }
absl::Status NetnsNetwork::Heal(int i) { return Ip({"link", "set", HostVeth(i), "up"}); }

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(const std::string& listen_ip,
                                                          const std::string& target) {
  std::unique_ptr<TcpProxy> p(new TcpProxy());
  std::pair<std::string, std::string> hp = absl::StrSplit(target, absl::MaxSplits(':', 1));
  p->target_host_ = hp.first;
  if (!absl::SimpleAtoi(hp.second, &p->target_port_)) {
    return absl::InvalidArgumentError(absl::StrCat("bad target ", target));
  }
  p->ip_ = listen_ip;
  p->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, listen_ip.c_str(), &addr.sin_addr);
  socklen_t len = sizeof(addr);
  if (bind(p->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(p->listen_fd_, 64) != 0 ||
      getsockname(p->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError(absl::StrCat("proxy listen on ", listen_ip, ": ", strerror(errno)));
  }
  p->port_ = ntohs(addr.sin_port);
  p->acceptor_ = std::thread([raw = p.get()] { raw->AcceptLoop(); });
  return p;
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> pumps;
  {
    absl::MutexLock lock(&mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    pumps.swap(pumps_);
  }
  for (std::thread& t : pumps) t.join();
  absl::MutexLock lock(&mu_);
  for (int fd : fds_) close(fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

std::string TcpProxy::address() const { return absl::StrCat(ip_, ":", port_); }

void TcpProxy::AcceptLoop() {
  while (!stop_) {
    pollfd pfd = {listen_fd_, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(target_port_);
    inet_pton(AF_INET, target_host_.c_str(), &addr.sin_addr);
    if (connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(client);
      close(upstream);
      continue;
    }
    absl::MutexLock lock(&mu_);
    fds_.push_back(client);
    fds_.push_back(upstream);
    pumps_.emplace_back([this, client, upstream] { Pump(client, upstream); });
  }
}

// Copies both ways until either side closes, then shuts both down.
void TcpProxy::Pump(int a, int b) {
  char buf[65536];
  pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  while (!stop_) {
    if (poll(fds, 2, 100) <= 0) continue;
    bool done = false;
    for (int i = 0; i < 2 && !done; ++i) {
      if (fds[i].revents == 0) continue;
      const int from = fds[i].fd, to = fds[1 - i].fd;
      ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) {
        done = true;
        break;
      }
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, n - off);
        if (w <= 0) {
          done = true;
          break;
        }
        off += w;
      }
    }
    if (done) break;
  }
  shutdown(a, SHUT_RDWR);
  shutdown(b, SHUT_RDWR);
}

}  // namespace testing
}  // namespace kvstore
