// Copyright 2026 The kvstore Authors.
//
// GrpcEtcdClient: EtcdClient over the gRPC stubs generated from etcd's own
// rpc.proto (//third_party/etcd). Unary calls run on the current endpoint;
// the watch runs in etcd_watch.cc.

#include "server/cluster/membership/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/tls/grpc_tls.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "server/cluster/membership/etcd/etcd_grpc.h"
#include "server/cluster/membership/etcd/etcd_watch.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace {

using internal::EtcdEndpoint;
using internal::EtcdStubs;
using internal::FromGrpc;
using internal::PrefixEnd;
using internal::ToKeyValue;

absl::Status CheckKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("etcd: empty key");
  return absl::OkStatus();
}

etcdserverpb::Compare::CompareResult ToProto(Compare::Op op) {
  switch (op) {
    case Compare::Op::kEqual:
      return etcdserverpb::Compare::EQUAL;
    case Compare::Op::kNotEqual:
      return etcdserverpb::Compare::NOT_EQUAL;
    case Compare::Op::kGreater:
      return etcdserverpb::Compare::GREATER;
    case Compare::Op::kLess:
      return etcdserverpb::Compare::LESS;
  }
  return etcdserverpb::Compare::EQUAL;
}

void FillCompare(const Compare& c, etcdserverpb::Compare* out) {
  out->set_key(c.key);
  out->set_result(ToProto(c.op));
  switch (c.target) {
    case Compare::Target::kCreateRevision:
      out->set_target(etcdserverpb::Compare::CREATE);
      out->set_create_revision(c.number);
      break;
    case Compare::Target::kModRevision:
      out->set_target(etcdserverpb::Compare::MOD);
      out->set_mod_revision(c.number);
      break;
    case Compare::Target::kVersion:
      out->set_target(etcdserverpb::Compare::VERSION);
      out->set_version(c.number);
      break;
    case Compare::Target::kValue:
      out->set_target(etcdserverpb::Compare::VALUE);
      out->set_value(c.value);
      break;
    case Compare::Target::kLease:
      out->set_target(etcdserverpb::Compare::LEASE);
      out->set_lease(c.number);
      break;
  }
}

void FillOp(const TxnOp& op, etcdserverpb::RequestOp* out) {
  switch (op.kind) {
    case TxnOp::Kind::kPut: {
      etcdserverpb::PutRequest* put = out->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      break;
    }
    case TxnOp::Kind::kDelete:
      out->mutable_request_delete_range()->set_key(op.key);
      break;
    case TxnOp::Kind::kGet:
      out->mutable_request_range()->set_key(op.key);
      break;
  }
}

// etcd's Authenticate: the token for `user`. kUnauthenticated when etcd
// refuses the name or password, the call's status otherwise.
absl::StatusOr<std::string> Authenticate(const EtcdStubs& stubs, const std::string& address,
                                         const std::string& user, const std::string& password,
                                         absl::Duration timeout) {
  etcdserverpb::AuthenticateRequest req;
  req.set_name(user);
  req.set_password(password);
  etcdserverpb::AuthenticateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  const grpc::Status status = stubs.auth->Authenticate(&ctx, req, &resp);
  if (status.ok()) return resp.token();
  absl::Status s = FromGrpc(status, address, "Authenticate");
  if (absl::StrContains(status.error_message(), "authentication failed") ||
      absl::StrContains(status.error_message(), "invalid user ID or password")) {
    return absl::UnauthenticatedError(
        absl::StrCat(s.message(), " (check --etcd_user and --etcd_password_file)"));
  }
  return s;
}

// The channel credentials for every endpoint: TLS with a CA, else insecure.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(const EtcdOptions& o) {
  if (o.ca_file.empty()) {
    if (!o.cert_file.empty() || !o.key_file.empty()) {
      return absl::InvalidArgumentError(
          "--etcd_cert and --etcd_key need --etcd_ca (the CA of etcd's certificate)");
    }
    return grpc::InsecureChannelCredentials();
  }
  tls::PemFiles files;
  files.ca = o.ca_file;
  files.cert = o.cert_file;
  files.key = o.key_file;
  files.ca_flag = "etcd_ca";
  files.cert_flag = "etcd_cert";
  files.key_flag = "etcd_key";
  return tls::ReloadingChannelCredentials(files, o.tls_reload_interval);
}

