// Copyright 2026 The kvstore Authors.

#include "client/kv_client.h"

#include <atomic>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/data_path.h"
#include "client/tcp_data_path.h"
#include "common/grpc_status.h"
#include "common/limits.h"
#include "common/rdma/device.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "proto/kv_control.grpc.pb.h"

namespace kvstore {
namespace client {

absl::string_view TransportModeName(TransportMode mode) {
  switch (mode) {
    case TransportMode::kAuto: return "auto";
    case TransportMode::kRdma: return "rdma";
    case TransportMode::kTcp: return "tcp";
  }
  return "?";
}

absl::StatusOr<TransportMode> ParseTransportMode(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(text);
  if (t == "auto") return TransportMode::kAuto;
  if (t == "rdma") return TransportMode::kRdma;
  if (t == "tcp") return TransportMode::kTcp;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", text, "' (expected auto, rdma or tcp)"));
}

namespace {

// Data endpoints are published with the server's bind address; a server
// bound to 0.0.0.0 is reached at the host the client dialled.
std::string ResolveDataAddress(const std::string& published, const std::string& control) {
  std::pair<std::string, std::string> pub = absl::StrSplit(published, absl::MaxSplits(':', 1));
  if (pub.first != "0.0.0.0" && !pub.first.empty()) return published;
  std::pair<std::string, std::string> ctl = absl::StrSplit(control, absl::MaxSplits(':', 1));
  return absl::StrCat(ctl.first, ":", pub.second);
}

class ClientImpl final : public KvClient {
 public:
  ClientImpl(const Options& options, std::unique_ptr<v1::KvControl::Stub> stub)
      : options_(options), stub_(std::move(stub)) {}

  absl::Status Init() {
    v1::HandshakeRequest req;
    req.set_client_name(absl::StrCat("kvclient pid ", getpid()));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.connect_timeout));
    ctx.set_wait_for_ready(false);
    v1::HandshakeResponse resp;
    absl::Status s = FromGrpcStatus(stub_->Handshake(&ctx, req, &resp));
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("handshake with ", options_.servers[0],
                                                 " failed: ", s.message()));
    }
    handshake_ = resp;
    limits_.max_key_bytes = resp.limits().max_key_bytes();
    limits_.max_value_bytes = resp.limits().max_value_bytes();
    limits_.max_batch_keys = resp.limits().max_batch_keys();

    const bool server_rdma = !resp.endpoints().rdma_device().empty();
    bool local_rdma = false;
    std::string why;
    if (options_.transport != TransportMode::kTcp) {
      auto dev = rdma::Device::Open("");
      local_rdma = dev.ok();
      if (!dev.ok()) why = absl::StrCat("no local RDMA device (", dev.status().message(), ")");
      else if (!server_rdma) why = "the server has no RDMA device";
    }
    if (options_.transport == TransportMode::kRdma || (options_.transport == TransportMode::kAuto &&
                                                       local_rdma && server_rdma)) {
      // The verbs data path lands with the RDMA issue; until then RDMA is
      // never silently faked: kRdma fails, kAuto falls back below.
      if (why.empty()) why = "this build has no RDMA data path yet";
      if (options_.transport == TransportMode::kRdma) {
        return absl::UnavailableError(absl::StrCat("transport=rdma requested but RDMA is unavailable: ", why));
      }
    }
    if (options_.transport == TransportMode::kAuto) {
      tcp_fallbacks_++;
      LOG(INFO) << "kvstore client: using TCP to " << options_.servers[0] << " (" << why << ")";
    }
    const std::string address = ResolveDataAddress(resp.endpoints().resp_address(), options_.servers[0]);
    KV_ASSIGN_OR_RETURN(data_, TcpDataPath::Connect(address, options_.connections_per_server,
                                                    limits_, options_.connect_timeout));
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(absl::string_view key) override {
    gets_++;
    return Count(data_->Get(key, Deadline()));
  }
  absl::Status Put(absl::string_view key, absl::string_view value) override {
    puts_++;
    return Count(data_->Put(key, value, Deadline()));
  }
  absl::Status Delete(absl::string_view key) override {
    deletes_++;
    return Count(data_->Delete(key, Deadline()));
  }
  absl::StatusOr<bool> Exists(absl::string_view key) override {
    return Count(data_->Exists(key, Deadline()));
  }
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys) override {
    gets_ += keys.size();
    return Count(data_->MultiGet(keys, Deadline()), keys.size());
  }
  absl::Status MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs) override {
    puts_ += pairs.size();
    return Count(data_->MultiPut(pairs, Deadline()), pairs.size());
  }

  absl::StatusOr<ScanPage> Scan(uint64_t cursor, uint32_t count,
                                absl::string_view prefix) override {
    v1::ScanRequest req;
    req.set_cursor(cursor);
    req.set_count(count);
    req.set_prefix(std::string(prefix));
    v1::ScanResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(Deadline()));
    KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Scan(&ctx, req, &resp)));
    ScanPage page;
    page.keys.assign(resp.keys().begin(), resp.keys().end());
    page.cursor = resp.cursor();
    return page;
  }

  absl::StatusOr<ServerStats> Stats() override {
    v1::StatsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(Deadline()));
    KV_RETURN_IF_ERROR(FromGrpcStatus(stub_->Stats(&ctx, v1::StatsRequest(), &resp)));
    ServerStats out;
    out.info.insert(resp.info().begin(), resp.info().end());
    out.counters.insert(resp.counters().begin(), resp.counters().end());
    return out;
  }

  std::string transport_name() const override { return std::string(data_->name()); }

  ClientCounters counters() const override {
    ClientCounters c;
    c.gets = gets_;
    c.puts = puts_;
    c.deletes = deletes_;
    c.tcp_ops = data_->name() == "tcp" ? ops_.load() : 0;
    c.rdma_ops = data_->name() == "rdma" ? ops_.load() : 0;
    c.tcp_fallbacks = tcp_fallbacks_;
    c.checksum_retries = 0;
    return c;
  }

 private:
  absl::Time Deadline() const { return absl::Now() + options_.op_timeout; }
  template <typename T>
  T Count(T result, uint64_t n = 1) {
    ops_ += n;
    return result;
  }

  const Options options_;
  std::unique_ptr<v1::KvControl::Stub> stub_;
  v1::HandshakeResponse handshake_;
  Limits limits_;
  std::unique_ptr<DataPath> data_;
  std::atomic<uint64_t> gets_{0}, puts_{0}, deletes_{0}, ops_{0}, tcp_fallbacks_{0};
};

}  // namespace

absl::StatusOr<std::unique_ptr<KvClient>> KvClient::Connect(const Options& options) {
  if (options.servers.empty()) return absl::InvalidArgumentError("Options::servers is empty");
  if (options.servers.size() > 1) {
    return absl::UnimplementedError("more than one server needs the cluster map (not yet built)");
  }
  auto channel = grpc::CreateChannel(options.servers[0], grpc::InsecureChannelCredentials());
  auto impl = std::make_unique<ClientImpl>(options, v1::KvControl::NewStub(channel));
  KV_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<KvClient>(std::move(impl));
}

}  // namespace client
}  // namespace kvstore
