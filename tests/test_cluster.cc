// Copyright 2026 The kvstore Authors.

#include "tests/test_cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kvstore {
namespace testing {

std::string BinaryPath(const std::string& rel) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr) {
    std::string p = absl::StrCat(srcdir, "/", ws ? ws : "kvstore", "/", rel);
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  // Fallback for running a test binary by hand from the workspace root.
  return absl::StrCat("bazel-bin/", rel);
}

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

uint64_t SeriesValue(const std::map<std::string, uint64_t>& metrics, const std::string& series) {
  auto it = metrics.find(series);
  return it == metrics.end() ? 0 : it->second;
}

// Keys are `name{op="...",transport="..."}` (labels sorted by name), so the
// transport label is matched as text rather than parsed.
uint64_t RequestsOn(const std::map<std::string, uint64_t>& metrics, const std::string& transport) {
  const std::string prefix = "kvstore_client_requests_total{";
  const std::string label = absl::StrCat("transport=\"", transport, "\"");
  uint64_t total = 0;
  for (auto it = metrics.lower_bound(prefix); it != metrics.end(); ++it) {
    if (!absl::StartsWith(it->first, prefix)) break;
    if (absl::StrContains(it->first, label)) total += it->second;
  }
  return total;
}

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& input,
                         int timeout_s) {
  ProcessResult result;
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) {
    result.err = "pipe failed";
    return result;
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  size_t written = 0;
  if (input.empty()) {
    close(in_pipe[1]);
    in_pipe[1] = -1;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    pollfd fds[3];
    int n = 0;
    if (out_open) fds[n++] = {out_pipe[0], POLLIN, 0};
    if (err_open) fds[n++] = {err_pipe[0], POLLIN, 0};
    if (in_pipe[1] >= 0) fds[n++] = {in_pipe[1], POLLOUT, 0};
    int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0) {
      kill(pid, SIGKILL);
      result.err += "\n[test harness: timed out, killed]";
      break;
    }
    if (poll(fds, n, std::min(left, 1000)) <= 0) continue;
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_pipe[1]) {
        ssize_t w = write(in_pipe[1], input.data() + written, input.size() - written);
        if (w > 0) written += w;
        if (w < 0 && errno != EAGAIN) written = input.size();
        if (written == input.size()) {
          close(in_pipe[1]);
          in_pipe[1] = -1;
        }
        continue;
      }
      ssize_t r = read(fds[i].fd, buf, sizeof(buf));
      if (r <= 0) {
        (fds[i].fd == out_pipe[0] ? out_open : err_open) = false;
      } else {
        (fds[i].fd == out_pipe[0] ? result.out : result.err).append(buf, r);
      }
    }
  }
  if (in_pipe[1] >= 0) close(in_pipe[1]);
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return result;
}

absl::StatusOr<KvServerProcess> KvServerProcess::Start(const std::vector<std::string>& flags,
                                                       int max_descriptors) {
  static std::atomic<int> counter{0};
  const int id = counter++;
  const std::string dir = TempDir();
  const std::string ready = absl::StrCat(dir, "/kvserver.", getpid(), ".", id, ".ready");
  KvServerProcess p;
  p.log_path_ = absl::StrCat(dir, "/kvserver.", getpid(), ".", id, ".log");
  unlink(ready.c_str());
  std::vector<std::string> argv = {BinaryPath("server/kvserver"), "--control_port=0",
                                   "--resp_port=0", "--ready_file=" + ready};
  argv.insert(argv.end(), flags.begin(), flags.end());
  p.pid_ = fork();
  if (p.pid_ == 0) {
    int fd = open(p.log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (max_descriptors > 0) {
      const rlimit limit{static_cast<rlim_t>(max_descriptors),
                         static_cast<rlim_t>(max_descriptors)};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    std::ifstream f(ready);
    if (f) {
      std::string line;
      while (std::getline(f, line)) {
        std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
        if (kv.first == "control_port") (void)absl::SimpleAtoi(kv.second, &p.control_port_);
        if (kv.first == "resp_port") (void)absl::SimpleAtoi(kv.second, &p.resp_port_);
        if (kv.first == "metrics_port") (void)absl::SimpleAtoi(kv.second, &p.metrics_port_);
        if (kv.first == "resp_tls_port") (void)absl::SimpleAtoi(kv.second, &p.resp_tls_port_);
        if (kv.first == "rdma_device") p.rdma_device_ = kv.second;
      }
      if (p.control_port_ != 0 && p.resp_port_ != 0) return p;
    }
    int status;
    if (waitpid(p.pid_, &status, WNOHANG) == p.pid_) {
      p.pid_ = -1;
      return absl::InternalError(absl::StrCat("kvserver exited during start-up:\n", p.Log()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("kvserver did not become ready:\n", p.Log()));
}

KvServerProcess::KvServerProcess(KvServerProcess&& o) noexcept
    : pid_(o.pid_),
      control_port_(o.control_port_),
      resp_port_(o.resp_port_),
      metrics_port_(o.metrics_port_),
      resp_tls_port_(o.resp_tls_port_),
      rdma_device_(std::move(o.rdma_device_)),
      log_path_(std::move(o.log_path_)) {
  o.pid_ = -1;
}

KvServerProcess::~KvServerProcess() {
  if (pid_ > 0) Stop();
}

void KvServerProcess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

int KvServerProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

std::optional<int> KvServerProcess::WaitExit(absl::Duration timeout) {
  if (pid_ <= 0) return std::nullopt;
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

void KvServerProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

bool KvServerProcess::Running() const { return pid_ > 0 && kill(pid_, 0) == 0; }

std::string KvServerProcess::control_address() const {
  return absl::StrCat("127.0.0.1:", control_port_);
}

std::string KvServerProcess::Log() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace testing
}  // namespace kvstore
