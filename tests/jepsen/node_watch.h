// Copyright 2026 The kvstore Authors.
//
// NodeWatch: samples every kvserver's key count (the `kvstore_keys` gauge,
// gRPC Stats) and its full-copy counters on a thread of its own, so a run
// can tell whether a node came through a fault with its memory or was
// emptied and filled again. A node's key count drops a little with the
// workload's deletes; it drops to near zero only when the node lost its
// data (a restart, or a copy that began by clearing it).
//
//   NodeWatch watch({{"n1", "10.0.0.2:7001"}, ...}, absl::Milliseconds(250));
//   watch.Start();
//   ...
//   watch.MarkOutage();   // samples from here on are compared with the last one before
//   ...
//   watch.Stop();
//   for (const NodeWatch::Summary& s : watch.Summaries()) ...
//
// A node that does not answer within the period is counted as unanswered
// for that sample (a fenced or busy node may not), not as empty.
//
// Thread safety: Start/Stop/MarkOutage from one thread; Summaries is
// thread-safe.

#ifndef KVSTORE_TESTS_JEPSEN_NODE_WATCH_H_
#define KVSTORE_TESTS_JEPSEN_NODE_WATCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/control/control_client.h"

namespace kvstore {
namespace jepsen {

struct WatchedNode {
  std::string name;             // "n1"
  std::string control_address;  // its gRPC address
};

class NodeWatch {
 public:
  struct Summary {
    std::string name;
    int64_t keys_before = -1;     // the last answer before MarkOutage
    int64_t min_keys_after = -1;  // the smallest answer after it
    int64_t keys_last = -1;       // the last answer
    int answered_after = 0;
    int unanswered_after = 0;
    // kvstore_syncs_completed_total / kvstore_sync_entries_total: copies
    // this node received (before MarkOutage, and last).
    int64_t syncs_before = 0, syncs_last = 0;
    int64_t sync_entries_before = 0, sync_entries_last = 0;
    // True when the key count fell below half of keys_before: the node
    // lost its memory (keys_before of a few dozen keys is not judged).
    bool Emptied() const;
  };

  NodeWatch(std::vector<WatchedNode> nodes, absl::Duration period);
  ~NodeWatch();  // Stop()s
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

  void Start();
  void Stop();
  void MarkOutage();
  std::vector<Summary> Summaries() const;

 private:
  void Run();
  void SampleOnce(std::vector<std::unique_ptr<control::ControlClient>>& clients);

  const std::vector<WatchedNode> nodes_;
  const absl::Duration period_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  bool after_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Summary> summaries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace jepsen
}  // namespace kvstore

#endif  // KVSTORE_TESTS_JEPSEN_NODE_WATCH_H_
