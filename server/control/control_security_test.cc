// Copyright 2026 The kvstore Authors.
//
// The control plane's security rules, through a real gRPC server and
// channel: the bearer token on every RPC, sessions, who may end which queue
// pair and lease, per-session quotas and session expiry. There is no RDMA
// device here: leases held by a queue pair are made with FakeKey, a
// LeaseWriteKey that is bound to a connection id but to no queue pair (the
// real keys are exercised by tests/rdma_auth_test.cc).

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/auth/token.h"
#include "common/metrics/testing.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/kv_control.grpc.pb.h"
#include "server/control/control_service.h"

namespace kvstore {
namespace server {
namespace {

namespace pb = ::kvstore::v1;
using ::testing::HasSubstr;

constexpr uint64_t kEpoch = 42;
constexpr uint64_t kSegment = 1 << 20;
const char kToken[] = "0123456789abcdef-test-token";

// A write key bound to connection `connection_id` and to nothing else.
class FakeKey : public LeaseWriteKey {
 public:
  FakeKey(uint32_t rkey, uint64_t connection_id) : LeaseWriteKey(rkey, connection_id) {}
  void Revoke() override {}
};

class ControlSecurityTest : public ::testing::Test {
 protected:
  // Builds the store and a service with `token` and `sessions`; no sweeper
  // thread (tests call SweepSessions()).
  void Start(const std::string& token, SessionOptions sessions = SessionOptions{}) {
    MemoryPoolOptions po;
    po.data_bytes = 16 * kSegment;
    po.index_bytes = 1 << 20;
    auto pool = MemoryPool::Create(po);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::move(*pool);
    KvStoreOptions so;
    so.segment_bytes = kSegment;
    so.cleaner_interval = absl::ZeroDuration();
    so.registry = &registry_;
    so.limits.max_value_bytes = 100000;
    auto store = KvStore::Create(pool_.get(), so);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    LeaseOptions lo;
    lo.expire_interval = absl::ZeroDuration();
    lo.registry = &registry_;
    leases_ = std::make_unique<LeaseTable>(store_.get(), lo);
    ControlServiceDeps deps;
    deps.store = store_.get();
    deps.leases = leases_.get();
    deps.pool = pool_.get();
    deps.epoch = kEpoch;
    deps.registry = &registry_;
    deps.credentials.data_token = token;
    deps.sessions = sessions;
    deps.session_sweep_interval = absl::ZeroDuration();
    service_ = std::make_unique<KvControlServiceImpl>(std::move(deps));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = pb::KvControl::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    server_.reset();
    service_.reset();
    leases_.reset();
    store_.reset();
    pool_.reset();
  }

  // A context carrying `token` (none when empty).
  static std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) ctx->AddMetadata("authorization", auth::BearerHeader(token));
    return ctx;
  }

