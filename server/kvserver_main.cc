// Copyright 2026 The kvstore Authors.
//
// kvserver: one kvstore server. See --help and docs/operations.md.
//
// This file only turns flags into KvServerOptions, starts the server, writes
// the ready file and waits for a stop signal; KvServer does the rest.

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/byte_size.h"
#include "common/failpoint/failpoint.h"
#include "glog/logging.h"
#include "server/cluster/membership/cluster_options.h"
#include "server/kv_server.h"
#include "server/kvserver_main_secrets.h"

ABSL_FLAG(std::string, listen, "127.0.0.1",
          "IPv4 address to bind the control and data ports to (0.0.0.0 for all interfaces)");
ABSL_FLAG(int, control_port, 7300, "gRPC control-plane port (0: pick a free port)");
ABSL_FLAG(int, resp_port, 6380, "RESP2/TCP data port (0: pick a free port)");
ABSL_FLAG(int, resp_threads, 2, "epoll event loops serving the RESP port");
ABSL_FLAG(int, resp_tls_port, -1,
          "RESP over TLS on this port (-1: off, 0: pick a free port), with --tls_cert/--tls_key "
          "(and client certificates with --tls_client_ca); redis-cli --tls works. With it the "
          "plaintext --resp_port is off unless --resp_plaintext");
ABSL_FLAG(bool, resp_plaintext, false,
          "with --resp_tls_port: serve plaintext RESP on --resp_port as well");
// Fault tests only (common/failpoint/failpoint.h): stops, fails or delays
// this node at named steps. Only a value given explicitly here arms a point.
ABSL_FLAG(std::string, failpoints, "",
          "FOR FAULT TESTS ONLY: NAME=ACTION,... arms failpoints (error(CODE), sleep(DURATION), "
          "pause, exit); see common/failpoint/failpoint.h");
// Sizes are strings ("512M") read by SizeFlag() below, so that every size
// flag takes the same K/M/G suffixes.
ABSL_FLAG(std::string, pool_size, "512M", "memory pool for entries (K/M/G suffixes)");
ABSL_FLAG(uint64_t, index_buckets, 0,
          "index buckets of 8 slots each (0: one per KiB of pool); the index is separate memory");
ABSL_FLAG(bool, hugepages, false,
          "back the pool with 2 MiB huge pages (vm.nr_hugepages must allow it)");
ABSL_FLAG(bool, transparent_hugepages, false,
          "without --hugepages, ask for transparent huge pages for both arenas (fewer TLB misses "
          "with a large pool; start-up can take seconds per GiB)");
// 4 MiB and 4 KiB, not 4 MiB: see kDefaultSegmentBytes in kv_store.h.
ABSL_FLAG(std::string, segment_size, "4100K",
          "allocation and cleaning unit of the pool (the 4 KiB over 4 MiB let four 1 MiB values "
          "with their headers and keys fill one)");
ABSL_FLAG(std::string, max_key_bytes, "1K", "largest key accepted");
ABSL_FLAG(std::string, max_value_bytes, "64M", "largest value accepted");
ABSL_FLAG(uint64_t, max_batch_keys, 4096, "most keys in one MGET/MSET/MultiGet/MultiPut");
// Clients are told half of it as the longest one-sided read they may trust:
// a value whose READ takes longer is always served by the server instead.
ABSL_FLAG(absl::Duration, grace_period, absl::Milliseconds(500),
          "how long superseded entries stay readable for in-flight one-sided reads");
ABSL_FLAG(absl::Duration, expiry_interval, absl::Milliseconds(100),
          "how often keys whose expiry time has passed are deleted (they read as absent at "
          "once regardless; 0: never, as for tests of readers)");
ABSL_FLAG(std::string, maxmemory, "0",
          "memory limit for entries: a size (768M, 2G) or a percentage of --pool_size (75%); "
          "0: the whole pool. Changeable with CONFIG SET maxmemory");
ABSL_FLAG(std::string, maxmemory_policy, "noeviction",
          "at the limit: noeviction (refuse writes with -OOM), allkeys-lru, allkeys-lfu, "
          "volatile-lru, volatile-lfu or volatile-ttl (evict). CONFIG SET maxmemory-policy");
