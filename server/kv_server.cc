// Copyright 2026 The kvstore Authors.

#include "server/kv_server.h"

#include <arpa/inet.h>

#include <algorithm>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/auth/authenticator.h"
#include "common/auth/credentials.h"
#include "common/auth/metadata_token_check.h"
#include "common/auth/token.h"
#include "common/byte_size.h"
#include "common/metrics/exposition.h"
#include "common/status_macros.h"
#include "common/tls/grpc_tls.h"
#include "common/tls/ssl_context.h"
#include "common/version.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "server/cluster/cluster_node.h"
#include "server/cluster/cluster_service.h"
#include "server/cluster/controller_proxy.h"
#include "server/cluster/membership/shard_map_editor.h"
#include "server/cluster/migration/migration_driver.h"
#include "server/cluster/migration/slot_importer.h"
#include "server/cluster/migration/slot_janitor.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/peer/peer_listener.h"
#include "server/cluster/replication/replica_installer.h"
#include "server/cluster/replication/replicator.h"
#include "server/cluster/replication/shard_reconciler.h"
#include "server/cluster/replication/shard_seqs.h"
#include "server/control/control_service.h"
#include "server/net/accept_guard.h"

namespace kvstore {
namespace server {

// Plenty for a TLS handshake and the HTTP/2 preface on any network a
// kvserver is reached over.
constexpr absl::Duration kControlHandshakeTimeout = absl::Seconds(10);

uint64_t MaxControlMessageBytes(const Limits& limits) {
  return std::min<uint64_t>(INT32_MAX, limits.max_value_bytes + limits.max_key_bytes + 4096);
}

absl::StatusOr<uint64_t> KvServer::GrpcMemoryBytes() const {
  const uint64_t two_messages = 2 * MaxControlMessageBytes(options_.limits);
  if (options_.grpc_memory_bytes == 0) return std::max<uint64_t>(256ull << 20, two_messages);
  if (options_.grpc_memory_bytes < two_messages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc_memory=", FormatByteSize(options_.grpc_memory_bytes),
        " cannot hold two of the largest control messages (", FormatByteSize(two_messages),
        " with --max_value_bytes=", FormatByteSize(options_.limits.max_value_bytes),
        "); raise it or leave it at 0"));
  }
  return options_.grpc_memory_bytes;
}

bool IsLoopbackAddress(const std::string& address) {
  if (address == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  // A host name other than localhost may resolve to anything.
  return false;
}

KvServer::KvServer(const KvServerOptions& options)
    : options_(options), fence_page_(std::make_unique<FencePage>()) {}

auth::Credentials KvServer::Credentials() const {
  auth::Credentials c;
  c.data_token = options_.auth_token;
  c.admin_token = options_.admin_token;
  c.peer_secret = options_.cluster_secret;
  c.users = options_.users;
  return c;
}

absl::Status KvServer::CheckSecurityOptions() const {
  absl::StatusOr<auth::Identities> ids = auth::Identities::Build(Credentials());
  if (!ids.ok()) return ids.status();

  const bool has_cert = !options_.tls_cert_file.empty();
  if (has_cert != !options_.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (!options_.tls_client_ca_file.empty() && !has_cert) {
    return absl::InvalidArgumentError(
        "--tls_client_ca needs --tls_cert and --tls_key (mutual TLS is TLS first)");
  }
  // What a stranger's upload may make the control port read (StartControlPlane).
  if (options_.grpc_stream_window_bytes < kMinGrpcStreamWindow ||
      options_.grpc_stream_window_bytes > kMaxGrpcStreamWindow) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc_stream_window must be between ",
                                                   FormatByteSize(kMinGrpcStreamWindow), " and ",
                                                   FormatByteSize(kMaxGrpcStreamWindow)));
  }
  // Only the tokens guard the RESP port (Redis clients know no certificates),
  // so mutual TLS alone would leave it open to anyone: a client credential
  // is required (the cluster secret is none: it admits peers only).
  const bool guarded = !ids->open();
  if (guarded || IsLoopbackAddress(options_.listen_address)) return absl::OkStatus();
  if (!options_.insecure) {
    return absl::FailedPreconditionError(absl::StrCat(
        "protected mode: --listen=", options_.listen_address,
        " is reachable from other hosts but no client authentication is configured. Set "
        "--auth_token_file=PATH (the data clients' token for gRPC and RESP; or --users_file; "
        "mutual TLS with "
        "--tls_cert, --tls_key and --tls_client_ca may be added but guards only the control "
        "port), or listen on 127.0.0.1, or pass --insecure to serve anyone who can reach the "
        "ports"));
  }
  LOG(WARNING) << "*** --insecure: serving " << options_.listen_address
               << " WITHOUT client authentication: anyone who can reach the control, RESP and "
                  "RDMA ports can read, overwrite and delete every key. ***";
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KvServer>> KvServer::Start(const KvServerOptions& options) {
  std::unique_ptr<KvServer> server(new KvServer(options));
  // On an error the half-built server is destroyed here, which shuts down
  // whatever Init() had started.
  KV_RETURN_IF_ERROR(server->Init());
  return server;
}

