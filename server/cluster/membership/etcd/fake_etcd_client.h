// Copyright 2026 The kvstore Authors.
//
// FakeEtcd: an in-memory etcd for tests, behind the EtcdClient interface
// (etcd_client.h), so that membership, the map store, the controller and
// migration run in one process with no etcd binary and no real waiting.
// etcd_contract_cases.h runs the same cases against it and a real etcd.
//
// What it keeps, as etcd does:
//  * One global revision (1 when empty). Every Put, every Delete that
//    deletes, every Txn whose branch writes, and every lease revoked or
//    expired with keys takes the next one; reads and no-op writes do not.
//    Each key has create_revision, mod_revision, version and lease.
//  * Txn: every Compare target and op (a key that does not exist compares
//    as 0, and fails every kValue compare), the success or failure branch
//    applied in order (a kGet sees the branch's earlier writes), kGet
//    results, one revision for the whole branch; a key written twice in a
//    branch is kInvalidArgument; a put under an unknown lease is kNotFound
//    and writes nothing.
//  * Leases: ids, TTLs rounded up to whole seconds and raised to etcd's
//    minimum (FakeEtcdOptions::min_lease_ttl); revoking or expiring one
//    deletes its keys in one revision, with delete events.
//  * Watches on a prefix from a start revision: the history since then,
//    then every change, one batch per revision. Compact(r) drops history
//    before r; a watch from before r then gets kOutOfRange ("revision
//    compacted up to r") through its callback, once, and ends.
//
// Time: leases never expire on wall time. With FakeEtcdOptions::clock
// (a ManualClock in tests) a lease expires once the clock passes its last
// grant or keepalive + TTL: at the next call of any client, or at
// ExpireDueLeases() (etcd's lessor running). ExpireLease() expires one at
// once, with or without a clock.
//
// Faults: SetReachable(false) makes etcd unreachable for every client (a
// dead, frozen or partitioned etcd): calls fail at once with kUnavailable
// naming the endpoint, Watch() too, and every running watch gets one
// kUnavailable and ends. SetClientReachable() does the same for one client
// (one node cut off). Leases keep running on the clock meanwhile;
// RenewAllLeases() restarts every TTL, as a restarted etcd does when its
// member becomes leader. Data survive all of these. StallWatches() makes
// the running watches of one client (all when the name is empty) stop
// delivering without any error, while its calls go on working: a watch on
// a half-open connection or on a member that lost its leader. Only a new
// watch delivers again. ChangeEndpoint() is one client moving to another
// endpoint (EtcdClient::endpoint_changes() counts it): its running watches
// stay on the old one, which goes silent (stalled).
//
// Progress: WatchHandle::RequestProgress() queues an empty batch behind
// the events already queued; a stalled or ended watch answers nothing.
//
// Threads: as EtcdClient promises, a watch runs on a thread of its own and
// calls its callback from that thread, never under the store's lock (the
// callback may call the client). Events are queued to a watch when they
// are committed, so every change after Watch() returns is delivered, in
// revision order. Destroying the handle joins the thread; no callback
// follows, and no error is reported for it.
//
// Several clients (NewClient(), one per simulated node) share one store.
// Clients and watch handles keep the store alive, so either may outlive the
// FakeEtcd. Thread-safe.

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_FAKE_ETCD_CLIENT_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_FAKE_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/storage/clock.h"

namespace kvstore {
namespace server {
namespace etcd {

namespace internal {
class FakeEtcdStore;
}  // namespace internal

struct FakeEtcdOptions {
  // What error messages name, as a real client names its endpoint.
  std::string endpoint = "fake-etcd";
  // Lease deadlines are on this clock's Steady(); nullptr: leases expire
  // only through ExpireLease(). Must outlive the FakeEtcd and its clients.
  const Clock* clock = nullptr;
  // etcd raises shorter TTLs to 1.5 x its election timeout (1 s by
  // default), in whole seconds.
  absl::Duration min_lease_ttl = absl::Seconds(2);
};

class FakeEtcd {
 public:
  explicit FakeEtcd(FakeEtcdOptions options = {});
  ~FakeEtcd();
  FakeEtcd(const FakeEtcd&) = delete;
  FakeEtcd& operator=(const FakeEtcd&) = delete;

  // A client of this etcd. `name` tells clients apart for
  // SetClientReachable(); clients may share a name.
  std::unique_ptr<EtcdClient> NewClient(absl::string_view name = "client");

  // Faults (see above).
  void SetReachable(bool reachable);
  void SetClientReachable(absl::string_view name, bool reachable);
  void RenewAllLeases();
  void StallWatches(absl::string_view name);
  void ChangeEndpoint(absl::string_view name);

  // Expires `lease` now (keys deleted, with events). kNotFound for an
  // unknown or already ended lease.
  absl::Status ExpireLease(int64_t lease);
  // Expires every lease whose deadline the clock has passed; returns how
  // many. 0 without a clock.
  int ExpireDueLeases();
  // Drops the history before `revision`. kOutOfRange for a revision
  // beyond the current one or not after the last compaction (etcd's
  // "future revision" and "has been compacted").
  absl::Status Compact(int64_t revision);

  int64_t revision() const;
  // Watches running now (tests check that none leaks).
  int watch_count() const;
  const std::string& endpoint() const;

 private:
  const std::shared_ptr<internal::FakeEtcdStore> store_;
};

}  // namespace etcd
}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_ETCD_FAKE_ETCD_CLIENT_H_