ABSL_FLAG(absl::Duration, lease_ttl, absl::Seconds(10),
          "lifetime of a write lease without renewal");
ABSL_FLAG(absl::Duration, idle_timeout, absl::Minutes(5),
          "close RESP connections idle this long (0: never)");
ABSL_FLAG(absl::Duration, request_timeout, absl::Seconds(30),
          "close RESP connections whose request stays incomplete this long");
ABSL_FLAG(std::string, transport, "auto",
          "auto: serve RDMA when a device exists, TCP always; rdma: fail without a device; tcp: "
          "never use verbs");
ABSL_FLAG(std::string, rdma_device, "",
          "RDMA device to use (default: the first with an active port)");
ABSL_FLAG(std::string, rdma_ip, "",
          "IPv4 address whose RoCE v2 GID the server's queue pairs use (default: the first)");
ABSL_FLAG(uint32_t, rdma_commit_credits, 64,
          "RDMA commits a client may have in flight per connection");
ABSL_FLAG(
    absl::Duration, rdma_idle_probe, absl::Seconds(30),
    "probe RDMA connections idle this long (no lease, no commit); a dead client's is torn down");
ABSL_FLAG(std::string, max_mr_bytes, "0",
          "cap on bytes per RDMA memory region; the pool is split into several (0: the device's "
          "max_mr_size)");
ABSL_FLAG(int, metrics_port, -1,
          "Prometheus GET /metrics port on --metrics_listen (-1: off, 0: pick a free port); a "
          "port in use stops start-up");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1",
          "numeric IPv4/IPv6 address for --metrics_port (0.0.0.0 for all interfaces). Not "
          "--listen: /metrics needs no credential, so it stays on loopback unless this says "
          "otherwise");
// Security (docs/security.md).
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: the control port serves TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA: control-port clients must present a certificate it signed (mutual TLS)");
ABSL_FLAG(std::string, tls_peer_ca, "",
          "cluster mode with --tls_cert: PEM CA that signed the other nodes' certificates (peers "
          "are dialled over TLS and must carry the host name they are dialled by); default "
          "--tls_client_ca");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(60),
          "how often the TLS certificate, key and CA files are read again: a renewed "
          "certificate serves new connections without a restart (at least 1s)");
ABSL_FLAG(bool, insecure, false,
          "allow a non-loopback --listen without --auth_token_file (anyone who reaches the "
          "ports can read and write everything)");
ABSL_FLAG(absl::Duration, session_ttl, absl::Seconds(60),
          "a control-plane session with no RPC for this long and no live RDMA queue pair expires "
          "(its queue pairs are disconnected, its leases end)");
ABSL_FLAG(uint64_t, max_sessions, 65536,
          "control-plane sessions open at once (each handshake opens one; idle ones expire after "
          "--session_ttl)");
ABSL_FLAG(uint64_t, session_max_qps, 16, "RDMA queue pairs one session may hold");
ABSL_FLAG(uint64_t, session_max_leases, 64, "write leases one session may hold");
ABSL_FLAG(std::string, session_max_lease_bytes, "0",
          "bytes of write leases one session may hold (0: a quarter of the pool, at least one "
          "largest entry)");
ABSL_FLAG(std::string, grpc_memory, "0",
          "memory the control port's gRPC buffers may use (grpc::ResourceQuota); at least two of "
          "the largest messages (--max_value_bytes + --max_key_bytes + 4K); 0: the larger of "
          "256M and that");
ABSL_FLAG(int, grpc_max_threads, 64, "most threads serving the control port");
ABSL_FLAG(std::string, grpc_stream_window, "16K",
          "the control port's HTTP/2 stream window, fixed (1K to 64M): the most of a call's body "
          "read before its credential is checked; an admitted call's window grows to its message");
ABSL_FLAG(int, grpc_max_connections, 0,
          "most connections open at once on the control port; more are closed at accept (0: a "
          "quarter of the descriptors left after the reserve, 8 to 1024). With the other ports' "
          "caps (the RESP flags are lowered with a warning when they do not fit) it must fit "
          "under the descriptor limit, which kvserver raises to the hard limit at start");