KvStoreOptions KvServer::StoreOptions() {
  KvStoreOptions so;
  so.segment_bytes = options_.segment_bytes;
  so.grace_period = options_.grace_period;
  so.expiry_interval = options_.expiry_interval;
  so.max_memory_bytes = options_.max_memory_bytes;
  so.eviction_policy = options_.eviction_policy;
  so.limits = options_.limits;
  // The index is seeded with the epoch: bucket positions change with every
  // start, and clients get the seed in the handshake.
  so.index_seed = epoch_;
  so.registry = &registry_;
  so.write_hook = replicator_.get();  // null in single-node mode
  return so;
}

absl::Status KvServer::Init() {
  started_ = absl::Now();
  // A fresh epoch per start: every rkey and lease of an earlier start is void.
  std::random_device rd;
  epoch_ = (uint64_t{rd()} << 32 | rd()) | 1;

  // Before anything is mapped or bound: protected mode and the TLS files.
  KV_RETURN_IF_ERROR(CheckSecurityOptions());
  KV_RETURN_IF_ERROR(PrepareCluster());
  KV_RETURN_IF_ERROR(options_.limits.Validate());
  KV_ASSIGN_OR_RETURN(grpc_memory_bytes_, GrpcMemoryBytes());
  RegisterProcessMetrics();
  KV_RETURN_IF_ERROR(PlanDescriptors());
  if (options_.pool_bytes > layout::kMaxPoolBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--pool_size is limited to ",
                                                   FormatByteSize(layout::kMaxPoolBytes),
                                                   " by the slot format"));
  }
  // Default: one bucket per KiB of pool, and never a tiny index.
  uint64_t buckets = options_.index_buckets;
  if (buckets == 0) buckets = std::max<uint64_t>(1024, options_.pool_bytes / 1024);

  MemoryPoolOptions po;
  po.data_bytes = options_.pool_bytes;
  po.index_bytes = buckets * layout::kBucketBytes;
  po.hugepages = options_.hugepages;
  po.transparent_hugepages = options_.transparent_hugepages;

  // RDMA first: the memlock check must fail before we map gigabytes.
  KV_RETURN_IF_ERROR(OpenRdmaDevice(po));

  KV_RETURN_IF_ERROR(CreatePool(po));

  KV_ASSIGN_OR_RETURN(store_, KvStore::Create(pool_.get(), StoreOptions()));
  WarnOfEvictionHeadroom();

  LeaseOptions lo;
  lo.ttl = options_.lease_ttl;
  lo.registry = &registry_;
  lo.max_lease_bytes =
      layout::EntryBytes(options_.limits.max_key_bytes, options_.limits.max_value_bytes);
  KV_RETURN_IF_ERROR(lo.Validate());
  // A lease's write key (made by rdma_->BindLease() at grant time) belongs
  // to the lease: LeaseTable revokes it before the chunk goes back.
  leases_ = std::make_unique<LeaseTable>(store_.get(), lo);
  // After the lease table: its poller commits through it, and its write keys
  // are handed to it.
  if (pd_) {
    RdmaServiceOptions rso;
    rso.gid_ipv4 = options_.rdma_ip;
    rso.commit_credits = options_.rdma_commit_credits;
    rso.idle_probe_after = options_.rdma_idle_probe_after;
    rso.registry = &registry_;
    // Cluster nodes only, unless asked (KvServerOptions::fence_single_node).
    const bool fenced = !options_.cluster.etcd_endpoints.empty() || options_.fence_single_node;
    rso.fence_page = fenced ? fence_page_.get() : nullptr;
    KV_ASSIGN_OR_RETURN(
        rdma_, RdmaService::Start(&*device_, &*pd_, pool_.get(), store_.get(), leases_.get(), rso));
  }

  KV_RETURN_IF_ERROR(StartRespServer());

  // Before gRPC: a metrics port in use fails start-up before any client
  // can handshake.
  KV_RETURN_IF_ERROR(StartMetricsEndpoint());
  // Once gRPC listens, clients can handshake and find everything up (in
  // cluster mode they are refused, kClusterDown, until the map arrives).
  KV_RETURN_IF_ERROR(StartControlPlane());
  // Last: the member key carries the bound addresses.
  return StartCluster();
}

