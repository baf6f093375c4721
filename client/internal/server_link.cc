// Copyright 2026 The kvstore Authors.
//
// The per-server machinery, moved here from KvClient when the cluster client
// needed one per node: handshake, transport selection with kAuto's TCP
// fallback, and the rebuild of a broken path.

#include "client/internal/server_link.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/internal/rdma/rdma_data_path.h"
#include "client/internal/tcp/resp_dial.h"
#include "client/internal/tcp/tcp_data_path.h"
#include "common/tls/ssl_context.h"
#include "glog/logging.h"

namespace kvstore {
namespace client {
namespace {

// Data endpoints are published with the server's bind address; a server
// bound to 0.0.0.0 is reached at the host the client dialled.
std::string ResolveDataAddress(const std::string& published, const std::string& control) {
  std::pair<std::string, std::string> pub = absl::StrSplit(published, absl::MaxSplits(':', 1));
  if (pub.first != "0.0.0.0" && !pub.first.empty()) return published;
  std::pair<std::string, std::string> ctl = absl::StrSplit(control, absl::MaxSplits(':', 1));
  return absl::StrCat(ctl.first, ":", pub.second);
}

}  // namespace

ServerLink::ServerLink(LinkEnv env, std::string address,
                       std::unique_ptr<control::ControlClient> control)
    : env_(std::move(env)), address_(std::move(address)), control_(std::move(control)) {}

ServerLink::~ServerLink() {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<DataPath> last;
  current_mu_.Lock();
  last.swap(path_);
  current_mu_.Unlock();
}

absl::Status ServerLink::Init() {
  absl::MutexLock lock(&mu_);
  return BuildPath();
}

CurrentPath ServerLink::Current() const {
  current_mu_.Lock();
  CurrentPath cur{path_, path_metrics_};
  current_mu_.Unlock();
  return cur;
}

// Epochs only grow: a late call with an older epoch (two map installs
// racing) must not take a path back.
void ServerLink::SetMapEpoch(uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (epoch <= map_epoch_.load(std::memory_order_relaxed)) return;
  map_epoch_.store(epoch, std::memory_order_relaxed);
  if (path_ != nullptr) path_->SetMapEpoch(epoch);
}

absl::Status ServerLink::BuildPath(bool wait_for_ready) {
  const Options& options = *env_.options;
  absl::StatusOr<v1::HandshakeResponse> handshake =
      control_->Handshake(env_.client_name, wait_for_ready, absl::Now() + options.connect_timeout);
  if (!handshake.ok()) {
    const absl::Status& s = handshake.status();
    return absl::Status(s.code(),
                        absl::StrCat("handshake with ", address_, " failed: ", s.message()));
  }
  const v1::HandshakeResponse& hs = *handshake;
  Limits limits;
  limits.max_key_bytes = hs.limits().max_key_bytes();
  limits.max_value_bytes = hs.limits().max_value_bytes();
  limits.max_batch_keys = hs.limits().max_batch_keys();
  max_value_bytes_.store(limits.max_value_bytes, std::memory_order_relaxed);

  if (options.transport != TransportMode::kTcp) {
    absl::StatusOr<std::unique_ptr<DataPath>> rdma = BuildRdmaPath(hs, limits);
    if (rdma.ok()) {
      SwapPath(std::shared_ptr<DataPath>(std::move(*rdma)));
      return absl::OkStatus();
    }
    // Only the reason is kept: it ends up in a log line or in the
    // kUnavailable error below, whatever its original code.
    const std::string why(rdma.status().message());
    if (options.transport == TransportMode::kRdma) {
      return absl::UnavailableError(
          absl::StrCat("transport=rdma requested but RDMA is unavailable: ", why));
    }
    env_.metrics->tcp_fallbacks()->Increment();
    LOG(INFO) << "kvstore client: using TCP to " << address_ << " (" << why << ")";
  }
  // TCP: either asked for, or the kAuto fallback.
  const std::string data_address = ResolveDataAddress(hs.endpoints().resp_address(), address_);
  std::shared_ptr<const RespTls> tls;
  if (hs.endpoints().resp_tls()) {
    // The RESP port speaks only TLS: verified with the same CA, client
    // certificate and name as the control channel.
    if (options.tls_ca_file.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the RESP port ", data_address,
                       " speaks TLS: set tls_ca_file (kvctl --tls_ca) to the CA of its "
                       "certificate"));
    }
    tls::PemFiles files;
    files.ca = options.tls_ca_file;
    files.cert = options.tls_cert_file;
    files.key = options.tls_key_file;
    KV_ASSIGN_OR_RETURN(tls::SslCtxPtr context, tls::MakeClientContext(files));
    tls = std::make_shared<const RespTls>(RespTls{std::move(context), options.tls_server_name});
  }
  KV_ASSIGN_OR_RETURN(auto tcp, TcpDataPath::Connect(data_address, options.connections_per_server,
                                                     limits, options.connect_timeout,
                                                     options.auth_token, env_.replica_reads, tls));
  SwapPath(std::shared_ptr<DataPath>(std::move(tcp)));
  return absl::OkStatus();
}

// The device is opened once per client (initiator::SharedContext) and kept for later
// paths, so registrations survive reconnects and serve every node.
absl::StatusOr<std::unique_ptr<DataPath>> ServerLink::BuildRdmaPath(const v1::HandshakeResponse& hs,
                                                                    const Limits& limits) {
  if (hs.endpoints().rdma_device().empty()) {
    return absl::UnavailableError("the server has no RDMA device");
  }
  absl::StatusOr<std::shared_ptr<initiator::RdmaContext>> ctx =
      env_.rdma->Get(env_.options->rdma_device, limits.max_value_bytes);
  if (!ctx.ok()) {
    return absl::UnavailableError(
        absl::StrCat("no usable local RDMA device: ", ctx.status().message()));
  }
  KV_ASSIGN_OR_RETURN(
      auto rdma,
      RdmaDataPath::Connect(*ctx, control_.get(), hs, env_.client_name, env_.options->lease_bytes,
                            env_.options->connect_timeout, env_.registry,
                            ReadOptions{env_.options->rdma_location_cache_entries,
                                        env_.options->rdma_read_in_pieces}));
  return std::unique_ptr<DataPath>(std::move(rdma));
}

// The old path is destroyed once the last operation still using it lets go
// of its shared_ptr. The map epoch is carried over: a new path must check
// the same epoch as the one it replaces.
void ServerLink::SwapPath(std::shared_ptr<DataPath> next) {
  const TransportMetrics* metrics = env_.metrics->ForTransport(next->name());
  next->SetMapEpoch(map_epoch_.load(std::memory_order_relaxed));
  // The old path is let go of after the word lock: if this was its last
  // reference, its teardown must not hold up Current().
  current_mu_.Lock();
  next.swap(path_);
  path_metrics_ = metrics;
  current_mu_.Unlock();
}

bool ServerLink::Recover(const std::shared_ptr<DataPath>& failed) {
  if (!failed->broken()) return false;
  absl::MutexLock lock(&mu_);
  if (path_ != failed) return true;  // another thread already rebuilt it
  absl::Status s = BuildPath(/*wait_for_ready=*/true);
  if (!s.ok()) {
    LOG(WARNING) << "kvstore client: reconnecting to " << address_ << " failed: " << s;
    return false;
  }
  env_.metrics->reconnects()->Increment();
  LOG(INFO) << "kvstore client: reconnected to " << address_ << " over " << path_->name();
  return true;
}

}  // namespace client
}  // namespace kvstore