  uint64_t Handshake(const std::string& token = "") {
    pb::HandshakeResponse resp;
    grpc::Status s = stub_->Handshake(Ctx(token).get(), pb::HandshakeRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.session_id();
  }

  // Makes `connection_id` one of `session`'s connections, as a successful
  // ConnectQp would.
  void AdoptConnection(uint64_t session, uint64_t connection_id) {
    auto s = service_->sessions().Use(session);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::MutexLock lock(&(*s)->mu);
    (*s)->connections.insert(connection_id);
  }

  // A lease held by `connection_id`, granted straight in the lease table.
  uint64_t GrantHeldBy(uint64_t connection_id, uint64_t bytes = 4096) {
    auto info = leases_->Grant(bytes, "test", [connection_id](const LeaseInfo&) {
      return absl::StatusOr<std::unique_ptr<LeaseWriteKey>>(
          std::make_unique<FakeKey>(77, connection_id));
    });
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->lease_id : 0;
  }

  grpc::Status Release(uint64_t session, uint64_t lease_id, uint64_t connection_id) {
    pb::ReleaseLeaseRequest req;
    req.set_epoch(kEpoch);
    req.set_session_id(session);
    req.set_lease_id(lease_id);
    req.set_connection_id(connection_id);
    pb::ReleaseLeaseResponse resp;
    return stub_->ReleaseLease(Ctx("").get(), req, &resp);
  }

  grpc::Status Renew(uint64_t session, uint64_t lease_id, uint64_t connection_id) {
    pb::RenewLeaseRequest req;
    req.set_epoch(kEpoch);
    req.set_session_id(session);
    req.set_lease_id(lease_id);
    req.set_connection_id(connection_id);
    pb::RenewLeaseResponse resp;
    return stub_->RenewLease(Ctx("").get(), req, &resp);
  }

  grpc::Status Grant(uint64_t session, uint64_t connection_id, uint64_t bytes) {
    pb::GrantLeaseRequest req;
    req.set_epoch(kEpoch);
    req.set_session_id(session);
    req.set_connection_id(connection_id);
    req.set_bytes(bytes);
    pb::GrantLeaseResponse resp;
    return stub_->GrantLease(Ctx("").get(), req, &resp);
  }

  uint64_t Refusals(const char* reason) {
    return metrics::testing::Value(
        registry_, absl::StrCat("kvstore_grpc_session_refusals_total{reason=\"", reason, "\"}"));
  }

  metrics::Registry registry_;
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<LeaseTable> leases_;
  std::unique_ptr<KvControlServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<pb::KvControl::Stub> stub_;
};

// Calls every RPC of the service with `token` and returns the statuses.
std::vector<grpc::Status> CallEveryRpc(pb::KvControl::Stub& stub, const std::string& token,
                                       pb::HandshakeResponse* handshake) {
  auto ctx = [&token] {
    auto c = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) c->AddMetadata("authorization", auth::BearerHeader(token));
    return c;
  };
  std::vector<grpc::Status> out;
  out.push_back(stub.Handshake(ctx().get(), pb::HandshakeRequest(), handshake));
  pb::ConnectQpResponse connect;
  out.push_back(stub.ConnectQp(ctx().get(), pb::ConnectQpRequest(), &connect));
  pb::DisconnectQpResponse disconnect;
  out.push_back(stub.DisconnectQp(ctx().get(), pb::DisconnectQpRequest(), &disconnect));
  pb::GrantLeaseResponse grant;
  out.push_back(stub.GrantLease(ctx().get(), pb::GrantLeaseRequest(), &grant));
  pb::RenewLeaseResponse renew;
  out.push_back(stub.RenewLease(ctx().get(), pb::RenewLeaseRequest(), &renew));
  pb::ReleaseLeaseResponse release;
  out.push_back(stub.ReleaseLease(ctx().get(), pb::ReleaseLeaseRequest(), &release));
  pb::GetRequest get_req;
  get_req.set_key("k");
  pb::GetResponse get;
  out.push_back(stub.Get(ctx().get(), get_req, &get));
  pb::PutRequest put_req;
  put_req.set_key("k");
  put_req.set_value("v");
  pb::PutResponse put;
  out.push_back(stub.Put(ctx().get(), put_req, &put));
  pb::DeleteRequest delete_req;
  delete_req.set_key("k");
  pb::DeleteResponse del;
  out.push_back(stub.Delete(ctx().get(), delete_req, &del));
  pb::StatsResponse stats;
  out.push_back(stub.Stats(ctx().get(), pb::StatsRequest(), &stats));
  pb::ScanResponse scan;
  out.push_back(stub.Scan(ctx().get(), pb::ScanRequest(), &scan));
  return out;
}

TEST_F(ControlSecurityTest, EveryRpcNeedsTheBearerToken) {
  ASSERT_NO_FATAL_FAILURE(Start(kToken));
  for (const std::string& token : {std::string(), std::string("0123456789abcdef-wrong-token")}) {
    pb::HandshakeResponse handshake;
    std::vector<grpc::Status> statuses = CallEveryRpc(*stub_, token, &handshake);
    ASSERT_EQ(statuses.size(), 11u);
    for (size_t i = 0; i < statuses.size(); ++i) {
      EXPECT_EQ(statuses[i].error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << "rpc #" << i << " token '" << token << "': " << statuses[i].error_message();
      EXPECT_THAT(statuses[i].error_message(),
                  HasSubstr(token.empty() ? "missing bearer token" : "wrong bearer token"));
    }
    // Nothing about the server left before authentication.
    EXPECT_EQ(handshake.session_id(), 0u);
    EXPECT_EQ(handshake.index().seed(), 0u);
    EXPECT_EQ(handshake.epoch(), 0u);
  }
  EXPECT_EQ(metrics::testing::Value(registry_, "kvstore_grpc_auth_failures_total"), 22u);
  EXPECT_EQ(store_->size(), 0u);  // the refused Put wrote nothing

  // With the token, the same calls get past authentication.
  pb::HandshakeResponse handshake;
  std::vector<grpc::Status> statuses = CallEveryRpc(*stub_, kToken, &handshake);
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_NE(statuses[i].error_code(), grpc::StatusCode::UNAUTHENTICATED) << "rpc #" << i;
  }
  EXPECT_TRUE(statuses[0].ok());
  EXPECT_NE(handshake.session_id(), 0u);
  EXPECT_EQ(handshake.epoch(), kEpoch);
  EXPECT_TRUE(statuses[7].ok()) << statuses[7].error_message();  // Put
  EXPECT_EQ(metrics::testing::Value(registry_, "kvstore_grpc_auth_failures_total"), 22u);
}

TEST_F(ControlSecurityTest, HandshakeOpensDistinctSessionsUpToTheCap) {
  SessionOptions o;
  o.max_sessions = 3;
  ASSERT_NO_FATAL_FAILURE(Start("", o));
  const uint64_t a = Handshake(), b = Handshake(), c = Handshake();
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  pb::HandshakeResponse resp;
  grpc::Status s = stub_->Handshake(Ctx("").get(), pb::HandshakeRequest(), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("--max_sessions"));
  EXPECT_EQ(Refusals("max_sessions"), 1u);
}

// Finding 2: a release (or renewal) by another session, during the grant or
// after it, fails and the chunk stays with its holder.
TEST_F(ControlSecurityTest, AnotherSessionCannotReleaseOrRenewALease) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  const uint64_t owner = Handshake(), intruder = Handshake();
  AdoptConnection(owner, 5);
  AdoptConnection(intruder, 6);