absl::Status KvServer::ReloadTls() {
  if (resp_tls_ == nullptr) return absl::OkStatus();
  return resp_tls_->Reload();
}

absl::Status KvServer::StartRespServer() {
  // RESP/TCP serves the same store; its INFO text comes from InfoText().
  RespServerOptions ro;
  ro.bind_address = options_.listen_address;
  ro.port = options_.resp_port;
  ro.threads = options_.resp_threads;
  ro.idle_timeout = options_.idle_timeout;
  ro.request_timeout = options_.request_timeout;
  ro.info = [this] { return InfoText(); };
  ro.registry = &registry_;
  // The same users as on the control port (AUTH [user] pass, HELLO AUTH).
  ro.credentials = Credentials();
  ro.cluster = cluster_state_.get();
  ro.limits = options_.resp_limits;
  ro.limits.max_clients = resp_max_clients_;
  ro.limits.max_unauthenticated_clients = resp_max_unauthenticated_clients_;
  ro.limits.max_inflight_set_bytes = options_.pool_bytes / 100 * options_.resp_inflight_set_percent;
  if (options_.resp_tls_port >= 0) {
    // RESP over TLS uses the control port's certificate, key and client CA.
    if (options_.tls_cert_file.empty()) {
      return absl::InvalidArgumentError("--resp_tls_port needs --tls_cert and --tls_key");
    }
    tls::PemFiles files;
    files.cert = options_.tls_cert_file;
    files.key = options_.tls_key_file;
    files.ca = options_.tls_client_ca_file;
    files.ca_flag = "tls_client_ca";
    KV_ASSIGN_OR_RETURN(resp_tls_, tls::ReloadingServerContext::Create(files));
    ro.tls_port = options_.resp_tls_port;
    ro.tls_context = resp_tls_.get();
    ro.plaintext = options_.resp_plaintext_with_tls;
  }
  KV_ASSIGN_OR_RETURN(resp_, RespServer::Start(store_.get(), ro));
  // The RESP loops are awake under write load: they read the backups'
  // replies too, a wake-up less per replicated batch (fd_watch.h).
  if (replicator_ != nullptr) replicator_->set_reply_watcher(resp_.get());
  return absl::OkStatus();
}