ABSL_FLAG(std::string, ready_file, "",
          "once serving, write 'control_port=N', 'resp_port=N', 'resp_tls_port=N', "
          "'metrics_port=N' (-1 when off), "
          "'epoch=X', 'rdma_device=NAME' and 'node_id=ID' (empty in single-node mode) lines to "
          "this file (for scripts and tests)");

// --- Cluster mode (architecture §19.6, docs/operations.md "Cluster mode").
ABSL_FLAG(std::string, etcd, "",
          "comma-separated etcd endpoints host:port; set: cluster mode (empty: single-node)");
ABSL_FLAG(std::string, etcd_ca, "",
          "PEM CA of etcd's certificate: etcd is dialled over TLS (https) and must present a "
          "certificate it signed naming the endpoint's host");
ABSL_FLAG(std::string, etcd_cert, "",
          "PEM client certificate for etcd (an etcd started with --client-cert-auth requires "
          "one); needs --etcd_ca and --etcd_key");
ABSL_FLAG(std::string, etcd_key, "", "PEM private key of --etcd_cert");
ABSL_FLAG(std::string, etcd_user, "",
          "etcd user (etcd auth enabled): the node authenticates with it and "
          "--etcd_password_file and sends etcd's token on every call");
ABSL_FLAG(std::string, etcd_password_file, "",
          "file holding --etcd_user's password (one line; trailing newline ignored)");
ABSL_FLAG(std::string, node_id, "",
          "stable node name, kept across restarts (default: <advertise_host>:<control_port>; "
          "required with --control_port=0)");
ABSL_FLAG(std::string, cluster_name, "kvstore",
          "etcd prefix /kvstore/<name>/; nodes of another cluster are ignored");
ABSL_FLAG(std::string, advertise_host, "",
          "host other nodes and clients dial (default: --listen, or the host name when it is "
          "0.0.0.0)");
ABSL_FLAG(uint32_t, replicas, 2,
          "replicas per shard (1..3), used when the first map is made. With 1 a shard has one "
          "copy: when its node dies, its keys are gone (docs/consistency.md)");
ABSL_FLAG(uint32_t, cluster_min_nodes, 0,
          "members the controller waits for before making the first map (0: --replicas)");
ABSL_FLAG(
    uint32_t, min_insync_replicas, 0,
    "a shard acknowledges writes only while this many replicas (its primary counted) are "
    "in sync; below it writes are refused (CLUSTERDOWN) and a failed backup is not "
    "dropped, so no acknowledged write is lost while this many copies survive. 1..--replicas; "
    "0: min(--replicas, 2)");
ABSL_FLAG(absl::Duration, member_ttl, absl::Seconds(3),
          "etcd lease TTL of this node's member key (keepalive every TTL/3)");
ABSL_FLAG(absl::Duration, fence_margin, absl::Milliseconds(500),
          "stop serving this long before the lease could expire (below 2/3 of --member_ttl)");
ABSL_FLAG(absl::Duration, replication_timeout, absl::Seconds(1),
          "a backup that does not acknowledge a write within this is dropped from the in-sync "
          "set");
ABSL_FLAG(int, replication_port, 0,
          "port of the peer socket, where primaries send this node replicated writes over plain "
          "TCP (0: pick a free port, published in the cluster map; -1: none, gRPC only). Not "
          "used with --tls_cert: a TLS cluster replicates over gRPC on TLS");
ABSL_FLAG(bool, replication_rdma, true,
          "send replicated writes to backups that have an RDMA device by RDMA WRITE + replica "
          "commit when this node has one too; false: always by gRPC");

// --- RESP port limits (RespLimits, docs/security.md). Each is named in the
// error a client gets and counted in kvstore_resp_limit_rejections_total.
ABSL_FLAG(int, resp_max_clients, 4096,
          "RESP connections open at once; one more gets '-ERR max number of clients reached'. "
          "Lowered, with a warning, to what the descriptor limit leaves beside a reserve and the "
          "other ports' caps (control port, metrics port, unauthenticated RESP connections)");
