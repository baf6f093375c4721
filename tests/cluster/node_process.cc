// Copyright 2026 The kvstore Authors.

#include "tests/cluster/node_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

int StatusCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status); }

// Reads "control_port=..." lines; true once both ports are known.
bool ReadReadyFile(const std::string& path, int* control_port, int* resp_port) {
  std::ifstream f(path);
  if (!f) return false;
  std::string line;
  while (std::getline(f, line)) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (kv.first == "control_port") (void)absl::SimpleAtoi(kv.second, control_port);
    if (kv.first == "resp_port") (void)absl::SimpleAtoi(kv.second, resp_port);
  }
  return *control_port != 0 && *resp_port != 0;
}

}  // namespace

int64_t ClockTicksPerSecond() { return sysconf(_SC_CLK_TCK); }

absl::StatusOr<std::unique_ptr<NodeProcess>> NodeProcess::Start(const NodeLaunch& launch) {
  static std::atomic<int> counter{0};
  const std::string base = absl::StrCat(TempDir(), "/node.", getpid(), ".", counter++, ".",
                                        launch.log_tag.empty() ? "x" : launch.log_tag);
  const std::string ready = base + ".ready";
  std::unique_ptr<NodeProcess> p(new NodeProcess());
  p->log_path_ = base + ".log";
  p->host_ = launch.host;
  unlink(ready.c_str());
  std::vector<std::string> argv;
  if (!launch.netns.empty()) argv = {"ip", "netns", "exec", launch.netns};
  if (!launch.env.empty()) {
    argv.push_back("/usr/bin/env");
    argv.insert(argv.end(), launch.env.begin(), launch.env.end());
  }
  argv.push_back(BinaryPath(launch.binary));
  argv.push_back(absl::StrCat("--control_port=", launch.control_port));
  argv.push_back(absl::StrCat("--resp_port=", launch.resp_port));
  argv.push_back("--ready_file=" + ready);
  argv.insert(argv.end(), launch.flags.begin(), launch.flags.end());
  p->pid_ = fork();
  if (p->pid_ < 0) return absl::InternalError("fork failed");
  if (p->pid_ == 0) {
    int fd = open(p->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (ReadReadyFile(ready, &p->control_port_, &p->resp_port_)) return p;
    if (!p->Running()) {
      return absl::InternalError(absl::StrCat("kvserver exited during start-up (status ",
                                              p->exit_status_.value_or(-1), "):\n", p->Log()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  p->Kill();
  return absl::DeadlineExceededError(absl::StrCat("kvserver did not become ready:\n", p->Log()));
}

NodeProcess::~NodeProcess() { Kill(); }

std::string NodeProcess::control_address() const { return absl::StrCat(host_, ":", control_port_); }
std::string NodeProcess::resp_address() const { return absl::StrCat(host_, ":", resp_port_); }

std::string NodeProcess::Log() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void NodeProcess::Reap(int status) {
  exit_status_ = StatusCode(status);
  pid_ = -1;
}

bool NodeProcess::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    Reap(status);
    return false;
  }
  return true;
}

void NodeProcess::Kill() {
  if (!Running()) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  Reap(status);
}

int NodeProcess::Stop(absl::Duration timeout) {
  if (!Running()) return -1;
  kill(pid_, SIGCONT);  // a stopped process cannot handle SIGTERM
  kill(pid_, SIGTERM);
  std::optional<int> code = WaitExit(timeout);
  if (code.has_value()) return *code;
  Kill();
  return exit_status_.value_or(-1);
}

void NodeProcess::Pause() {
  if (Running()) kill(pid_, SIGSTOP);
}

void NodeProcess::Resume() {
  if (Running()) kill(pid_, SIGCONT);
}

std::optional<int> NodeProcess::WaitExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (Running()) {
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return exit_status_;
}

uint64_t NodeProcess::CpuTicks() const {
  if (pid_ <= 0) return 0;
  std::ifstream f(absl::StrCat("/proc/", pid_, "/stat"));
  std::string stat;
  if (!std::getline(f, stat)) return 0;
  // Fields after the parenthesised command name (which may hold spaces):
  // state is field 3, utime 14, stime 15.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  uint64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return 0;
  }
  return utime + stime;
}

}  // namespace testing
}  // namespace kvstore
