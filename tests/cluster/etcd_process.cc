// Copyright 2026 The kvstore Authors.

#include "tests/cluster/etcd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

constexpr char kEtcdBinary[] = "/usr/bin/etcd";

// Binds sockets to 127.0.0.1:0 at once (so the ports differ) and returns
// their ports. etcd binds them a moment later; another process could take
// one in between: then etcd exits and Start() tries new ports.
absl::Status PickPorts(std::vector<int*> ports) {
  std::vector<int> fds(ports.size(), -1);
  absl::Status status;
  for (size_t i = 0; i < ports.size() && status.ok(); ++i) {
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fds[i] < 0 || bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      status = absl::InternalError(absl::StrCat("free port: ", std::strerror(errno)));
    } else {
      *ports[i] = ntohs(addr.sin_port);
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  return status;
}

// One HTTP/1.0 GET of etcd's /health; true when it reports a healthy member.
bool Healthy(const std::string& ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET /health HTTP/1.0\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[1024];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) reply.append(buf, n);
    }
  }
  close(fd);
  return absl::StrContains(reply, "\"health\":\"true\"");
}

// Whether process `pid` holds the socket listening on `ip`:`port`.
// Another test's etcd may have taken a port we picked (see PickPorts); its
// /health answer must not pass for ours. Linux only: the socket's inode from
// /proc/PID/net/tcp, looked up among /proc/PID/fd.
bool ListensOn(pid_t pid, const std::string& ip, int port) {
  std::ifstream tcp(absl::StrCat("/proc/", pid, "/net/tcp"));
  in_addr a{};
  inet_pton(AF_INET, ip.c_str(), &a);
  // /proc/net/tcp prints the address as the host-order hex of the
  // network-order word.
  const std::string local = absl::StrFormat("%08X:%04X", a.s_addr, port);
  std::string line, inode;
  std::getline(tcp, line);  // header
  while (std::getline(tcp, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    if (f.size() > 9 && f[1] == local && f[3] == "0A") inode = f[9];
  }
  if (inode.empty()) return false;
  const std::string want = absl::StrCat("socket:[", inode, "]");
  std::error_code ec;
  for (const auto& fd :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(fd.path(), link_ec).string() == want) return true;
  }
  return false;
}

}  // namespace

EtcdProcess::~EtcdProcess() {
  Kill();
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::Status EtcdProcess::Start() {
  if (pid_ > 0) return absl::FailedPreconditionError("etcd is already running");
  if (access(kEtcdBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        kEtcdBinary, " not found: install Debian's etcd-server package (deploy/setup.sh)"));
  }
  if (!dir_.empty()) {  // a restart: same ports, same data
    if (absl::Status s = Launch(); !s.ok()) return s;
    return WaitHealthy();
  }
  if (options_.client_port != 0) {
    if (absl::Status s = StartAsync(); !s.ok()) return s;
    return WaitHealthy();
  }
  if (absl::Status s = MakeDir(); !s.ok()) return s;
  for (int attempt = 1;; ++attempt) {
    std::vector<int*> ports = {&client_port_, &peer_port_};
    if (!options_.tls_cert.empty()) ports.push_back(&metrics_port_);
    if (absl::Status s = PickPorts(ports); !s.ok()) return s;
    endpoint_ = absl::StrCat(options_.ip, ":", client_port_);
    if (absl::Status s = Launch(); !s.ok()) return s;
    absl::Status s = WaitHealthy();
    // Another process may have taken a port between PickPorts() and etcd's
    // bind: try again on new ports with fresh data.
    if (s.ok() || attempt == 3 || !absl::StrContains(Log(), "address already in use")) return s;
    std::error_code ignored;
    std::filesystem::remove_all(absl::StrCat(dir_, "/data"), ignored);
    std::filesystem::remove(absl::StrCat(dir_, "/etcd.log"), ignored);
  }
}

absl::Status EtcdProcess::MakeDir() {
  std::string tmpl = absl::StrCat(TempDir(), "/etcd.XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, ": ", std::strerror(errno)));
  }
  dir_ = tmpl;
  return absl::OkStatus();
}