ABSL_FLAG(int, resp_max_unauthenticated_clients, 256,
          "with --auth_token_file: RESP connections open at once that have not sent AUTH yet "
          "(they do not count against --resp_max_clients until they do); at the cap the oldest "
          "of them is closed. Lowered (0: set) with a warning to fit the descriptor budget");
ABSL_FLAG(absl::Duration, resp_auth_timeout, absl::Seconds(5),
          "with --auth_token_file: close a RESP connection that has not authenticated this long "
          "after it connected (0: never)");
ABSL_FLAG(std::string, resp_max_query_buffer, "8M",
          "bytes one incomplete RESP request may buffer (streamed SET values excluded)");
ABSL_FLAG(std::string, resp_output_hard_limit, "256M",
          "queued reply bytes per RESP connection past which it is closed (and an MGET refused)");
ABSL_FLAG(std::string, resp_output_soft_limit, "32M",
          "queued reply bytes a RESP connection may exceed for --resp_output_soft_seconds only "
          "(0: none)");
ABSL_FLAG(absl::Duration, resp_output_soft_seconds, absl::Seconds(10),
          "how long a RESP connection may stay over --resp_output_soft_limit");
ABSL_FLAG(absl::Duration, resp_max_pin_time, absl::Seconds(5),
          "how long a queued GET reply may keep its pool entry pinned; then it is copied out (up "
          "to --resp_pin_copy_bytes) or the connection closed");
ABSL_FLAG(std::string, resp_pin_copy_bytes, "1M",
          "largest unsent value copied out of the pool for a slow RESP reader");
ABSL_FLAG(uint32_t, resp_max_inflight_set_percent, 25,
          "share of the pool (percent) that RESP SETs still receiving their value may hold "
          "together (0: no bound)");
ABSL_FLAG(uint64_t, resp_scan_max_buckets, 16384,
          "index buckets one RESP SCAN call may visit (0: no bound)");

// Copies the --resp_* limit flags into `o`; kInvalidArgument naming the flag
// for a bad size or percent.
static absl::Status RespLimitsFromFlags(kvstore::server::KvServerOptions* o) {
  kvstore::server::RespLimits& l = o->resp_limits;
  l.max_clients = absl::GetFlag(FLAGS_resp_max_clients);
  if (l.max_clients < 1) return absl::InvalidArgumentError("--resp_max_clients must be >= 1");
  l.max_unauthenticated_clients = absl::GetFlag(FLAGS_resp_max_unauthenticated_clients);
  if (l.max_unauthenticated_clients < 0) {
    return absl::InvalidArgumentError("--resp_max_unauthenticated_clients must be >= 0");
  }
  l.auth_timeout = absl::GetFlag(FLAGS_resp_auth_timeout);
  if (l.auth_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--resp_auth_timeout must not be negative");
  }
  struct {
    const char* name;
    std::string value;
    uint64_t* out;
  } sizes[] = {
      {"resp_max_query_buffer", absl::GetFlag(FLAGS_resp_max_query_buffer), &l.max_query_buffer},
      {"resp_output_hard_limit", absl::GetFlag(FLAGS_resp_output_hard_limit), &l.output_hard_limit},
      {"resp_output_soft_limit", absl::GetFlag(FLAGS_resp_output_soft_limit), &l.output_soft_limit},
      {"resp_pin_copy_bytes", absl::GetFlag(FLAGS_resp_pin_copy_bytes), &l.pin_copy_bytes},
  };
  for (auto& s : sizes) {
    auto v = kvstore::ParseByteSize(s.value);
    if (!v.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", s.name, ": ", v.status().message()));
    }
    *s.out = *v;
  }
  l.output_soft_seconds = absl::GetFlag(FLAGS_resp_output_soft_seconds);
  l.max_pin_time = absl::GetFlag(FLAGS_resp_max_pin_time);
  l.scan_max_buckets = absl::GetFlag(FLAGS_resp_scan_max_buckets);
  o->resp_inflight_set_percent = absl::GetFlag(FLAGS_resp_max_inflight_set_percent);
  if (o->resp_inflight_set_percent > 100) {
    return absl::InvalidArgumentError("--resp_max_inflight_set_percent must be 0..100");
  }
  return absl::OkStatus();
}