absl::Status KvServer::CreatePool(const MemoryPoolOptions& po) {
  KV_ASSIGN_OR_RETURN(pool_, MemoryPool::Create(po));
  // The device caps one MR's size, so the pool is registered in pieces of at
  // most that (--max_mr_bytes lowers it further, to test many pieces).
  if (pd_) {
    uint64_t max_mr = device_->limits().max_mr_size;
    if (options_.max_mr_bytes != 0 && (max_mr == 0 || options_.max_mr_bytes < max_mr)) {
      max_mr = options_.max_mr_bytes;
    }
    KV_ASSIGN_OR_RETURN(registration_time_, pool_->Register(*pd_, max_mr, options_.segment_bytes));
  }
  return absl::OkStatus();
}

void KvServer::RegisterProcessMetrics() {
  registry_
      .AddGauge("kvstore_build_info", "Always 1; the version label says which kvserver runs.",
                {{"version", std::string(kVersion)}})
      ->Set(1);
  uptime_gauge_ =
      registry_.AddCallbackGauge("kvstore_uptime_seconds", "Seconds since this server started.", {},
                                 [this] { return absl::ToInt64Seconds(absl::Now() - started_); });
}

absl::Status KvServer::StartMetricsEndpoint() {
  if (options_.metrics_port < 0) return absl::OkStatus();
  http_ = std::make_unique<metrics::MetricsHttpServer>(&registry_);
  auto port = http_->Start(options_.metrics_address, options_.metrics_port);
  if (!port.ok()) {
    // The same code as the other listeners' bind failures, so kvserver
    // exits the same way; the endpoint's message says why (port in use...).
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", options_.metrics_address,
                                               ":", options_.metrics_port, ": ",
                                               port.status().message()));
  }
  return absl::OkStatus();
}

