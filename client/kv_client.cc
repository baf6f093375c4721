// Copyright 2026 The kvstore Authors.
//
// KvClient::Connect and the single-node client. Connect asks the seeds for
// the cluster map first (cluster_client.h); a server in single-node mode,
// or one that predates the cluster, gets the single-node client: one
// ServerLink, exactly as before the cluster existed.

#include "client/kv_client.h"

#include <unistd.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/cluster_client.h"
#include "client/internal/client_metrics.h"
#include "client/internal/cluster/cluster_rpc.h"
#include "client/internal/data_path.h"
#include "client/internal/server_link.h"
#include "common/control/control_client.h"
#include "common/metrics/exposition.h"
#include "common/metrics/registry.h"
#include "common/status_macros.h"

namespace kvstore {
namespace client {
namespace {

// The single-node KvClient: counts and times operations and forwards them
// to its one ServerLink, which rebuilds a broken path. Control-plane calls
// (Scan, Stats) go through the link's ControlClient. Thread-safe.
class ClientImpl final : public KvClient {
 public:
  ClientImpl(const Options& options, std::unique_ptr<control::ControlClient> control)
      : options_(options),
        metrics_(&registry_),
        link_(LinkEnv{&options_, &registry_, &metrics_, &rdma_,
                      absl::StrCat("kvclient pid ", getpid())},
              options.servers[0], std::move(control)) {}

  // The first handshake and path; Connect() fails with its error.
  absl::Status Init() { return link_.Init(); }

  absl::StatusOr<std::string> Get(absl::string_view key) override {
    return link_.Run<std::string>(kGetOp, [&](DataPath& p) { return p.Get(key, Deadline()); });
  }
  absl::Status Put(absl::string_view key, absl::string_view value) override {
    return link_.RunStatus(kPutOp, [&](DataPath& p) { return p.Put(key, value, Deadline()); });
  }
  absl::Status Delete(absl::string_view key) override {
    // Retried after a reconnect only if it was never sent: a first attempt
    // that reached the server may have deleted the key.
    return link_.RunStatus(
        kDeleteOp, [&](DataPath& p) { return p.Delete(key, Deadline()); },
        /*retry=*/false);
  }
  absl::Status PutWithTtl(absl::string_view key, absl::string_view value,
                          absl::Duration ttl) override {
    return link_.RunStatus(kPutOp,
                           [&](DataPath& p) { return p.PutWithTtl(key, value, ttl, Deadline()); });
  }
  absl::StatusOr<bool> Expire(absl::string_view key, absl::Duration ttl) override {
    return link_.Run<bool>(kPutOp, [&](DataPath& p) { return p.Expire(key, ttl, Deadline()); });
  }
  absl::StatusOr<absl::Duration> Ttl(absl::string_view key) override {
    return link_.Run<absl::Duration>(kExistsOp,
                                     [&](DataPath& p) { return p.Ttl(key, Deadline()); });
  }
  absl::StatusOr<bool> Exists(absl::string_view key) override {
    return link_.Run<bool>(kExistsOp, [&](DataPath& p) { return p.Exists(key, Deadline()); });
  }
  absl::StatusOr<std::vector<absl::StatusOr<std::string>>> MultiGet(
      absl::Span<const std::string> keys) override {
    return link_.Run<std::vector<absl::StatusOr<std::string>>>(
        kMultiGetOp, [&](DataPath& p) { return p.MultiGet(keys, Deadline()); }, true, keys.size());
  }
  // As Put, the batch is sent again after the path broke and was rebuilt:
  // a single node is last writer wins for its own client. A pair lost with
  // the path fails the whole attempt, so the link rebuilds and retries it.
  absl::StatusOr<std::vector<absl::Status>> MultiPutEach(
      absl::Span<const std::pair<std::string, std::string>> pairs) override {
    return link_.Run<std::vector<absl::Status>>(
        kMultiPutOp,
        [&](DataPath& p) -> absl::StatusOr<std::vector<absl::Status>> {
          absl::StatusOr<std::vector<absl::Status>> r = p.MultiPut(pairs, Deadline());
          if (r.ok() && p.broken()) {
            for (const absl::Status& s : *r) {
              if (absl::IsUnavailable(s)) return s;
            }
          }
          return r;
        },
        true, pairs.size());
  }

  absl::StatusOr<RegisteredBuffer> Register(void* data, size_t size) override {
    // Registered with the current path's device (if any); the registration
    // survives reconnects because paths share one RdmaContext.
    return link_.Current().path->Register(data, size);
  }

  // Zero copy counts and times as Get/Put: the same operation to the server.
  absl::StatusOr<size_t> GetInto(absl::string_view key, const RegisteredBuffer& buffer,
                                 size_t offset, size_t capacity) override {
    return link_.Run<size_t>(
        kGetOp, [&](DataPath& p) { return p.GetInto(key, buffer, offset, capacity, Deadline()); });
  }

  absl::Status PutFrom(absl::string_view key, const RegisteredBuffer& buffer, size_t offset,
                       size_t length) override {
    return link_.RunStatus(
        kPutOp, [&](DataPath& p) { return p.PutFrom(key, buffer, offset, length, Deadline()); });
  }