// Copies the cluster-mode flags into `o`; kInvalidArgument naming the flag
// for a bad endpoint or value, or for cluster flags without --etcd (they
// would silently do nothing).
static absl::Status ClusterFromFlags(kvstore::server::KvServerOptions* o) {
  kvstore::server::ClusterOptions& c = o->cluster;
  auto endpoints = kvstore::server::ParseEtcdEndpoints(absl::GetFlag(FLAGS_etcd));
  if (!endpoints.ok()) return endpoints.status();
  c.etcd_endpoints = *std::move(endpoints);
  c.node_id = absl::GetFlag(FLAGS_node_id);
  c.cluster_name = absl::GetFlag(FLAGS_cluster_name);
  c.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  c.replicas = absl::GetFlag(FLAGS_replicas);
  c.cluster_min_nodes = absl::GetFlag(FLAGS_cluster_min_nodes);
  c.min_insync_replicas = absl::GetFlag(FLAGS_min_insync_replicas);
  c.member_ttl = absl::GetFlag(FLAGS_member_ttl);
  c.fence_margin = absl::GetFlag(FLAGS_fence_margin);
  c.replication_timeout = absl::GetFlag(FLAGS_replication_timeout);
  c.replication_rdma = absl::GetFlag(FLAGS_replication_rdma);
  c.replication_port = absl::GetFlag(FLAGS_replication_port);
  c.etcd_ca_file = absl::GetFlag(FLAGS_etcd_ca);
  c.etcd_cert_file = absl::GetFlag(FLAGS_etcd_cert);
  c.etcd_key_file = absl::GetFlag(FLAGS_etcd_key);
  c.etcd_user = absl::GetFlag(FLAGS_etcd_user);
  c.etcd_tls_reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  if (const std::string path = absl::GetFlag(FLAGS_etcd_password_file); !path.empty()) {
    // Read here, not kept in a flag: it never shows in --help or ps.
    std::ifstream in(path, std::ios::binary);
    std::getline(in, c.etcd_password);
    if (!in && !in.eof()) {
      return absl::InvalidArgumentError(absl::StrCat("--etcd_password_file: cannot read ", path));
    }
    if (!c.etcd_password.empty() && c.etcd_password.back() == '\r') c.etcd_password.pop_back();
    if (c.etcd_password.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--etcd_password_file: ", path, " is missing or empty"));
    }
  }
  if (!c.enabled()) {
    const kvstore::server::ClusterOptions d;
    if (c.node_id != d.node_id || c.cluster_name != d.cluster_name ||
        c.advertise_host != d.advertise_host || c.replicas != d.replicas ||
        c.cluster_min_nodes != d.cluster_min_nodes ||
        c.min_insync_replicas != d.min_insync_replicas || c.member_ttl != d.member_ttl ||
        c.fence_margin != d.fence_margin || c.replication_timeout != d.replication_timeout ||
        c.replication_rdma != d.replication_rdma || c.replication_port != d.replication_port ||
        !c.etcd_ca_file.empty() || !c.etcd_cert_file.empty() || !c.etcd_key_file.empty() ||
        !c.etcd_user.empty() || !c.etcd_password.empty()) {
      return absl::InvalidArgumentError(
          "cluster flags (--node_id, --cluster_name, --advertise_host, --replicas, "
          "--cluster_min_nodes, --min_insync_replicas, --member_ttl, --fence_margin, "
          "--replication_timeout, "
          "--replication_rdma, --replication_port, --etcd_ca, --etcd_cert, --etcd_key, "
          "--etcd_user, "
          "--etcd_password_file) need --etcd");
    }
    return absl::OkStatus();
  }
  return c.Validate();
}