absl::Status EtcdProcess::StartAsync() {
  if (pid_ > 0) return absl::FailedPreconditionError("etcd is already running");
  if (options_.client_port == 0 || options_.peer_port == 0) {
    return absl::InvalidArgumentError("StartAsync needs explicit client and peer ports");
  }
  if (access(kEtcdBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        kEtcdBinary, " not found: install Debian's etcd-server package (deploy/setup.sh)"));
  }
  if (dir_.empty()) {
    if (absl::Status s = MakeDir(); !s.ok()) return s;
  }
  client_port_ = options_.client_port;
  peer_port_ = options_.peer_port;
  endpoint_ = absl::StrCat(options_.ip, ":", client_port_);
  return Launch();
}

absl::Status EtcdProcess::Launch() {
  const bool tls = !options_.tls_cert.empty();
  const std::string client_url =
      absl::StrCat(tls ? "https://" : "http://", options_.ip, ":", client_port_);
  const std::string peer_url = absl::StrCat("http://", options_.ip, ":", peer_port_);
  std::vector<std::string> argv;
  if (!options_.netns.empty()) argv = {"/usr/sbin/ip", "netns", "exec", options_.netns};
  const std::string cluster = options_.initial_cluster.empty()
                                  ? absl::StrCat(options_.name, "=", peer_url)
                                  : options_.initial_cluster;
  argv.insert(argv.end(), {
                              kEtcdBinary,
                              "--name=" + options_.name,
                              absl::StrCat("--data-dir=", dir_, "/data"),
                              "--listen-client-urls=" + client_url,
                              "--advertise-client-urls=" + client_url,
                              "--listen-peer-urls=" + peer_url,
                              "--initial-advertise-peer-urls=" + peer_url,
                              "--initial-cluster=" + cluster,
                              // Without these etcd logs every step of its start at info level.
                              "--logger=zap",
                              "--log-outputs=stderr",
                              "--log-level=warn",
                          });
  if (tls) {
    argv.insert(argv.end(),
                {"--cert-file=" + options_.tls_cert, "--key-file=" + options_.tls_key,
                 "--trusted-ca-file=" + options_.tls_ca, "--client-cert-auth",
                 absl::StrCat("--listen-metrics-urls=http://", options_.ip, ":", metrics_port_)});
  }
  argv.insert(argv.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  const std::string log = absl::StrCat(dir_, "/etcd.log");
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the parent died before prctl
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  paused_ = false;
  return absl::OkStatus();
}

absl::Status EtcdProcess::WaitHealthy() {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    const int health_port = metrics_port_ != 0 ? metrics_port_ : client_port_;
    if (Healthy(options_.ip, health_port) && ListensOn(pid_, options_.ip, client_port_)) {
      return absl::OkStatus();
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("etcd exited during start-up:\n", Log()));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  Kill();
  return absl::InternalError(absl::StrCat("etcd did not become healthy in 20 s:\n", Log()));
}

int EtcdProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  if (paused_) kill(pid_, SIGCONT);  // a stopped process acts on SIGTERM only when continued
  int status = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  pid_ = -1;
  paused_ = false;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

void EtcdProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  paused_ = false;
}

void EtcdProcess::Pause() {
  if (pid_ <= 0 || paused_) return;
  kill(pid_, SIGSTOP);
  // kill() returns before every thread has stopped; a request sent right
  // after could still be answered. Wait until the whole group has stopped.
  int status;
  waitpid(pid_, &status, WUNTRACED);
  paused_ = true;
}

void EtcdProcess::Resume() {
  if (pid_ <= 0 || !paused_) return;
  kill(pid_, SIGCONT);
  int status;
  waitpid(pid_, &status, WCONTINUED);
  paused_ = false;
}

std::string EtcdProcess::Log() const {
  std::ifstream f(absl::StrCat(dir_, "/etcd.log"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace testing
}  // namespace kvstore