  // During the grant: the key maker waits while the intruder tries every
  // lease id the grant could get.
  absl::Notification binding, proceed;
  std::thread granting([&] {
    auto info = leases_->Grant(4096, "owner", [&](const LeaseInfo&) {
      binding.Notify();
      proceed.WaitForNotification();
      return absl::StatusOr<std::unique_ptr<LeaseWriteKey>>(std::make_unique<FakeKey>(77, 5));
    });
    EXPECT_TRUE(info.ok()) << info.status();
  });
  binding.WaitForNotification();
  for (uint64_t id = 1; id <= 3; ++id) {
    for (uint64_t conn : {uint64_t{0}, uint64_t{5}, uint64_t{6}}) {
      EXPECT_FALSE(Release(intruder, id, conn).ok()) << id << "/" << conn;
    }
  }
  proceed.Notify();
  granting.join();
  const uint64_t lease = 1;
  ASSERT_TRUE(leases_->Lookup(lease).ok());

  // After the grant: the intruder's own connection, the owner's connection,
  // no connection, no session.
  grpc::Status s = Release(intruder, lease, 6);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  s = Release(intruder, lease, 5);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("does not belong to this session"));
  s = Release(intruder, lease, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  s = Release(0, lease, 5);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_EQ(Renew(intruder, lease, 5).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Renew(intruder, lease, 6).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // The chunk is still the owner's.
  auto info = leases_->Lookup(lease);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->write_rkey, 77u);
  EXPECT_EQ(metrics::testing::Value(registry_, "kvstore_leases_active"), 1u);

  // The owner renews and releases it.
  EXPECT_TRUE(Renew(owner, lease, 5).ok());
  s = Release(owner, lease, 5);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(leases_->Lookup(lease).ok());
}

// Finding 5: DisconnectQp of a queue pair another session made is refused
// before anything is looked up.
TEST_F(ControlSecurityTest, AnotherSessionCannotDisconnectAQueuePair) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  const uint64_t owner = Handshake(), intruder = Handshake();
  AdoptConnection(owner, 5);
  for (uint64_t session : {intruder, uint64_t{0}}) {
    pb::DisconnectQpRequest req;
    req.set_epoch(kEpoch);
    req.set_session_id(session);
    req.set_connection_id(5);
    pb::DisconnectQpResponse resp;
    grpc::Status s = stub_->DisconnectQp(Ctx("").get(), req, &resp);
    EXPECT_EQ(s.error_code(), session == 0 ? grpc::StatusCode::FAILED_PRECONDITION
                                           : grpc::StatusCode::PERMISSION_DENIED)
        << s.error_message();
  }
  EXPECT_EQ(Refusals("not_owner"), 1u);
}

