// Copyright 2026 The kvstore Authors.
//
// KvServer: one kvstore server process, wired together. It owns, in order of
// construction: the RDMA device and protection domain (when there is one),
// the memory pool (registered with the device), the storage engine, the
// lease table, the RDMA service (with a device), the RESP/TCP data port,
// the gRPC control plane and (with metrics_port >= 0) the Prometheus
// endpoint, and always a fence page (single-node: {0, kNoExpiry}). In
// cluster mode (options.cluster names etcd endpoints) it also owns a
// ClusterState and, once the listeners are bound, a ClusterNode (etcd
// membership, fencing, the map; architecture §19). Every component counts into the server's one
// metrics Registry, which gRPC Stats, RESP INFO and GET /metrics all render. Start() brings all of
// it up or fails with a Status naming what went wrong; Shutdown() (or the destructor) stops
// listeners before storage.
//
// Thread safety: Start/Shutdown from one thread; accessors from any.

#ifndef KVSTORE_SERVER_KV_SERVER_H_
#define KVSTORE_SERVER_KV_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth/credentials.h"
#include "common/metrics/registry.h"
#include "common/protocol/limits.h"
#include "common/rdma/device.h"
#include "server/cluster/membership/cluster_options.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "server/control/session_table.h"
#include "server/metrics/http_server.h"
#include "server/rdma/rdma_service.h"
#include "server/resp/resp_server.h"
#include "server/routing/cluster_state.h"
#include "server/routing/fence_page.h"
#include "server/storage/kv_store.h"
#include "server/storage/lease_table.h"
#include "server/storage/memory_pool.h"

namespace grpc {
class Server;
class ServerCredentials;
class ChannelCredentials;
}  // namespace grpc

namespace kvstore {
namespace auth {
class MetadataTokenCheck;
}  // namespace auth
namespace tls {
class ReloadingServerContext;
}  // namespace tls
namespace server {

class KvControlServiceImpl;
class ClusterNode;
class ClusterService;
class ControllerProxy;
class ForwardingShardMapEditor;
class MigrationDriver;
class PeerClient;
class PeerListener;
class ReplicaInstaller;
class ShardReconciler;
class RdmaReplicaLinks;
class Replicator;
class ShardSeqs;
class SlotImporter;
class SlotJanitor;

enum class ServerTransport { kAuto, kRdma, kTcp };

// SessionOptions' defaults with max_lease_bytes 0 ("a quarter of the pool").
inline SessionOptions DefaultServerSessions() {
  SessionOptions s;
  s.max_lease_bytes = 0;
  return s;
}

// Bounds of KvServerOptions::grpc_stream_window_bytes: below 1 KiB every
// message needs a window update per KiB; HTTP/2 allows up to 2^31 - 1.
constexpr uint64_t kMinGrpcStreamWindow = 1 << 10;
constexpr uint64_t kMaxGrpcStreamWindow = 64 << 20;

struct KvServerOptions {
  std::string listen_address = "127.0.0.1";
  int control_port = 7300;  // gRPC; 0 picks a free port
  int resp_port = 6380;     // RESP2/TCP; 0 picks a free port
  // RESP over TLS (with tls_cert_file/tls_key_file, and mutual with
  // tls_client_ca_file): -1 off, 0 a free port, N that port. With it the
  // plaintext port is off unless resp_plaintext_with_tls.
  int resp_tls_port = -1;
  bool resp_plaintext_with_tls = false;
  int resp_threads = 2;
  absl::Duration idle_timeout = absl::Minutes(5);
  absl::Duration request_timeout = absl::Seconds(30);
  // RESP per-resource bounds (--resp_* flags). max_inflight_set_bytes is
  // not read from here: it is resp_inflight_set_percent of pool_bytes.
  RespLimits resp_limits;
  uint32_t resp_inflight_set_percent = 25;

  uint64_t pool_bytes = 512ull << 20;
  uint64_t index_buckets = 0;  // 0: one bucket per KiB of pool
  bool hugepages = false;
  bool transparent_hugepages = false;             // MemoryPoolOptions::transparent_hugepages
  uint64_t segment_bytes = kDefaultSegmentBytes;  // kv_store.h says why not 4 MiB
  absl::Duration grace_period = absl::Milliseconds(500);
  absl::Duration expiry_interval = absl::Milliseconds(100);  // KvStoreOptions::expiry_interval
  uint64_t max_memory_bytes = 0;                             // KvStoreOptions::max_memory_bytes
  EvictionPolicy eviction_policy = EvictionPolicy::kNoEviction;
  Limits limits;
  absl::Duration lease_ttl = absl::Seconds(10);

