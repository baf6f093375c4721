// Copyright 2026 The kvstore Authors.
//
// FakeEtcdStore: the state behind FakeEtcd (fake_etcd_client.h, which
// states the behaviour): keys, leases, the event history and the running
// watches, under one mutex. Every client call names its client, so that
// reachability can be per client. Test-only; use FakeEtcd.
//
// Thread safety: thread-safe. Watch callbacks run on the watches' own
// threads, never under the store's mutex.

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_FAKE_ETCD_STORE_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_FAKE_ETCD_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace internal {

using EventsCallback = std::function<void(absl::StatusOr<std::vector<WatchEvent>>)>;

// One watch's queue and thread. The store pushes batches under its mutex;
// the thread pops them and calls the callback outside every lock.
class FakeWatchStream {
 public:
  FakeWatchStream(std::string client, std::string prefix, EventsCallback on_events);
  ~FakeWatchStream();  // stops and joins the thread; no callback after
  const std::string& client() const { return client_; }
  const std::string& prefix() const { return prefix_; }
  // Queues a batch; an error is the last item (the watch ends after it).
  void Push(absl::StatusOr<std::vector<WatchEvent>> item);
  // Stops delivering without an error (what is queued stays queued): a
  // stream on a half-open connection, or on a member without a leader.
  void Stall();

 private:
  void Run();

  const std::string client_;
  const std::string prefix_;
  const EventsCallback on_events_;
  absl::Mutex mu_;
  std::deque<absl::StatusOr<std::vector<WatchEvent>>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stalled_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class FakeEtcdStore {
 public:
  // As FakeEtcdOptions' fields.
  FakeEtcdStore(std::string endpoint, const Clock* clock, absl::Duration min_lease_ttl);

  // EtcdClient's calls, made by `client` (see etcd_client.h for each).
  absl::StatusOr<int64_t> GrantLease(const std::string& client, absl::Duration ttl);
  absl::Status RevokeLease(const std::string& client, int64_t lease);
  absl::StatusOr<absl::Duration> KeepAliveOnce(const std::string& client, int64_t lease);
  absl::StatusOr<std::optional<KeyValue>> Get(const std::string& client, absl::string_view key);
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(const std::string& client,
                                                  absl::string_view prefix, int64_t* revision);
  absl::StatusOr<int64_t> Put(const std::string& client, absl::string_view key,
                              absl::string_view value, int64_t lease);
  absl::StatusOr<int64_t> Delete(const std::string& client, absl::string_view key);
  absl::StatusOr<TxnResult> Txn(const std::string& client, const std::vector<Compare>& compares,
                                const std::vector<TxnOp>& success,
                                const std::vector<TxnOp>& failure);
  // Registers `stream` from `start_revision` (0: from now) and queues the
  // history since then, or the compaction error. The caller keeps the
  // stream and calls RemoveWatch() before destroying it.
  absl::Status AddWatch(FakeWatchStream* stream, int64_t start_revision);
  void RemoveWatch(FakeWatchStream* stream);
  // WatchHandle::RequestProgress: an empty batch after what is queued.
  void RequestProgress(FakeWatchStream* stream);
  uint64_t endpoint_changes(const std::string& client) const;

  // FakeEtcd's test methods.
  void SetReachable(bool reachable);
  void SetClientReachable(const std::string& client, bool reachable);
  void RenewAllLeases();
  void StallWatches(const std::string& client);
  void ChangeEndpoint(const std::string& client);
  absl::Status ExpireLease(int64_t lease);
  int ExpireDueLeases();
  absl::Status Compact(int64_t revision);
  int64_t revision() const;
  int watch_count() const;
  const std::string& endpoint() const { return endpoint_; }

 private:
  struct Lease {
    absl::Duration ttl;
    absl::Duration deadline;  // on the clock; infinite without one
    std::set<std::string> keys;
  };
  struct Revision {
    int64_t revision;
    std::vector<WatchEvent> events;
  };

  // kUnavailable unless `client` reaches etcd; then expires due leases.
  absl::Status Reach(const std::string& client, absl::string_view method)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Holds(const Compare& c) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks a branch before it runs: no key written twice, leases exist.
  absl::Status CheckBranch(const std::vector<TxnOp>& ops) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes at revision `rev`, appending the events.
  void ApplyPut(const std::string& key, absl::string_view value, int64_t lease, int64_t rev,
                std::vector<WatchEvent>* events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyDelete(const std::string& key, int64_t rev, std::vector<WatchEvent>* events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes revision_ + 1 for `events` (when there are any), keeps them in
  // the history and queues them to the watches they match.
  void Commit(std::vector<WatchEvent> events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndLease(int64_t lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int ExpireDueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the watches of `client` (all when empty) with kUnavailable.
  void BreakWatches(const std::string& client) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration Now() const;
  absl::Status Unavailable(absl::string_view method) const;

  const std::string endpoint_;
  const Clock* const clock_;
  const absl::Duration min_lease_ttl_;
  mutable absl::Mutex mu_;
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t compacted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_lease_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, KeyValue> kvs_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Lease> leases_ ABSL_GUARDED_BY(mu_);
  std::deque<Revision> history_ ABSL_GUARDED_BY(mu_);
  std::set<FakeWatchStream*> watches_ ABSL_GUARDED_BY(mu_);
  bool reachable_ ABSL_GUARDED_BY(mu_) = true;
  std::set<std::string> cut_off_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> endpoint_changes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal
}  // namespace etcd
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_FAKE_ETCD_STORE_H_
