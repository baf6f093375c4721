// Copyright 2026 The kvstore Authors.
//
// ClusterOptions: the cluster-mode settings of one kvserver (architecture
// §19.6, the --etcd ... --replication_timeout flags). Empty etcd_endpoints
// means single-node mode, and then nothing else here is read.
//
// Thread safety: a plain value.

#ifndef KVSTORE_SERVER_CLUSTER_MEMBERSHIP_CLUSTER_OPTIONS_H_
#define KVSTORE_SERVER_CLUSTER_MEMBERSHIP_CLUSTER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kvstore {
namespace server {

struct ClusterOptions {
  // etcd endpoints "host:port"; non-empty switches cluster mode on.
  std::vector<std::string> etcd_endpoints;
  // etcd over TLS and with authentication (etcd::EtcdOptions): the CA of
  // etcd's certificate (set: TLS), this node's client certificate and key,
  // the etcd user and its password. Empty: plaintext, no authentication.
  std::string etcd_ca_file;
  std::string etcd_cert_file;
  std::string etcd_key_file;
  std::string etcd_user;
  std::string etcd_password;
  absl::Duration etcd_tls_reload_interval = absl::Seconds(60);
  // Stable node name. Empty: "<advertise_host>:<control_port>".
  std::string node_id;
  // etcd prefix /kvstore/<cluster_name>/.
  std::string cluster_name = "kvstore";
  // Host other nodes and clients dial. Empty: the listen address, or this
  // machine's host name when listening on 0.0.0.0.
  std::string advertise_host;
  // R, replicas per shard, used when the first map is made (1..3).
  uint32_t replicas = 2;
  // Members the controller waits for before the first map; 0: `replicas`.
  uint32_t cluster_min_nodes = 0;
  // The fewest in-sync replicas (the primary counted) a shard acknowledges
  // writes with (--min_insync_replicas); 0: the default, min(replicas, 2):
  // every acknowledged write is on two copies whenever R >= 2, and R=3
  // keeps writing through the loss of one replica. Below it a primary
  // refuses writes (CLUSTERDOWN, certainly not applied) and never drops a
  // failed backup.
  uint32_t min_insync_replicas = 0;
  // etcd lease TTL of the member key; keepalive every member_ttl / 3.
  absl::Duration member_ttl = absl::Seconds(3);
  // Stop serving this long before the lease could expire.
  absl::Duration fence_margin = absl::Milliseconds(500);
  // A backup that does not acknowledge a write within this is dropped.
  absl::Duration replication_timeout = absl::Seconds(1);
  // Send replicated writes to backups that have an RDMA device by RDMA
  // WRITE + replica commit when this node has one (architecture §19.3.1);
  // false: always the Replicate gRPC call (--replication_rdma).
  bool replication_rdma = true;
  // The peer socket port (--replication_port): where primaries open the
  // plain TCP replication streams to this node (docs/protocol.md). 0 picks
  // a free port; -1: none, replicated writes come on gRPC only. A TLS
  // cluster (--tls_cert) never listens on it: its peer bytes stay on TLS.
  int replication_port = 0;

  bool enabled() const { return !etcd_endpoints.empty(); }
  // cluster_min_nodes with its default applied.
  uint32_t min_nodes() const { return cluster_min_nodes != 0 ? cluster_min_nodes : replicas; }
  // min_insync_replicas with its default applied.
  uint32_t min_insync() const {
    if (min_insync_replicas != 0) return min_insync_replicas;
    return replicas >= 2 ? 2 : 1;
  }

  // Checks every field of an enabled configuration; kInvalidArgument naming
  // the flag: a bad endpoint, replicas outside 1..3, cluster_min_nodes below
  // replicas, min_insync_replicas outside 1..replicas (0: the default), a TTL under 1s, a fence
  // margin that leaves no room for a keepalive (>= 2/3 of the TTL), a non-positive replication
  // timeout, a
  // '/' or an empty name in cluster_name or node_id.
  absl::Status Validate() const;
};

// Splits "--etcd=h1:2379,h2:2379" into endpoints (an "http://" or
// "https://" prefix is accepted and dropped: --etcd_ca decides TLS); kInvalidArgument naming the
// bad endpoint. An empty string gives no endpoints.
absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(absl::string_view flag);

// The host to advertise: `advertise_host` when set, else `listen_address`,
// or this machine's host name for 0.0.0.0.
std::string AdvertiseHost(const ClusterOptions& options, const std::string& listen_address);

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_CLUSTER_MEMBERSHIP_CLUSTER_OPTIONS_H_