  // kAuto: register with the first active RDMA device if there is one.
  // kRdma: fail to start without one. kTcp: never touch verbs.
  ServerTransport transport = ServerTransport::kAuto;
  std::string rdma_device;  // empty: the first device with an active port
  // Source address for RoCE: the GID of this IPv4 address ("" = the first).
  std::string rdma_ip;
  uint32_t rdma_commit_credits = 64;
  absl::Duration rdma_idle_probe_after = absl::Seconds(30);
  // Cap on bytes per memory region (0: the device's max_mr_size).
  uint64_t max_mr_bytes = 0;
  // GET /metrics on metrics_address: -1 off, 0 a free port, N that port.
  int metrics_port = -1;
  // Where GET /metrics listens. Not listen_address: the endpoint needs no
  // credential, so it stays on loopback unless asked (--metrics_listen).
  std::string metrics_address = "127.0.0.1";

  // --- Security (docs/security.md).
  // The data token (user "default", role write): gRPC bearer token and
  // RESP password of data clients. Empty: none.
  std::string auth_token;
  // The admin token (user "admin", role admin): the cluster's admin
  // requests and RESP admin commands. Empty: none.
  std::string admin_token;
  // The cluster secret: what peers present to each other (role peer).
  // Required in cluster mode; never a data credential.
  std::string cluster_secret;
  // More users (--users_file): read-only, read-write and admin clients.
  std::vector<auth::User> users;
  // PEM files. With cert and key the control port serves TLS; with a client
  // CA as well, clients must present a certificate it signed (mutual TLS).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // Cluster mode: the CA that signed the other nodes' certificates; a node
  // dials its peers over TLS, verifying their certificate and presenting
  // its own (tls_cert_file) as a client certificate. Empty: the client CA.
  std::string tls_peer_ca_file;
  // How often the TLS files are looked at again (a renewed certificate is
  // used for new connections without a restart).
  absl::Duration tls_reload_interval = absl::Seconds(60);
  // How late the control port sends a refusal for a missing or unknown
  // credential (auth::MetadataTokenCheck): a stranger's calls in a loop
  // then cost the server a few a second each, not thousands. Zero: at once.
  absl::Duration auth_failure_delay = absl::Milliseconds(250);
  // Protected mode: a non-loopback listen address without a token or mutual
  // TLS refuses to start unless this is set.
  bool insecure = false;
  // Control-plane sessions: TTL, cap and per-session quotas, as
  // SessionOptions except that max_lease_bytes 0 (the default here) means a
  // quarter of the pool, but at least one largest entry.
  SessionOptions sessions = DefaultServerSessions();
  // gRPC resource limits: memory for the control port's buffers and the
  // most threads serving it (grpc::ResourceQuota). A received message is
  // capped at the value limit plus the key limit plus 4 KiB of headroom
  // (MaxControlMessageBytes); the memory must hold two of them (a smaller
  // quota makes gRPC reset the stream of a large Put). 0: the larger of
  // 256 MiB and two messages.
  uint64_t grpc_memory_bytes = 0;
  int grpc_max_threads = 64;
  // The control port's HTTP/2 stream window: what a call may send before
  // the server reads it, so what a call refused on its metadata costs the
  // server at most (it is read and dropped). Fixed (no BDP-probe growth);
  // an admitted call's window grows to its message once it is read.
  // kMinGrpcStreamWindow to kMaxGrpcStreamWindow.
  uint64_t grpc_stream_window_bytes = 16 << 10;
  // Most connections open at once on the control port (net::AcceptGuard);
  // 0: a quarter of the descriptors left after the reserve, 8 to 1024
  // (net::PlanConnectionCaps). resp_limits.max_clients and
  // max_unauthenticated_clients are lowered, with a warning, when they do
  // not fit the descriptor limit beside this and the metrics port's cap.
  int grpc_max_connections = 0;