namespace {

// Parses a size flag ("512M", "4K", "1G"); the error names the flag, since
// ParseByteSize() alone cannot say which of several sizes was wrong.
absl::StatusOr<uint64_t> SizeFlag(const char* name, const std::string& value) {
  auto v = kvstore::ParseByteSize(value);
  if (!v.ok())
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", v.status().message()));
  return v;
}

// Prints the start-up error for the operator (without the status code: the
// message says what to change) and returns exit status 1.
int Fail(const absl::Status& s) {
  std::fprintf(stderr, "kvserver: %s\n", std::string(s.message()).c_str());
  return 1;
}

// The --help text and which flags it lists: this file's only, not those of
// the libraries it links.
void SetUsage() {
  absl::SetProgramUsageMessage(
      "kvstore server: an in-memory key-value store that serves GETs by one-sided RDMA READs\n"
      "when an RDMA device is present and RESP2 (Redis protocol) over TCP always.\n\n"
      "usage: kvserver [flags]\n\n"
      "It logs one line when ready, e.g.\n"
      "  kvserver up: pool 512 MiB, index 524288 buckets (32 MiB), rdma off (...), transports "
      "tcp,\n"
      "  control 127.0.0.1:7300, resp 127.0.0.1:6380, epoch ...\n"
      "(with --metrics_port, \", metrics 127.0.0.1:N\" comes before the epoch),\n"
      "and stops cleanly on SIGINT or SIGTERM. Exit status: 0 after a clean stop, 1 when it\n"
      "cannot start (the message says why, e.g. a port in use or etcd unreachable) or a flag\n"
      "is unknown or malformed, 2 for a bad size, --transport, --metrics_port or cluster flag\n"
      "value, 3 in cluster mode when etcd says this node's lease expired (it was replaced;\n"
      "restart it, it comes back empty).\n\n"
      "Cluster mode: --etcd=host:port,... makes this server a cluster member (architecture\n"
      "§19); the start-up line then ends with \"cluster <name> node <id> incarnation <hex>\n"
      "etcd <endpoints>\" (else \"single-node\"). A node that cannot reach etcd stops serving\n"
      "--fence_margin before its lease could expire and resumes when etcd answers again.\n\n"
      "Protected mode: a --listen other than loopback needs a client credential\n"
      "(--auth_token_file, --admin_token_file or --users_file: mutual TLS guards only the\n"
      "control port, so it is not enough alone), or --insecure; otherwise kvserver refuses to\n"
      "start (docs/security.md).\n\n"
      "Principals: data clients (--auth_token_file, read-write; --users_file, read or write)\n"
      "call only KvControl and GetClusterMap; admins (--admin_token_file) also the cluster's\n"
      "admin requests; peers (--cluster_secret_file, required in cluster mode) only the\n"
      "server-to-server calls.");
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "kvserver_main");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
}

// The transport-encryption flags (docs/security.md §2.2); KvServer::Start()
// checks their combinations.
void TlsFromFlags(kvstore::server::KvServerOptions* o) {
  o->tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  o->tls_key_file = absl::GetFlag(FLAGS_tls_key);
  o->tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  o->tls_peer_ca_file = absl::GetFlag(FLAGS_tls_peer_ca);
  o->tls_reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  o->resp_tls_port = absl::GetFlag(FLAGS_resp_tls_port);
  o->resp_plaintext_with_tls = absl::GetFlag(FLAGS_resp_plaintext);
}