TEST_F(ControlSecurityTest, LeaseQuotasPerSession) {
  SessionOptions o;
  o.max_leases = 2;
  o.max_lease_bytes = 3 * kSegment;
  ASSERT_NO_FATAL_FAILURE(Start("", o));
  const uint64_t a = Handshake(), b = Handshake();
  AdoptConnection(a, 5);
  AdoptConnection(a, 8);
  AdoptConnection(b, 6);
  // Two segments on one connection, then a 2-segment ask: over the bytes.
  GrantHeldBy(5, 2 * kSegment);
  grpc::Status s = Grant(a, 8, 2 * kSegment);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("--session_max_lease_bytes"));
  // One more (on another of its connections) makes two leases: the count.
  GrantHeldBy(8, 4096);
  s = Grant(a, 5, 4096);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("--session_max_leases"));
  EXPECT_EQ(Refusals("quota_leases"), 1u);
  EXPECT_EQ(Refusals("quota_lease_bytes"), 1u);
  // Another session's quota is its own: it gets past the quota (and fails
  // only for want of an RDMA device to bind the key on).
  s = Grant(b, 6, 4096);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("no RDMA device"));
}

// client_name is kept with every session, lease and queue pair and goes
// into log lines: a long one would be memory held for the session's life,
// a newline a forged log line. Both are refused before anything is kept.
TEST_F(ControlSecurityTest, LongOrUnprintableClientNamesAreRefused) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  auto handshake = [&](const std::string& name) {
    pb::HandshakeRequest req;
    req.set_client_name(name);
    pb::HandshakeResponse resp;
    return stub_->Handshake(Ctx("").get(), req, &resp);
  };
  EXPECT_TRUE(handshake(std::string(128, 'a')).ok());
  EXPECT_TRUE(handshake("kvctl@host-1 (pid 42)").ok());
  const size_t sessions = service_->sessions().size();
  for (const std::string& bad :
       {std::string(129, 'a'), std::string(50 << 10, 'a'), std::string("evil\nI1202 forged"),
        std::string("tab\there"), std::string("caf\xc3\xa9")}) {
    grpc::Status s = handshake(bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.substr(0, 20);
    EXPECT_THAT(s.error_message(), HasSubstr("client_name"));
  }
  EXPECT_EQ(service_->sessions().size(), sessions) << "a refused handshake opened a session";

  // The two other requests that carry a name refuse it the same way.
  const uint64_t session = Handshake();
  AdoptConnection(session, 5);
  pb::GrantLeaseRequest grant;
  grant.set_session_id(session);
  grant.set_epoch(kEpoch);
  grant.set_connection_id(5);
  grant.set_bytes(4096);
  grant.set_client_name(std::string(1 << 20, 'n'));
  pb::GrantLeaseResponse grant_resp;
  grpc::Status s = stub_->GrantLease(Ctx("").get(), grant, &grant_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  pb::ConnectQpRequest connect;
  connect.set_session_id(session);
  connect.set_epoch(kEpoch);
  connect.set_client_name(std::string(1 << 20, 'n'));
  pb::ConnectQpResponse connect_resp;
  s = stub_->ConnectQp(Ctx("").get(), connect, &connect_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

TEST_F(ControlSecurityTest, IdleSessionsExpire) {
  SessionOptions o;
  o.ttl = absl::Seconds(30);
  ASSERT_NO_FATAL_FAILURE(Start("", o));
  const uint64_t idle = Handshake();
  EXPECT_EQ(service_->SweepSessions(absl::Now() + absl::Seconds(10)), 0u);
  EXPECT_EQ(service_->SweepSessions(absl::Now() + absl::Seconds(31)), 1u);
  grpc::Status s = Renew(idle, 1, 5);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("handshake again"));
  EXPECT_EQ(metrics::testing::Value(registry_, "kvstore_sessions_expired_total"), 1u);
  EXPECT_EQ(metrics::testing::Value(registry_, "kvstore_sessions_active"), 0u);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