  // --- Cluster mode (architecture §19.6). Empty etcd_endpoints: single-node.
  ClusterOptions cluster;
  // Whether a single-node server publishes its fence page (architecture
  // §19.5) to one-sided readers, as a cluster node always does. Off by
  // default: with no other node that could take its keys over, a frozen
  // single node cannot serve data a newer write superseded elsewhere, and
  // without the page a cached GET is one READ instead of two. The fence
  // tests turn it on to drive the page of one process.
  bool fence_single_node = false;
  // Called (on a membership thread) when etcd says this node's lease
  // expired. The node does not exit: it stays fenced, keeps its memory and
  // registers again as a new incarnation (ClusterNode). May be empty.
  std::function<void()> on_lease_lost;
  // Tests only: the etcd client to use instead of connecting to
  // cluster.etcd_endpoints (an in-memory FakeEtcd's; the endpoints must
  // still be set, they switch cluster mode on). Empty in production.
  std::function<std::unique_ptr<etcd::EtcdClient>()> etcd_client_for_test;
};

// The largest gRPC message of the control port for `limits`: a Put of the
// largest value with the largest key, plus 4 KiB of headroom (at most
// 2^31 - 1, gRPC's int).
uint64_t MaxControlMessageBytes(const Limits& limits);

// True for a loopback listen address (127.0.0.0/8, ::1, "localhost"):
// protected mode lets these start without a token or mutual TLS.
bool IsLoopbackAddress(const std::string& address);

class KvServer {
 public:
  // Brings the server up. kFailedPrecondition (protected mode) for a
  // non-loopback listen address with no client credential (auth_token,
  // admin_token, users) unless `insecure`; kInvalidArgument for a bad
  // token or users (Identities::Build), half a TLS configuration or an
  // unreadable PEM file (named), and cluster mode without cluster_secret;
  // kInvalidArgument for bad limits or pool size, bad cluster options
  // (ClusterOptions::Validate) or --control_port=0 in cluster mode without
  // a node id (the default node id names the control port);
  // kUnavailable for --transport=rdma without a device or a port in use
  // (the metrics port included);
  // kUnavailable when no etcd endpoint answers (cluster mode);
  // otherwise the error of the step that failed (memlock, registration,
  // RDMA service, listeners, etcd registration).
  static absl::StatusOr<std::unique_ptr<KvServer>> Start(const KvServerOptions& options);
  // Shutdown(), then frees storage, the pool and the device.
  ~KvServer();
  KvServer(const KvServer&) = delete;
  KvServer& operator=(const KvServer&) = delete;

  // In cluster mode first fences the node and revokes its etcd lease (so
  // the controller fails over at once); then stops the listeners, the commit poller, the leases
  // (revoking their write keys) and the RDMA service, in that order. Idempotent.
  void Shutdown();

  // The ports actually bound (after "0 picks a free port") and the epoch.
  int control_port() const { return control_port_; }
  // The plaintext RESP port (-1 when off) and the TLS one (-1 when off).
  int resp_port() const { return resp_->port(); }
  int resp_tls_port() const { return resp_->tls_port(); }
  // The RESP port clients are told about: the TLS one when there is one.
  int ClientRespPort() const { return resp_tls_port() >= 0 ? resp_tls_port() : resp_port(); }
  // Re-reads the RESP TLS certificate files now (SIGHUP); OK without TLS.
  absl::Status ReloadTls();
  // The bound metrics port; -1 when the endpoint is off.
  int metrics_port() const { return http_ != nullptr ? http_->port() : -1; }
  uint64_t epoch() const { return epoch_; }
  // Name of the registered RDMA device, empty when serving TCP only.
  std::string rdma_device() const { return device_ ? device_->name() : ""; }
  // How long registering the pool took (zero without RDMA).
  absl::Duration registration_time() const { return registration_time_; }
  // Why RDMA is not served (empty when it is).
  const std::string& rdma_unavailable_reason() const { return rdma_reason_; }
  // The one line logged at start-up; ends with "single-node" or
  // "cluster <name> node <id> incarnation <hex> etcd <endpoints>".
  std::string StartupLine() const;
  // This node's view of the cluster; null in single-node mode.
  ClusterState* cluster_state() { return cluster_state_.get(); }
  // The cluster plane (etcd, membership, map store); null in single-node
  // mode and after Shutdown().
  ClusterNode* cluster_node() { return cluster_.get(); }
  // The node id in cluster mode, empty in single-node mode.
  const std::string& node_id() const { return node_id_; }
  // The storage engine, for tests; owned by the server.
  KvStore* store() { return store_.get(); }
  // The fence words one-sided readers check (single-node: {0, kNoExpiry});
  // the cluster layer renews or fences them. Owned by the server, never null
  // after Start().
  FencePage* fence_page() { return fence_page_.get(); }
  // The RDMA service (FenceAll()); null when the server serves TCP only.
  RdmaService* rdma_service() { return rdma_.get(); }
  // Every series of the server; lives as long as the server.
  const metrics::Registry& registry() const { return registry_; }