// Reads the flags into KvServerOptions. kInvalidArgument, naming the flag,
// for a value that cannot be right whatever else is set (a bad size,
// --transport or --metrics_port); KvServer::Start() checks the combinations.
// Long because it is a list: one assignment per flag, no logic to split out.
absl::StatusOr<kvstore::server::KvServerOptions> OptionsFromFlags() {
  kvstore::server::KvServerOptions o;
  o.listen_address = absl::GetFlag(FLAGS_listen);
  o.control_port = absl::GetFlag(FLAGS_control_port);
  o.resp_port = absl::GetFlag(FLAGS_resp_port);
  o.resp_threads = absl::GetFlag(FLAGS_resp_threads);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.metrics_address = absl::GetFlag(FLAGS_metrics_listen);
  // -1 is "off"; anything else outside a port number is a typo.
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return absl::InvalidArgumentError("--metrics_port must be -1 (off), 0 (any) or a port number");
  }
  o.index_buckets = absl::GetFlag(FLAGS_index_buckets);
  o.hugepages = absl::GetFlag(FLAGS_hugepages);
  o.transparent_hugepages = absl::GetFlag(FLAGS_transparent_hugepages);
  o.grace_period = absl::GetFlag(FLAGS_grace_period);
  o.expiry_interval = absl::GetFlag(FLAGS_expiry_interval);
  o.lease_ttl = absl::GetFlag(FLAGS_lease_ttl);
  o.idle_timeout = absl::GetFlag(FLAGS_idle_timeout);
  o.request_timeout = absl::GetFlag(FLAGS_request_timeout);
  // A count, not a size: no suffixes.
  o.limits.max_batch_keys = absl::GetFlag(FLAGS_max_batch_keys);
  o.rdma_device = absl::GetFlag(FLAGS_rdma_device);
  o.rdma_ip = absl::GetFlag(FLAGS_rdma_ip);
  o.rdma_commit_credits = absl::GetFlag(FLAGS_rdma_commit_credits);
  o.rdma_idle_probe_after = absl::GetFlag(FLAGS_rdma_idle_probe);
  // Sub-second probing would turn idle clients into traffic.
  if (o.rdma_idle_probe_after < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--rdma_idle_probe must be at least 1s");
  }
  TlsFromFlags(&o);
  o.insecure = absl::GetFlag(FLAGS_insecure);
  o.sessions.ttl = absl::GetFlag(FLAGS_session_ttl);
  o.sessions.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  o.sessions.max_qps = absl::GetFlag(FLAGS_session_max_qps);
  o.sessions.max_leases = absl::GetFlag(FLAGS_session_max_leases);
  o.grpc_max_threads = absl::GetFlag(FLAGS_grpc_max_threads);
  o.grpc_max_connections = absl::GetFlag(FLAGS_grpc_max_connections);
  if (o.sessions.ttl < absl::Seconds(1) || o.sessions.max_sessions == 0 ||
      o.sessions.max_qps == 0 || o.sessions.max_leases == 0 || o.grpc_max_threads < 2 ||
      o.grpc_max_connections < 0) {
    return absl::InvalidArgumentError(
        "--session_ttl must be at least 1s, --max_sessions, --session_max_qps and "
        "--session_max_leases at least 1, --grpc_max_threads at least 2, "
        "--grpc_max_connections at least 0 (0: automatic)");
  }
  // Every size flag goes through one parser, so "64M" means the same
  // everywhere and each error names its flag.
  struct {
    const char* name;
    std::string value;
    uint64_t* out;
  } sizes[] = {
      {"pool_size", absl::GetFlag(FLAGS_pool_size), &o.pool_bytes},
      {"segment_size", absl::GetFlag(FLAGS_segment_size), &o.segment_bytes},
      {"max_key_bytes", absl::GetFlag(FLAGS_max_key_bytes), &o.limits.max_key_bytes},
      {"max_value_bytes", absl::GetFlag(FLAGS_max_value_bytes), &o.limits.max_value_bytes},
      {"max_mr_bytes", absl::GetFlag(FLAGS_max_mr_bytes), &o.max_mr_bytes},
      {"session_max_lease_bytes", absl::GetFlag(FLAGS_session_max_lease_bytes),
       &o.sessions.max_lease_bytes},
      {"grpc_memory", absl::GetFlag(FLAGS_grpc_memory), &o.grpc_memory_bytes},
      {"grpc_stream_window", absl::GetFlag(FLAGS_grpc_stream_window), &o.grpc_stream_window_bytes},
  };
  for (auto& s : sizes) {
    auto v = SizeFlag(s.name, s.value);
    if (!v.ok()) return v.status();
    *s.out = *v;
  }
  // Whether RDMA can actually be served ("auto" with no device) is decided
  // by KvServer::Start(); here only the word is checked.
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (transport == "auto")
    o.transport = kvstore::server::ServerTransport::kAuto;
  else if (transport == "rdma")
    o.transport = kvstore::server::ServerTransport::kRdma;
  else if (transport == "tcp")
    o.transport = kvstore::server::ServerTransport::kTcp;
  else
    return absl::InvalidArgumentError("--transport must be auto, rdma or tcp");
  // After --pool_size: a percentage is of the pool.
  auto maxmemory = kvstore::server::ParseMaxMemory(absl::GetFlag(FLAGS_maxmemory), o.pool_bytes);
  if (!maxmemory.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", maxmemory.status().message()));
  }
  o.max_memory_bytes = *maxmemory;
  auto policy = kvstore::server::ParsePolicy(absl::GetFlag(FLAGS_maxmemory_policy));
  if (!policy) {
    return absl::InvalidArgumentError(
        "--maxmemory_policy must be noeviction, allkeys-lru, allkeys-lfu, volatile-lru, "
        "volatile-lfu or volatile-ttl");
  }
  o.eviction_policy = *policy;
  if (absl::Status s = RespLimitsFromFlags(&o); !s.ok()) return s;
  if (absl::Status s = ClusterFromFlags(&o); !s.ok()) return s;
  return o;
}

