// Copyright 2026 The kvstore Authors.
//
// RespLoop's SETs that wait: those held back for pool space (retried when
// space is due) and those parked for their replication round (answered
// when their commits come back, commit_pool.h). Kept apart from
// resp_loop.cc, which moves bytes; this file resumes connections whose
// SETs stopped waiting.

#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "server/resp/resp_loop.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

// Pipelined SETs of one connection parked at once: a pipeline's worth.
constexpr uint32_t kMaxParkedPerConnection = 64;

}  // namespace

// Each held-back SET tries again (StreamedSet asks the store only once
// space is due); one that got its entry, or was refused at the end of its
// wait, goes on with its input and is read again.
void RespLoop::RetryHeldBack() {
  std::vector<int> fds(held_back_.begin(), held_back_.end());
  held_back_.clear();
  for (int fd : fds) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) continue;
    Connection* c = it->second.get();
    Process(c);  // back into held_back_ if still waiting
    if (conns_.count(fd) == 0) continue;
    Flush(c);  // replies, and read interest again once no longer held back
  }
}

bool RespLoop::MayParkBehind(const Connection& c, absl::string_view key) {
  return c.parked < kMaxParkedPerConnection &&
         std::find(c.parked_keys.begin(), c.parked_keys.end(), key) == c.parked_keys.end();
}

// Reads the eventfd before taking the outcomes (see CommitPool::TakeDone).
void RespLoop::Unpark(bool read_eventfd) {
  uint64_t count;
  if (read_eventfd) (void)!read(commit_fd_, &count, sizeof(count));
  // Every answer first, then each connection once: a pipeline's SETs are
  // answered together, and one writev sends all their replies (one per
  // SET made a replicated pipeline cost a system call per SET).
  std::vector<std::pair<int, uint64_t>> answered;  // fd, serial
  for (CommitPool::Done& d : parking_->TakeDone()) {
    auto it = conns_.find(d.job.fd);
    Connection* c =
        it != conns_.end() && it->second->serial == d.job.serial ? it->second.get() : nullptr;
    sets_->Unpark(c, d);
    if (c == nullptr) continue;
    if (answered.empty() || answered.back() != std::make_pair(d.job.fd, d.job.serial)) {
      answered.emplace_back(d.job.fd, d.job.serial);
    }
  }
  std::sort(answered.begin(), answered.end());
  answered.erase(std::unique(answered.begin(), answered.end()), answered.end());
  for (const auto& [fd, serial] : answered) {
    auto it = conns_.find(fd);
    if (it == conns_.end() || it->second->serial != serial) continue;
    Connection* c = it->second.get();
    c->blocked_on_park = false;
    Process(c);  // the requests pipelined behind the SETs (blocked again if need be)
    if (conns_.count(fd) == 0) continue;
    Flush(c);  // the answers, and read interest again
  }
}

}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
