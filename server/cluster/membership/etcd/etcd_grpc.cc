// Copyright 2026 The kvstore Authors.

#include "server/cluster/membership/etcd/etcd_grpc.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace internal {
namespace {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  grpc::ChannelArguments args;
  // gRPC's default reconnect backoff grows to two minutes; etcd restarts in
  // about a second and a server should see it back soon after.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Despite its name, gRPC uses this as the time one connection attempt may
  // take (TCP connect plus the server's SETTINGS frame). 100 ms is too
  // short on a loaded machine; a call's own deadline still bounds the call.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  // Our own subchannel: with gRPC's global pool a new channel to the same
  // address would share the old one's subchannel and its failure and
  // backoff, which is what EtcdEndpoint::Renew must get away from.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Keepalive pings notice an etcd that hangs (rather than closes) under a
  // long-lived watch. etcd refuses pings more often than every 5 s
  // (--grpc-keepalive-min-time), so stay above that.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return grpc::CreateCustomChannel(address, creds, args);
}

}  // namespace

EtcdStubs::EtcdStubs(const std::string& address,
                     const std::shared_ptr<grpc::ChannelCredentials>& creds)
    : channel(MakeChannel(address, creds)),
      kv(etcdserverpb::KV::NewStub(channel)),
      lease(etcdserverpb::Lease::NewStub(channel)),
      watch(etcdserverpb::Watch::NewStub(channel)),
      maintenance(etcdserverpb::Maintenance::NewStub(channel)),
      auth(etcdserverpb::Auth::NewStub(channel)) {}

EtcdEndpoint::EtcdEndpoint(std::string address, std::shared_ptr<grpc::ChannelCredentials> creds)
    : address_(std::move(address)),
      creds_(std::move(creds)),
      stubs_(std::make_shared<const EtcdStubs>(address_, creds_)) {}

std::shared_ptr<const EtcdStubs> EtcdEndpoint::stubs() const {
  absl::MutexLock lock(&mu_);
  return stubs_;
}

void EtcdEndpoint::Renew(const EtcdStubs* failed) {
  {
    absl::MutexLock lock(&mu_);
    if (stubs_.get() != failed) return;
  }
  // Made outside the lock (creating a channel is not free); of two threads
  // racing here, the second finds stubs_ changed and drops its channel.
  auto fresh = std::make_shared<const EtcdStubs>(address_, creds_);
  std::shared_ptr<const EtcdStubs> old;
  absl::MutexLock lock(&mu_);
  if (stubs_.get() != failed) return;
  old = std::move(stubs_);  // destroyed after the lock is released
  stubs_ = std::move(fresh);
}

bool IsStaleToken(const grpc::Status& status) {
  // etcd's texts (rpctypes): an expired or unknown token, a token older
  // than the auth store, and no token at all.
  const std::string& m = status.error_message();
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         m.find("invalid auth token") != std::string::npos ||
         m.find("revision of auth store is old") != std::string::npos ||
         m.find("user name is empty") != std::string::npos;
}

absl::Status FromGrpc(const grpc::Status& status, absl::string_view address,
                      absl::string_view method) {
  if (status.ok()) return absl::OkStatus();
  absl::StatusCode code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kDeadlineExceeded) code = absl::StatusCode::kUnavailable;
  return absl::Status(code,
                      absl::StrCat("etcd ", address, " ", method, ": ", status.error_message()));
}

std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

KeyValue ToKeyValue(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

}  // namespace internal
}  // namespace etcd
}  // namespace server
}  // namespace kvstore