absl::Status KvServer::OpenRdmaDevice(const MemoryPoolOptions& po) {
  // kTcp never touches verbs; kAuto falls back to TCP and records why.
  if (options_.transport != ServerTransport::kTcp) {
    auto dev = rdma::Device::Open(options_.rdma_device);
    if (dev.ok()) {
      // Lease chunks are registered again as MRs of their own, and each
      // registration counts: up to the pool twice, plus the index.
      KV_RETURN_IF_ERROR(CheckMemlockLimit(2 * po.data_bytes + po.index_bytes));
      KV_ASSIGN_OR_RETURN(auto pd, rdma::ProtectionDomain::Create(*dev));
      device_.emplace(std::move(*dev));
      pd_.emplace(std::move(pd));
    } else if (options_.transport == ServerTransport::kRdma) {
      // The operator asked for RDMA: serving TCP instead would hide it.
      return absl::UnavailableError(
          absl::StrCat("--transport=rdma but no RDMA device is usable: ", dev.status().message()));
    } else {
      rdma_reason_ = std::string(dev.status().message());
    }
  } else {
    rdma_reason_ = "disabled by --transport=tcp";
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> KvServer::ControlCredentials() {
  // With any credential, calls are refused on their metadata, before their
  // body is read (auth::MetadataTokenCheck), by the services' own rule:
  // a data client's upload to a peer or admin RPC is refused as early as a
  // stranger's. Health checks need no credential.
  const auth::Credentials credentials = Credentials();
  absl::StatusOr<auth::Identities> ids = auth::Identities::Build(credentials);
  if (!ids.ok()) return ids.status();
  if (!ids->open() || ids->has_peers()) {
    auth::MetadataTokenCheck::Options check;
    check.open_prefixes = {"/grpc.health.v1.Health/"};
    check.refusal_delay = options_.auth_failure_delay;
    control_check_ = std::make_shared<auth::MetadataTokenCheck>(
        std::make_shared<const auth::Authenticator>(credentials, &registry_), std::move(check),
        &registry_);
  }
  if (options_.tls_cert_file.empty()) {
    return auth::ControlPortCredentials(grpc_insecure_server_credentials_create(), control_check_);
  }
  // With a client CA, a client without a certificate it signed never gets
  // past the TLS handshake. The files are watched: a renewed certificate
  // serves new connections without a restart.
  tls::PemFiles files;
  files.cert = options_.tls_cert_file;
  files.key = options_.tls_key_file;
  files.ca = options_.tls_client_ca_file;
  files.ca_flag = "tls_client_ca";
  KV_ASSIGN_OR_RETURN(grpc_server_credentials * core,
                      tls::ReloadingServerCredentials(files, options_.tls_reload_interval));
  return auth::ControlPortCredentials(core, control_check_);
}

absl::Status KvServer::StartControlPlane() {
  // What the service reads from; all of it outlives the service.
  ControlServiceDeps deps;
  deps.store = store_.get();
  deps.leases = leases_.get();
  deps.pool = pool_.get();
  deps.epoch = epoch_;
  deps.resp_address = absl::StrCat(options_.listen_address, ":", ClientRespPort());
  deps.resp_tls = resp_->tls_port() >= 0;
  deps.rdma_device = rdma_device();
  deps.rdma = rdma_.get();
  deps.cluster = cluster_state_.get();
  // Static facts for Stats.info; the service adds its own.
  deps.info["transports"] = device_ ? "rdma,tcp" : "tcp";
  deps.info["pool"] = FormatByteSize(options_.pool_bytes);
  deps.info["rdma_unavailable_reason"] = rdma_reason_;
  deps.info["registration_ms"] = absl::StrCat(absl::ToInt64Milliseconds(registration_time_));
  // Stats.counters is this registry's snapshot: every component's series.
  deps.registry = &registry_;
  deps.credentials = Credentials();
  // Scan pages stop after as many index buckets as RESP SCAN's.
  deps.scan_max_buckets = options_.resp_limits.scan_max_buckets;
  deps.sessions = options_.sessions;
  if (deps.sessions.max_lease_bytes == 0) {
    // A quarter of the pool, but always room for one largest entry.
    deps.sessions.max_lease_bytes =
        std::max<uint64_t>(options_.pool_bytes / 4, leases_->options().max_lease_bytes);
  }
  KV_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, ControlCredentials());
  service_ = std::make_unique<KvControlServiceImpl>(std::move(deps));

  // Health checks report SERVING only once everything above is up.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(options_.listen_address, ":", options_.control_port),
                           credentials, &control_port_);
  // Bounds what clients can make the control port hold: buffer memory and
  // handler threads (finding 6).
  grpc::ResourceQuota quota("kvstore-control");
  quota.Resize(grpc_memory_bytes_);
  quota.SetMaxThreads(options_.grpc_max_threads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(service_.get());
  BuildClusterService();
  builder.RegisterService(cluster_service_.get());
  // gRPC sets SO_REUSEPORT by default; refuse to share a port with another
  // server instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A connection that has not sent its HTTP/2 preface (and TLS handshake)
  // within this time is closed: idle sockets hold a place under
  // grpc_max_connections_ for seconds, not gRPC's default two minutes.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(kControlHandshakeTimeout)));
  // Every call may send one HTTP/2 stream window of its body before the
  // server asks for it, and a call refused on its metadata sends exactly
  // that: the window is what a stranger's upload costs. gRPC's BDP probe
  // would grow it to megabytes on a fast link; a fixed small window keeps
  // each refusal cheap, and an admitted call's window still grows to its
  // message's size once its handler reads it (docs/performance.md).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                             static_cast<int>(options_.grpc_stream_window_bytes));
  // Values up to the value limit travel through the slow-path Put/Get.
  const int max_msg = static_cast<int>(MaxControlMessageBytes(options_.limits));
  builder.SetMaxReceiveMessageSize(max_msg);
  builder.SetMaxSendMessageSize(max_msg);
  grpc_ = builder.BuildAndStart();
  if (grpc_ == nullptr || control_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ",
                                               options_.listen_address, ":", options_.control_port,
                                               " (port in use or address not local?)"));
  }
  // From here on the listener's accept4 is guarded: the cap, and no
  // EMFILE that stops the listener (net::AcceptGuard).
  net::AcceptGuard::Get().LimitPort(control_port_, grpc_max_connections_);
  RegisterDescriptorMetrics();
  grpc_->GetHealthCheckService()->SetServingStatus(true);
  grpc_->GetHealthCheckService()->SetServingStatus("kvstore.v1.KvControl", true);
  return absl::OkStatus();
}