 private:
  explicit KvServer(const KvServerOptions& options);
  // Brings everything up in order (see the class comment). Any error stops
  // start-up; the destructor then tears down what was built.
  absl::Status Init();
  // Opens the RDMA device and its PD per options_.transport, after checking
  // RLIMIT_MEMLOCK against the pool `po` describes. OK with no device under
  // kAuto/kTcp (rdma_reason_ says why); kUnavailable under kRdma.
  absl::Status OpenRdmaDevice(const MemoryPoolOptions& po);
  // Maps the pool `po` describes and, with a PD, registers it in MRs of at
  // most the device's max_mr_size (or --max_mr_bytes). Errors from
  // MemoryPool::Create()/Register() (kResourceExhausted, kFailedPrecondition).
  absl::Status CreatePool(const MemoryPoolOptions& po);
  // Builds the gRPC control service and starts listening on control_port
  // (TLS with a certificate). kUnavailable when the port cannot be bound;
  // kInvalidArgument for an unreadable PEM file.
  absl::Status StartControlPlane();
  // Raises the descriptor limit to the hard limit, logs it, and sets the
  // control and RESP connection caps that fit under it beside the metrics
  // port's (kInvalidArgument when they cannot: net::PlanConnectionCaps).
  absl::Status PlanDescriptors();
  // The series of the descriptor budget and the control port's guard.
  void RegisterDescriptorMetrics();
  // The control port's credentials: TLS (mutual with a client CA) when a
  // certificate is configured, else insecure. kInvalidArgument naming an
  // unreadable PEM file.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ControlCredentials();
  // Cluster mode: the credentials of calls to other nodes; null (plaintext)
  // without --tls_cert. kInvalidArgument without a CA to verify peers.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> PeerCredentials() const;
  // Protected mode and the consistency of the security options; logs the
  // --insecure warning. Runs first in Init().
  absl::Status CheckSecurityOptions() const;
  // Every credential the options name (common/auth/credentials.h).
  auth::Credentials Credentials() const;
  // The control port's ResourceQuota memory (options_.grpc_memory_bytes, or
  // its default for 0). kInvalidArgument when it cannot hold two of the
  // largest messages.
  absl::StatusOr<uint64_t> GrpcMemoryBytes() const;
  // Registers kvstore_build_info and kvstore_uptime_seconds.
  void RegisterProcessMetrics();
  // Starts the RESP/TCP data port on the store (limits, password, INFO).
  absl::Status StartRespServer();
  // Starts GET /metrics when options_.metrics_port >= 0; kUnavailable
  // naming the address when it cannot bind.
  absl::Status StartMetricsEndpoint();
  // Cluster mode, before anything is bound: the options, the node id, the
  // ClusterState, and a fenced page until the lease is proven.
  absl::Status PrepareCluster();
  // Cluster mode, after the listeners: registers in etcd (ClusterNode) and
  // points the replicator's map editor at it. (kv_server_cluster.cc)
  absl::Status StartCluster();
  // The KvCluster gRPC service (always: in single-node mode it answers
  // "single-node mode") and, in cluster mode, the replica installer it
  // serves Replicate and SyncShard with. Needs the store. (kv_server_cluster.cc)
  void BuildClusterService();
  std::string ClusterPart() const;
  // Logs a warning when eviction would keep over 5 % of the limit free.
  void WarnOfEvictionHeadroom() const;
  // The RESP INFO text: the Redis-like sections and # Metrics, all from one
  // snapshot of registry_.
  std::string InfoText() const;
  // The store's options, from the server's (Init()).
  KvStoreOptions StoreOptions();

