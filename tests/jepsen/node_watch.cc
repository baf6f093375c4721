// Copyright 2026 The kvstore Authors.

#include "tests/jepsen/node_watch.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "common/control/control_client.h"

namespace kvstore {
namespace jepsen {
namespace {

int64_t Counter(const v1::StatsResponse& stats, const std::string& name) {
  auto it = stats.counters().find(name);
  return it == stats.counters().end() ? 0 : static_cast<int64_t>(it->second);
}

}  // namespace

bool NodeWatch::Summary::Emptied() const {
  constexpr int64_t kTooFewToJudge = 50;
  return keys_before >= kTooFewToJudge && min_keys_after >= 0 && min_keys_after * 2 < keys_before;
}

NodeWatch::NodeWatch(std::vector<WatchedNode> nodes, absl::Duration period)
    : nodes_(std::move(nodes)), period_(period) {
  for (const WatchedNode& n : nodes_) {
    Summary s;
    s.name = n.name;
    summaries_.push_back(s);
  }
}

NodeWatch::~NodeWatch() { Stop(); }

void NodeWatch::Start() {
  thread_ = std::thread([this] { Run(); });
}

void NodeWatch::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void NodeWatch::MarkOutage() {
  absl::MutexLock lock(&mu_);
  after_ = true;
}

std::vector<NodeWatch::Summary> NodeWatch::Summaries() const {
  absl::MutexLock lock(&mu_);
  return summaries_;
}

void NodeWatch::Run() {
  // One channel per node for the whole run: a fresh dial per sample would
  // measure connection set-up, and a node keeps its address.
  std::vector<std::unique_ptr<control::ControlClient>> clients(nodes_.size());
  while (!stop_) {
    const absl::Time next = absl::Now() + period_;
    SampleOnce(clients);
    absl::SleepFor(std::max(absl::ZeroDuration(), next - absl::Now()));
  }
}

void NodeWatch::SampleOnce(std::vector<std::unique_ptr<control::ControlClient>>& clients) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    bool after;
    {
      absl::MutexLock lock(&mu_);
      after = after_;
    }
    absl::StatusOr<v1::StatsResponse> stats = absl::UnavailableError("not dialled");
    if (clients[i] == nullptr) {
      auto dialled = control::ControlClient::Dial(nodes_[i].control_address);
      if (dialled.ok()) clients[i] = *std::move(dialled);
    }
    if (clients[i] != nullptr) stats = clients[i]->Stats(absl::Now() + period_);
    absl::MutexLock lock(&mu_);
    Summary& s = summaries_[i];
    if (!stats.ok()) {
      if (after) ++s.unanswered_after;
      continue;
    }
    const int64_t keys = Counter(*stats, "kvstore_keys");
    s.keys_last = keys;
    s.syncs_last = Counter(*stats, "kvstore_syncs_completed_total");
    s.sync_entries_last = Counter(*stats, "kvstore_sync_entries_total");
    if (!after) {
      s.keys_before = keys;
      s.syncs_before = s.syncs_last;
      s.sync_entries_before = s.sync_entries_last;
      continue;
    }
    ++s.answered_after;
    s.min_keys_after = s.min_keys_after < 0 ? keys : std::min(s.min_keys_after, keys);
  }
}

}  // namespace jepsen
}  // namespace kvstore