// "single-node" or "cluster <name> node <id> incarnation <lease> etcd <endpoints>".
std::string KvServer::ClusterPart() const {
  if (cluster_state_ == nullptr) return "single-node";
  const std::string incarnation =
      cluster_ != nullptr ? absl::StrCat(absl::Hex(cluster_->incarnation())) : "?";
  return absl::StrCat("cluster ", options_.cluster.cluster_name, " node ", node_id_,
                      " incarnation ", incarnation, " etcd ",
                      absl::StrJoin(options_.cluster.etcd_endpoints, ","));
}

// A cache in a pool of few large segments loses a large share of its limit
// to the free segments eviction keeps (KvStore::EvictionHeadroomBytes); the
// remedy, smaller segments, is the operator's to choose.
void KvServer::WarnOfEvictionHeadroom() const {
  if (store_->eviction_policy() == EvictionPolicy::kNoEviction) return;
  const uint64_t limit = store_->max_memory() != 0 ? store_->max_memory() : store_->pool_bytes();
  const uint64_t headroom = store_->EvictionHeadroomBytes();
  if (headroom * 20 <= limit) return;  // 5 % or less: not worth a line
  const uint64_t suggested = std::max<uint64_t>(64 << 10, limit / 64 / 1024 * 1024);
  LOG(WARNING) << "eviction keeps " << FormatByteSize(headroom) << " free ("
               << headroom * 100 / limit << "% of the " << FormatByteSize(limit)
               << " limit) with --segment_size=" << FormatByteSize(store_->options().segment_bytes)
               << "; --segment_size=" << suggested / 1024 << "K would leave more of it to keys";
}

// One line that says what this start got: pool, index, RDMA (or why not),
// ports and epoch. Operators grep logs for "kvserver up".
std::string KvServer::StartupLine() const {
  std::string rdma = device_ ? absl::StrCat("rdma on ", device_->name(), " (registered in ",
                                            absl::FormatDuration(registration_time_), ")")
                             : absl::StrCat("rdma off (", rdma_reason_, ")");
  return absl::StrCat(
      "kvserver up: pool ", FormatByteSize(pool_->data_bytes()),
      pool_->hugepages() ? " on 2 MiB huge pages" : "", ", index ",
      store_->index().geometry().bucket_count, " buckets (", FormatByteSize(pool_->index_bytes()),
      "), ", rdma, ", transports ", device_ ? "rdma+tcp" : "tcp", ", control ",
      options_.listen_address, ":", control_port_, ", resp ", options_.listen_address, ":",
      ClientRespPort(), resp_->tls_port() >= 0 ? " (tls)" : "",
      http_ != nullptr ? absl::StrCat(", metrics ", options_.metrics_address, ":", http_->port())
                       : "",
      ", epoch ", absl::Hex(epoch_), ", ", ClusterPart());
}