  const KvServerOptions options_;
  // Declared before every component: they keep pointers into it, so it is
  // destroyed after all of them.
  metrics::Registry registry_;
  uint64_t epoch_ = 0;
  // Before every component that may read them (rdma_ registers the page, so
  // it must outlive that MR); the ClusterNode that writes them is destroyed
  // first (Shutdown()).
  std::unique_ptr<FencePage> fence_page_;
  std::unique_ptr<ClusterState> cluster_state_;
  std::string node_id_;
  std::optional<rdma::Device> device_;
  std::optional<rdma::ProtectionDomain> pd_;
  std::string rdma_reason_;
  absl::Duration registration_time_;
  std::unique_ptr<MemoryPool> pool_;
  // Cluster mode: the store's write hook and what it needs, so declared
  // (and destroyed after) the store; null in single-node mode.
  std::unique_ptr<ShardSeqs> seqs_;
  // Every call to another server (cluster mode); declared before all its
  // users, so destroyed after them.
  std::unique_ptr<PeerClient> peers_;
  std::unique_ptr<ForwardingShardMapEditor> editor_;
  // The replicator's RDMA links to backups (cluster mode with a device);
  // declared before it, so destroyed after it.
  std::unique_ptr<RdmaReplicaLinks> replica_links_;
  std::unique_ptr<Replicator> replicator_;
  std::unique_ptr<KvStore> store_;
  // Installs replicated writes into store_ and syncs shards; cluster mode.
  std::unique_ptr<ReplicaInstaller> installer_;
  // The peer socket's listener: replication streams into installer_
  // (cluster mode without TLS). Stops in Shutdown().
  std::unique_ptr<PeerListener> peer_listener_;
  // A new primary makes its in-sync backups equal to itself before its
  // first acknowledged write; cluster mode. Stops in Shutdown().
  std::unique_ptr<ShardReconciler> reconciler_;
  // Slot migration (§19.9): the target's imports and the source's driver;
  // cluster mode. The driver stops first in Shutdown().
  std::unique_ptr<SlotImporter> importer_;
  std::unique_ptr<MigrationDriver> migration_driver_;
  // Cluster mode: drops entries of slots this node has no role for.
  std::unique_ptr<SlotJanitor> janitor_;
  // Served on the control port; destroyed after grpc_ stops.
  std::unique_ptr<ClusterService> cluster_service_;
  // The service's admin requests (cluster mode); its controller is unset
  // before cluster_ goes.
  std::unique_ptr<ControllerProxy> controller_proxy_;
  // Shutdown() destroys leases_ before rdma_, explicitly: the leases own
  // write keys that rdma_ made, and rdma_'s poller commits through leases_
  // (RdmaService's lifetime rules).
  std::unique_ptr<LeaseTable> leases_;
  std::unique_ptr<RdmaService> rdma_;
  // The RESP TLS port's certificates (before resp_: it points here).
  std::unique_ptr<tls::ReloadingServerContext> resp_tls_;
  std::unique_ptr<RespServer> resp_;
  std::unique_ptr<KvControlServiceImpl> service_;
  // The control port's early credential check (null when there is no
  // credential); kept past grpc_ (its delayed refusals are sent when the
  // server stops).
  std::shared_ptr<auth::MetadataTokenCheck> control_check_;
  std::unique_ptr<grpc::Server> grpc_;
  int control_port_ = 0;
  uint64_t grpc_memory_bytes_ = 0;  // GrpcMemoryBytes(), set by Init()
  // Set by PlanDescriptors(): the soft RLIMIT_NOFILE after raising it and
  // the per-port connection caps that fit under it.
  uint64_t descriptor_limit_ = 0;
  int grpc_max_connections_ = 0;
  int resp_max_clients_ = 0;
  int resp_max_unauthenticated_clients_ = 0;
  // kvstore_descriptors_*, kvstore_grpc_connections*: read the process and
  // net::AcceptGuard (registered once the control port is bound).
  std::vector<metrics::CallbackHandle> descriptor_metrics_;
  absl::Time started_;
  bool shut_down_ = false;
  std::unique_ptr<metrics::MetricsHttpServer> http_;
  std::unique_ptr<ClusterNode> cluster_;
  // kvstore_uptime_seconds reads started_; declared last, so it is
  // unregistered first.
  metrics::CallbackHandle uptime_gauge_;
};

}  // namespace server
}  // namespace kvstore

#endif  // KVSTORE_SERVER_KV_SERVER_H_
