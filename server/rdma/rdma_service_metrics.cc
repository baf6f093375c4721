// Copyright 2026 The kvstore Authors.
//
// RdmaService's series in the metrics registry (split from rdma_service.cc
// by job): registered once, in the constructor.

#include "server/rdma/rdma_service.h"

namespace kvstore {
namespace server {

void RdmaService::RegisterMetrics() {
  metrics::Registry& r = *registry_;
  connections_total_ =
      r.AddCounter("kvstore_rdma_connections_accepted_total", "RDMA connections accepted.");
  reaped_ = r.AddCounter("kvstore_rdma_connections_reaped_total",
                         "RDMA connections torn down after a failed send or receive.");
  commit_errors_ = r.AddCounter("kvstore_rdma_commit_errors_total",
                                "RDMA commits refused or malformed (absent DELETE keys excluded).");
  commit_refused_rights_ =
      r.AddCounter("kvstore_rdma_commit_permission_denied_total",
                   "RDMA commits refused because the queue pair's session may not make them (a "
                   "replica commit from a client's queue pair, a write from a read-only one).");
  bound_ = r.AddCounter("kvstore_rdma_lease_keys_bound_total", "Lease write keys bound.");
  revoked_ = r.AddCounter("kvstore_rdma_lease_keys_revoked_total", "Lease write keys revoked.");
  wakeups_ = r.AddCounter("kvstore_rdma_poller_wakeups_total",
                          "Completion-channel wake-ups of the commit poller.");
  probes_ = r.AddCounter("kvstore_rdma_idle_probes_total", "Idle-connection probes sent.");
  fences_ = r.AddCounter("kvstore_rdma_fences_total",
                         "FenceAll() calls that fenced the service (every queue pair failed).");
  credit_violations_ = r.AddCounter(
      "kvstore_rdma_credit_violations_total",
      "RDMA connections failed for sending more commits than their credits (cluster mode).");
  commits_started_ = r.AddCounter(
      "kvstore_rdma_commits_started_total",
      "RDMA PUT and DELETE commits started without a worker thread (cluster mode, replication "
      "by stream): the end of their replication round acks them.");
  replica_batches_ = r.AddCounter(
      "kvstore_rdma_replica_batches_total",
      "Replica batch commits received: one SEND committing several of a primary's RDMA WRITEs.");
  replica_batch_writes_ = r.AddCounter(
      "kvstore_rdma_replica_batch_writes_total",
      "Writes the replica batch commits carried (over kvstore_rdma_replica_batches_total: the "
      "mean batch).");
  puts_ = RegisterRequestMetrics(&r, "rdma", "put");
  deletes_ = RegisterRequestMetrics(&r, "rdma", "delete");
  // Commits the poller queued for the commit workers that have not started
  // (0 without workers: single-node mode handles them on the poller).
  const char* const queues[2] = {"client", "replica"};
  for (int q = 0; q < 2; ++q) {
    waiting_gauges_[q] = r.AddCallbackGauge(
        "kvstore_rdma_commits_waiting",
        "RDMA commits queued for the commit workers and not yet started (cluster mode), by "
        "queue: client PUT/DELETE commits, or replica commits from this node's primaries.",
        {{"queue", queues[q]}}, [this, q] {
          absl::MutexLock lock(&workers_mu_);
          const CommitQueue* queue = q == 0 ? client_queue_.get() : replica_queue_.get();
          return queue == nullptr ? int64_t{0} : static_cast<int64_t>(queue->waiting_total());
        });
  }
  // The connection table is the one record of open connections.
  connections_gauge_ =
      r.AddCallbackGauge("kvstore_rdma_connections", "RDMA connections open.", {}, [this] {
        absl::MutexLock lock(&mu_);
        return static_cast<int64_t>(conns_.size());
      });
}

}  // namespace server
}  // namespace kvstore