// The RESP INFO reply, in Redis's section format (CRLF lines). Stock Redis
// tools read redis_version, so it names a version they accept. Every number
// comes from one snapshot of the registry, so the Redis-style fields agree
// with the # Metrics lines (and with Stats and /metrics taken at that time).
std::string KvServer::InfoText() const {
  const std::map<std::string, uint64_t> flat = metrics::FlattenSnapshot(registry_.TakeSnapshot());
  // A series missing from the snapshot reads as 0 (none is, once started).
  auto get = [&flat](const char* series) {
    auto it = flat.find(series);
    return it == flat.end() ? uint64_t{0} : it->second;
  };
  std::string text = absl::StrCat(
      "# Server\r\nredis_version:7.0.0\r\nkvstore_version:", kVersion,
      "\r\nepoch:", absl::Hex(epoch_), "\r\ntransports:", device_ ? "rdma,tcp" : "tcp",
      "\r\nuptime_in_seconds:", get("kvstore_uptime_seconds"),
      "\r\n# Memory\r\nused_memory:", store_->UsedBytes(), "\r\nmaxmemory:", store_->max_memory(),
      "\r\nmaxmemory_policy:", PolicyName(store_->eviction_policy()),
      "\r\npool_bytes:", get("kvstore_pool_bytes"),
      "\r\nlive_bytes:", get("kvstore_pool_live_bytes"),
      "\r\nsegments_total:", get("kvstore_pool_segments"),
      "\r\nsegments_free:", get("kvstore_pool_segments_free"),
      "\r\nindex_capacity:", get("kvstore_index_slots"), "\r\nindex_load_factor:",
      absl::StrFormat("%.3f", get("kvstore_index_load_permille") / 1000.0),
      "\r\nindex_full_errors:", get("kvstore_index_full_errors_total"),
      "\r\n# Stats\r\nexpired_keys:", get("kvstore_expired_keys_total"),
      "\r\nevicted_keys:", get("kvstore_evicted_keys_total"),
      "\r\nkeyspace_hits:", get("kvstore_keyspace_hits_total"),
      "\r\nkeyspace_misses:", get("kvstore_keyspace_misses_total"),
      "\r\n# Keyspace\r\ndb0:keys=", get("kvstore_keys"),
      ",expires=", get("kvstore_keys_with_expiry"), "\r\n# Metrics\r\n");
  // Flat keys hold no ':' or newline (FlattenSnapshot's contract), so each
  // is one parseable "key:value" line.
  for (const auto& [series, value] : flat) absl::StrAppend(&text, series, ":", value, "\r\n");
  return text;
}

void KvServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // Cluster mode: fenced and the lease revoked before anything else, so
  // the controller can promote a backup at once, and nothing here serves
  // meanwhile.
  // The ClusterNode object stays until gRPC stopped: a Failover call in
  // flight may still read it.
  if (cluster_) cluster_->Shutdown();
  // They edit the map and call peers: gone before the editor is unset.
  migration_driver_.reset();
  reconciler_.reset();
  if (editor_) editor_->Set(nullptr);
  // Listeners first, so no new request arrives while the rest goes; gRPC
  // gets 2 s to finish the calls in flight. The scrape endpoint goes first:
  // it reads every component through the registry's callbacks.
  if (http_) http_->Stop();
  // Installs in progress finish; the primaries' streams to us break.
  if (peer_listener_) peer_listener_->Stop();
  // Refusals held back by the early check go now: gRPC's shutdown waits
  // for their calls.
  if (control_check_) control_check_->StopDelaying();
  if (grpc_) grpc_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  if (control_port_ != 0) net::AcceptGuard::Get().ForgetPort(control_port_);
  if (controller_proxy_) controller_proxy_->set_controller(nullptr);
  cluster_.reset();
  // The session sweeper disconnects queue pairs: it stops before rdma_ goes.
  if (service_) service_->StopSweeper();
  // The streams read their replies on their own threads again (the loops
  // hand the sockets back as they stop) and watch nothing new.
  if (replicator_) replicator_->set_reply_watcher(nullptr);
  if (resp_) resp_->Stop();
  // Commits stop before the lease table goes (RdmaService::StopPoller);
  // destroying the table ends every lease and so revokes its write key
  // (window) while the service and the queue pairs still exist; then the
  // service and its QPs go.
  if (rdma_) rdma_->StopPoller();
  leases_.reset();
  rdma_.reset();
}

KvServer::~KvServer() {
  // What Shutdown() left, in reverse order of construction.
  Shutdown();
  grpc_.reset();
  control_check_.reset();
  service_.reset();
  cluster_service_.reset();
  peer_listener_.reset();  // its threads install into installer_
  // Its sync thread installs into the store.
  installer_.reset();
  importer_.reset();
  // Its thread deletes from the store (cluster mode).
  janitor_.reset();
  resp_.reset();
  store_.reset();
  pool_.reset();  // deregisters before the PD goes
  pd_.reset();
  device_.reset();
}

}  // namespace server
}  // namespace kvstore
