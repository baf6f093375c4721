// Copyright 2026 The kvstore Authors.

#include "server/cluster/replication/replica_link_metrics.h"

#include "absl/strings/str_replace.h"

namespace kvstore {
namespace server {

ReplicaLinkMetrics::ReplicaLinkMetrics(metrics::Registry* registry)
    : registry_(registry),
      writes_(registry->AddCounter(
          "kvstore_replication_rdma_writes_total",
          "Replicated writes sent to a backup as RDMA WRITE + replica commit.")),
      connects_(registry->AddCounter("kvstore_replication_rdma_connects_total",
                                     "RDMA links to backups connected (handshake + queue pair).")),
      connect_failures_(registry->AddCounter(
          "kvstore_replication_rdma_connect_failures_total",
          "Attempts to connect an RDMA link to a backup that failed (gRPC used instead).")),
      fallbacks_(registry->AddCounter(
          "kvstore_replication_rdma_fallbacks_total",
          "RDMA links to backups dropped after a transport failure (the write and those after "
          "it go by gRPC until the link reconnects).")) {}

std::string ReplicaLinkMetrics::PeerLabel(absl::string_view peer) {
  return absl::StrReplaceAll(peer, {{":", "_"}});
}

// Registering a series again returns the one registered first, which is
// what makes a reconnected link count on.
initiator::PathCounters ReplicaLinkMetrics::ForPeer(absl::string_view peer) const {
  const metrics::Labels labels = {{"peer", PeerLabel(peer)}};
  initiator::PathCounters c;
  c.leases.granted = registry_->AddCounter(
      "kvstore_replication_rdma_leases_granted_total",
      "Write leases a backup granted to this primary's RDMA link (gRPC), by backup.", labels);
  c.leases.renewed = registry_->AddCounter(
      "kvstore_replication_rdma_leases_renewed_total",
      "Write lease renewals a backup accepted from this primary's RDMA link, by backup.", labels);
  c.leases.released = registry_->AddCounter(
      "kvstore_replication_rdma_leases_released_total",
      "Write leases this primary's RDMA link gave back and the backup confirmed, by backup.",
      labels);
  c.lease_aborts = registry_->AddCounter(
      "kvstore_replication_rdma_lease_aborts_total",
      "Replica commits a backup refused because their write lease had expired (each is "
      "redone), by backup.",
      labels);
  return c;
}

}  // namespace server
}  // namespace kvstore
