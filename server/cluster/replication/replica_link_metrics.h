// Copyright 2026 The kvstore Authors.
//
// ReplicaLinkMetrics: the series of a primary's RDMA replication links
// (RdmaReplicaLinks), in the server's registry, the one /metrics, gRPC
// Stats and RESP INFO read:
//
//   kvstore_replication_rdma_writes_total             all links together:
//   kvstore_replication_rdma_connects_total           writes acked, links
//   kvstore_replication_rdma_connect_failures_total   made, failed connects,
//   kvstore_replication_rdma_fallbacks_total          links dropped
//
//   kvstore_replication_rdma_leases_granted_total{peer}    per backup, from
//   kvstore_replication_rdma_leases_renewed_total{peer}    the link's RDMA
//   kvstore_replication_rdma_leases_released_total{peer}   initiator (the
//   kvstore_replication_rdma_lease_aborts_total{peer}      lease RPCs, and
//                                                          writes redone
//                                                          after a lease
//                                                          expired)
//
// `peer` is the backup's node id, with ':' written as '_' (a default node
// id is host:port, and flat series names hold no ':', so that each is one
// "key:value" line of RESP INFO). A peer's series are made when the first
// link to it is and kept for the life of the process: a reconnect counts
// on, and there are as many as nodes this one ever replicated to.
//
// Thread safety: thread-safe (the registry is).

#ifndef KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_LINK_METRICS_H_
#define KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_LINK_METRICS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "common/metrics/registry.h"
#include "common/rdma/initiator/path_core.h"

namespace kvstore {
namespace server {

class ReplicaLinkMetrics {
 public:
  // Registers the all-links counters in `registry` (not owned; it must
  // outlive this object and every counter it hands out).
  explicit ReplicaLinkMetrics(metrics::Registry* registry);

  metrics::Counter* writes() const { return writes_; }
  metrics::Counter* connects() const { return connects_; }
  metrics::Counter* connect_failures() const { return connect_failures_; }
  metrics::Counter* fallbacks() const { return fallbacks_; }

  // The counters for the initiator of a link to node `peer`: the same ones
  // for every link to it.
  initiator::PathCounters ForPeer(absl::string_view peer) const;

  // The label value for node id `peer` (see the file comment).
  static std::string PeerLabel(absl::string_view peer);

 private:
  metrics::Registry* const registry_;
  metrics::Counter* const writes_;
  metrics::Counter* const connects_;
  metrics::Counter* const connect_failures_;
  metrics::Counter* const fallbacks_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_REPLICATION_REPLICA_LINK_METRICS_H_