  // Scan and Stats are control-plane calls: they work the same whatever the
  // data path, and are not retried.
  absl::StatusOr<ScanPage> Scan(uint64_t cursor, uint32_t count,
                                absl::string_view prefix) override {
    KV_ASSIGN_OR_RETURN(v1::ScanResponse resp,
                        link_.control()->Scan(cursor, count, prefix, Deadline()));
    ScanPage page;
    page.keys.assign(resp.keys().begin(), resp.keys().end());
    page.cursor = resp.cursor();
    return page;
  }

  absl::StatusOr<ServerStats> Stats() override {
    KV_ASSIGN_OR_RETURN(v1::StatsResponse resp, link_.control()->Stats(Deadline()));
    ServerStats out;
    out.info.insert(resp.info().begin(), resp.info().end());
    out.counters.insert(resp.counters().begin(), resp.counters().end());
    return out;
  }

  uint64_t max_value_bytes() const override { return link_.max_value_bytes(); }

  std::string transport_name() const override {
    std::shared_ptr<DataPath> path = link_.Current().path;
    return path ? std::string(path->name()) : "none";
  }

  // Reads the registry only: nothing to gather from the paths, since every
  // path registered its counters there.
  std::map<std::string, uint64_t> metrics() const override {
    return metrics::FlattenSnapshot(registry_.TakeSnapshot());
  }

 private:
  // Every operation's deadline, taken when the attempt starts (a retry after
  // a reconnect gets a fresh one).
  absl::Time Deadline() const { return absl::Now() + options_.op_timeout; }

  const Options options_;
  // Declared first so that it outlives the link (RDMA paths hold pointers
  // to counters it owns).
  metrics::Registry registry_;
  const ClientMetrics metrics_;
  initiator::SharedContext rdma_;
  ServerLink link_;
};

control::ControlSecurity SecurityOf(const Options& options) {
  control::ControlSecurity security;
  security.auth_token = options.auth_token;
  security.tls_ca_file = options.tls_ca_file;
  security.tls_cert_file = options.tls_cert_file;
  security.tls_key_file = options.tls_key_file;
  security.tls_server_name = options.tls_server_name;
  return security;
}

// The single-node client of `server`.
absl::StatusOr<std::unique_ptr<KvClient>> ConnectSingle(const Options& options,
                                                        const std::string& server) {
  Options single = options;
  single.servers = {server};
  // Dialling checks the security options (files, token) but connects
  // lazily: an unreachable server shows as a failed handshake in Init().
  KV_ASSIGN_OR_RETURN(std::unique_ptr<control::ControlClient> control,
                      control::ControlClient::Dial(server, SecurityOf(options)));
  auto impl = std::make_unique<ClientImpl>(single, std::move(control));
  KV_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<KvClient>(std::move(impl));
}

}  // namespace

// The pair whose status stands for the batch: the first of unknown outcome,
// else the first that failed.
absl::Status KvClient::MultiPut(absl::Span<const std::pair<std::string, std::string>> pairs) {
  KV_ASSIGN_OR_RETURN(std::vector<absl::Status> each, MultiPutEach(pairs));
  size_t failed = 0, unknown = 0;
  std::optional<size_t> first;
  for (size_t i = 0; i < each.size(); ++i) {
    if (each[i].ok()) continue;
    ++failed;
    const bool is_unknown = absl::IsUnknown(each[i]);
    if (is_unknown) ++unknown;
    if (!first.has_value() || (is_unknown && !absl::IsUnknown(each[*first]))) first = i;
  }
  if (!first.has_value()) return absl::OkStatus();
  const absl::Status& s = each[*first];
  absl::Status out(s.code(),
                   absl::StrCat(s.message(), " (MultiPut pair ", *first, " of ", each.size(),
                                ", key \"", absl::CHexEscape(pairs[*first].first), "\"; ", failed,
                                " pair(s) failed, ", unknown, " of them of unknown outcome)"));
  s.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& value) { out.SetPayload(url, value); });
  return out;
}

absl::StatusOr<std::unique_ptr<KvClient>> KvClient::Connect(const Options& options) {
  if (options.servers.empty()) return absl::InvalidArgumentError("Options::servers is empty");
  for (const std::string& server : options.servers) {
    KV_RETURN_IF_ERROR(ValidateServerAddress(server));
  }
  // The security options are checked before anything is dialled, so that
  // their errors are the same in both modes.
  KV_RETURN_IF_ERROR(
      control::ControlClient::DialChannel(options.servers[0], SecurityOf(options)).status());
  std::string single_node_seed;
  absl::StatusOr<std::unique_ptr<KvClient>> cluster = ConnectCluster(options, &single_node_seed);
  if (cluster.ok()) return cluster;
  if (IsSingleNodeAnswer(cluster.status())) return ConnectSingle(options, single_node_seed);
  // No seed handed out a map. If the first seed cannot be reached or refuses
  // this client, its handshake says so in the words it always used;
  // a server that answers the handshake but not with a map (a cluster node
  // without a map yet) gets the cluster error.
  absl::StatusOr<std::unique_ptr<KvClient>> single = ConnectSingle(options, options.servers[0]);
  if (!single.ok()) return single.status();
  return cluster.status();
}

}  // namespace client
}  // namespace kvstore