class GrpcEtcdClient final : public EtcdClient {
 public:
  GrpcEtcdClient(std::vector<std::unique_ptr<EtcdEndpoint>> endpoints, size_t current,
                 const EtcdOptions& options, std::string token)
      : endpoints_(std::move(endpoints)),
        current_(current),
        rpc_timeout_(options.rpc_timeout),
        user_(options.user),
        password_(options.password),
        token_(std::move(token)) {}

  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) override {
    etcdserverpb::LeaseGrantRequest req;
    // Whole seconds, rounded up; ToInt64Seconds saturates for huge values.
    int64_t seconds = absl::ToInt64Seconds(ttl);
    if (ttl > absl::Seconds(seconds) && seconds < std::numeric_limits<int64_t>::max()) ++seconds;
    req.set_ttl(std::max<int64_t>(1, seconds));
    etcdserverpb::LeaseGrantResponse resp;
    absl::Status s = Call("LeaseGrant", [&](const EtcdStubs& e, grpc::ClientContext* ctx) {
      return e.lease->LeaseGrant(ctx, req, &resp);
    });
    if (!s.ok()) return s;
    if (!resp.error().empty()) return absl::UnknownError("etcd LeaseGrant: " + resp.error());
    return resp.id();
  }

  absl::Status RevokeLease(int64_t lease) override {
    etcdserverpb::LeaseRevokeRequest req;
    req.set_id(lease);
    etcdserverpb::LeaseRevokeResponse resp;
    return Call("LeaseRevoke", [&](const EtcdStubs& e, grpc::ClientContext* ctx) {
      return e.lease->LeaseRevoke(ctx, req, &resp);
    });
  }

  // A keepalive stream per call: one round trip, then the stream is closed.
  // Lease renewals are seconds apart, so keeping a stream open would save
  // little and would need its own error recovery.
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease) override {
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    etcdserverpb::LeaseKeepAliveResponse resp;
    bool got = false;
    absl::Status s = Call("LeaseKeepAlive", [&](const EtcdStubs& e, grpc::ClientContext* ctx) {
      // A member without a leader would hold the stream open and silent.
      ctx->AddMetadata(std::string(internal::kRequireLeaderKey),
                       std::string(internal::kRequireLeaderValue));
      auto stream = e.lease->LeaseKeepAlive(ctx);
      // Read the reply before half-closing: etcd ends the stream when it
      // sees the client's end of writes.
      if (stream->Write(req)) got = stream->Read(&resp);
      stream->WritesDone();
      return stream->Finish();
    });
    if (!s.ok()) return s;
    if (!got) return absl::UnavailableError("etcd LeaseKeepAlive: stream closed without a reply");
    if (resp.ttl() <= 0) {
      return absl::NotFoundError(absl::StrCat("etcd: lease ", lease, " expired or revoked"));
    }
    return absl::Seconds(resp.ttl());
  }

  absl::StatusOr<std::optional<KeyValue>> Get(absl::string_view key) override {
    if (absl::Status s = CheckKey(key); !s.ok()) return s;
    etcdserverpb::RangeRequest req;
    req.set_key(std::string(key));
    etcdserverpb::RangeResponse resp;
    absl::Status s = Call("Range", [&](const EtcdStubs& e, grpc::ClientContext* ctx) {
      return e.kv->Range(ctx, req, &resp);
    });
    if (!s.ok()) return s;
    if (resp.kvs_size() == 0) return std::optional<KeyValue>();
    return std::optional<KeyValue>(ToKeyValue(resp.kvs(0)));
  }

  absl::StatusOr<std::vector<KeyValue>> GetPrefix(absl::string_view prefix,
                                                  int64_t* revision) override {
    etcdserverpb::RangeRequest req;
    // An empty prefix is every key: etcd reads key "\0" with range_end "\0"
    // as "all keys >= \0".
    req.set_key(prefix.empty() ? std::string(1, '\0') : std::string(prefix));
    req.set_range_end(PrefixEnd(prefix));
    req.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
    req.set_sort_target(etcdserverpb::RangeRequest::KEY);
    etcdserverpb::RangeResponse resp;
    absl::Status s = Call("Range", [&](const EtcdStubs& e, grpc::ClientContext* ctx) {
      return e.kv->Range(ctx, req, &resp);
    });
    if (!s.ok()) return s;
    std::vector<KeyValue> out;
    out.reserve(resp.kvs_size());
    for (const auto& kv : resp.kvs()) out.push_back(ToKeyValue(kv));
    if (revision != nullptr) *revision = resp.header().revision();
    return out;
  }

  absl::StatusOr<int64_t> Put(absl::string_view key, absl::string_view value,
                              int64_t lease) override {
    if (absl::Status s = CheckKey(key); !s.ok()) return s;
    etcdserverpb::PutRequest req;
    req.set_key(std::string(key));
    req.set_value(std::string(value));
    req.set_lease(lease);
    etcdserverpb::PutResponse resp;
    absl::Status s = Call("Put", [&](const EtcdStubs& e, grpc::ClientContext* ctx) {
      return e.kv->Put(ctx, req, &resp);
    });
    if (!s.ok()) return s;
    return resp.header().revision();
  }

  absl::StatusOr<int64_t> Delete(absl::string_view key) override {
    if (absl::Status s = CheckKey(key); !s.ok()) return s;
    etcdserverpb::DeleteRangeRequest req;
    req.set_key(std::string(key));
    etcdserverpb::DeleteRangeResponse resp;
    absl::Status s = Call("DeleteRange", [&](const EtcdStubs& e, grpc::ClientContext* ctx) {
      return e.kv->DeleteRange(ctx, req, &resp);
    });
    if (!s.ok()) return s;
    return resp.header().revision();
  }

  absl::StatusOr<TxnResult> Txn(const std::vector<Compare>& compares,
                                const std::vector<TxnOp>& success,
                                const std::vector<TxnOp>& failure) override {
    etcdserverpb::TxnRequest req;
    for (const Compare& c : compares) {
      if (absl::Status s = CheckKey(c.key); !s.ok()) return s;
      FillCompare(c, req.add_compare());
    }
    for (const TxnOp& op : success) {
      if (absl::Status s = CheckKey(op.key); !s.ok()) return s;
      FillOp(op, req.add_success());
    }
    for (const TxnOp& op : failure) {
      if (absl::Status s = CheckKey(op.key); !s.ok()) return s;
      FillOp(op, req.add_failure());
    }
    etcdserverpb::TxnResponse resp;
    absl::Status s = Call("Txn", [&](const EtcdStubs& e, grpc::ClientContext* ctx) {
      return e.kv->Txn(ctx, req, &resp);
    });
    if (!s.ok()) return s;
    TxnResult result;
    result.succeeded = resp.succeeded();
    result.revision = resp.header().revision();
    for (const auto& r : resp.responses()) {
      if (!r.has_response_range()) continue;
      for (const auto& kv : r.response_range().kvs()) result.gets.push_back(ToKeyValue(kv));
    }
    return result;
  }

  absl::StatusOr<std::unique_ptr<WatchHandle>> Watch(
      absl::string_view prefix, int64_t start_revision,
      std::function<void(absl::StatusOr<std::vector<WatchEvent>>)> on_events) override {
    EtcdEndpoint& e = *endpoints_[current_.load() % endpoints_.size()];
    std::shared_ptr<const EtcdStubs> stubs = e.stubs();
    absl::StatusOr<std::unique_ptr<WatchHandle>> w = internal::StartWatch(
        e.address(), stubs, Token(), prefix, start_revision, rpc_timeout_, std::move(on_events));
    if (!w.ok() && absl::IsUnavailable(w.status())) Failed(&e, stubs.get());
    return w;
  }

  uint64_t endpoint_changes() const override { return endpoint_changes_.load(); }

 private:
  // Runs `rpc` on the current endpoint with a deadline of rpc_timeout. On
  // UNAVAILABLE (or a timeout) the next call goes to the next endpoint, on a
  // fresh channel; the failed call is not retried, since a Put or Txn may
  // have been applied.
  //
  // With etcd authentication the call carries the token; when etcd says the
  // token is stale the client authenticates again and makes the call once
  // more (etcd refused it before applying anything).
  template <typename Rpc>
  absl::Status Call(absl::string_view method, Rpc rpc) {
    for (int attempt = 0;; ++attempt) {
      EtcdEndpoint& e = *endpoints_[current_.load() % endpoints_.size()];
      std::shared_ptr<const EtcdStubs> stubs = e.stubs();
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
      const std::string token = Token();
      if (!token.empty()) ctx.AddMetadata(std::string(internal::kTokenKey), token);
      const grpc::Status status = rpc(*stubs, &ctx);
      if (!status.ok() && attempt == 0 && !user_.empty() && internal::IsStaleToken(status)) {
        absl::StatusOr<std::string> fresh =
            Authenticate(*stubs, e.address(), user_, password_, rpc_timeout_);
        if (!fresh.ok()) return fresh.status();
        SetToken(*std::move(fresh));
        continue;
      }
      absl::Status s = FromGrpc(status, e.address(), method);
      if (absl::IsUnavailable(s)) Failed(&e, stubs.get());
      return s;
    }
  }

  std::string Token() const {
    absl::MutexLock lock(&token_mu_);
    return token_;
  }
  void SetToken(std::string token) {
    absl::MutexLock lock(&token_mu_);
    token_ = std::move(token);
  }

  // A call on `stubs` of `e` failed as UNAVAILABLE: the endpoint gets a new
  // channel (see EtcdEndpoint) and the next call goes to the next endpoint.
  void Failed(EtcdEndpoint* e, const EtcdStubs* stubs) {
    e->Renew(stubs);
    Advance(e);
  }

  // Moves to the endpoint after `failed` unless another thread already moved.
  void Advance(const EtcdEndpoint* failed) {
    size_t cur = current_.load();
    if (endpoints_[cur % endpoints_.size()].get() == failed &&
        current_.compare_exchange_strong(cur, (cur + 1) % endpoints_.size())) {
      endpoint_changes_.fetch_add(1);
    }
  }

  const std::vector<std::unique_ptr<EtcdEndpoint>> endpoints_;
  std::atomic<size_t> current_;
  std::atomic<uint64_t> endpoint_changes_{0};
  const absl::Duration rpc_timeout_;
  const std::string user_;
  const std::string password_;
  mutable absl::Mutex token_mu_;
  std::string token_ ABSL_GUARDED_BY(token_mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const EtcdOptions& options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoints given");
  if (options.rpc_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd: rpc_timeout must be positive");
  }
  if (options.password.size() > 0 && options.user.empty()) {
    return absl::InvalidArgumentError("etcd: a password needs a user (--etcd_user)");
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = Credentials(options);
  if (!creds.ok()) return creds.status();
  std::vector<std::unique_ptr<EtcdEndpoint>> endpoints;
  for (const std::string& raw : options.endpoints) {
    absl::string_view address = raw;
    absl::ConsumePrefix(&address, "http://");
    if (absl::ConsumePrefix(&address, "https://") && options.ca_file.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd: ", raw, " is a TLS endpoint: give --etcd_ca (etcd's CA)"));
    }
    if (address.empty()) return absl::InvalidArgumentError("etcd: empty endpoint");
    endpoints.push_back(std::make_unique<EtcdEndpoint>(std::string(address), *creds));
  }
  // The first endpoint that answers a Status call becomes the current one;
  // with a user it must also accept the password.
  std::vector<std::string> failures;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    etcdserverpb::StatusRequest req;
    etcdserverpb::StatusResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options.rpc_timeout));
    absl::Status s = FromGrpc(endpoints[i]->stubs()->maintenance->Status(&ctx, req, &resp),
                              endpoints[i]->address(), "Status");
    std::string token;
    if (s.ok() && !options.user.empty()) {
      absl::StatusOr<std::string> t =
          Authenticate(*endpoints[i]->stubs(), endpoints[i]->address(), options.user,
                       options.password, options.rpc_timeout);
      // A wrong password is wrong on every endpoint: no point trying more.
      if (absl::IsUnauthenticated(t.status())) return t.status();
      if (t.ok()) token = *std::move(t);
      s = t.status();
    }
    if (s.ok()) {
      return std::unique_ptr<EtcdClient>(
          new GrpcEtcdClient(std::move(endpoints), i, options, std::move(token)));
    }
    failures.push_back(std::string(s.message()));
  }
  return absl::UnavailableError(
      absl::StrCat("etcd: no endpoint answered: ", absl::StrJoin(failures, "; ")));
}

}  // namespace etcd
}  // namespace server
}  // namespace kvstore