// The ready file carries the bound ports (with 0 the kernel picks them):
// written to a temporary name and renamed, so a reader polling for it
// never sees half a file.
void WriteReadyFile(const kvstore::server::KvServer& server) {
  const std::string ready_file = absl::GetFlag(FLAGS_ready_file);
  if (ready_file.empty()) return;
  const std::string tmp = ready_file + ".tmp";
  // Closed (flushed) before the rename.
  {
    std::ofstream f(tmp);
    f << "control_port=" << server.control_port() << "\nresp_port=" << server.resp_port()
      << "\nresp_tls_port=" << server.resp_tls_port() << "\nmetrics_port=" << server.metrics_port()
      << "\nepoch=" << server.epoch() << "\nrdma_device=" << server.rdma_device()
      << "\nnode_id=" << server.node_id() << "\n";
  }
  std::rename(tmp.c_str(), ready_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, which leaves absl::Mutex's
  // deadlock detection on: every lock and unlock then updates a global lock
  // graph under a global lock, a large share of a RESP SET's CPU time. The
  // lock order is documented per class and checked by the TSan build instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  SetUsage();
  absl::ParseCommandLine(argc, argv);
  // A server under systemd or a test harness logs to stderr; glog's files in
  // /tmp would be lost.
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);

  absl::StatusOr<kvstore::server::KvServerOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    Fail(options.status());
    return 2;  // a usage error, before anything is mapped or bound
  }
  // The secrets are read from their files here, never kept in a flag.
  if (absl::Status s = kvstore::server::SecretsFromFlags(&*options); !s.ok()) return Fail(s);
  if (const std::string spec = absl::GetFlag(FLAGS_failpoints); !spec.empty()) {
    if (absl::Status s = kvstore::failpoint::ArmFromSpec(spec); !s.ok()) {
      Fail(absl::InvalidArgumentError(absl::StrCat("--failpoints: ", s.message())));
      return 2;
    }
  }

  // Block the stop signals in every thread (all are created after this);
  // main waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  // SIGHUP re-reads the RESP TLS certificate (gRPC's follow their files).
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A write to a socket whose peer has gone (a RESP writev to a client that
  // disconnected) must fail with EPIPE, not kill the server.
  signal(SIGPIPE, SIG_IGN);

  // Start() binds every port (gRPC, RESP, metrics) or fails with the one it
  // could not bind; nothing is left running on failure.
  auto server = kvstore::server::KvServer::Start(*options);
  if (!server.ok()) return Fail(server.status());
  LOG(INFO) << (*server)->StartupLine();

  // Last: a script that sees the file may connect at once, and every port
  // in it is already serving.
  WriteReadyFile(**server);

  // Serve until SIGINT/SIGTERM; Shutdown() stops listeners before storage.
  // The signals are blocked everywhere, so they stay pending until this
  // sigwait() takes one: no handler runs on an arbitrary thread.
  int sig = 0;
  for (sigwait(&stop_signals, &sig); sig == SIGHUP; sigwait(&stop_signals, &sig)) {
    absl::Status s = (*server)->ReloadTls();
    LOG_IF(INFO, s.ok()) << "kvserver: SIGHUP, TLS certificates read again";
    LOG_IF(WARNING, !s.ok()) << "kvserver: SIGHUP, TLS certificates kept: " << s.message();
  }
  LOG(INFO) << "kvserver: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", shutting down";
  (*server)->Shutdown();
  // Destroying the server frees storage, the pool and the device.
  server->reset();
  LOG(INFO) << "kvserver: stopped";
  return 0;
}
