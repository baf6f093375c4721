// Copyright 2026 The kvstore Authors.
//
// LeaseManager's control-plane side against an in-process gRPC server that
// plays KvControl's lease RPCs: the session id on every request, and what a
// lost session does (the path breaks, and the caller sees kUnavailable, the
// code that makes KvClient handshake again), as opposed to a refusal that is
// the request's own (a quota: nothing breaks).
//
// The OpEngine it reports to needs a real device (its slots are registered
// memory), hence requires-rdma; without a device the tests skip.

#include "common/rdma/initiator/lease_manager.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/grpc_status.h"
#include "common/rdma/initiator/op_engine.h"
#include "common/rdma/initiator/rdma_context.h"
#include "common/testing/eventually.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace initiator {
namespace {

using ::kvstore::testing::Eventually;

// Grants succeed (a lease with a write key) or fail with `grant_reply`;
// renewals answer `renew_reply`. Records the session of every request.
class LeaseControl final : public v1::KvControl::Service {
 public:
  grpc::Status GrantLease(grpc::ServerContext*, const v1::GrantLeaseRequest* r,
                          v1::GrantLeaseResponse* resp) override {
    absl::MutexLock lock(&mu_);
    sessions_.push_back(r->session_id());
    epochs_.push_back(r->epoch());
    if (!grant_reply_.ok()) return grant_reply_;
    v1::Lease* l = resp->mutable_lease();
    l->set_lease_id(++next_id_);
    l->set_length(1 << 20);
    l->set_write_addr(0x1000);
    l->set_write_rkey(77);
    return grpc::Status::OK;
  }
  grpc::Status RenewLease(grpc::ServerContext*, const v1::RenewLeaseRequest* r,
                          v1::RenewLeaseResponse*) override {
    absl::MutexLock lock(&mu_);
    sessions_.push_back(r->session_id());
    epochs_.push_back(r->epoch());
    ++renewals_;
    return renew_reply_;
  }
  grpc::Status ReleaseLease(grpc::ServerContext*, const v1::ReleaseLeaseRequest* r,
                            v1::ReleaseLeaseResponse*) override {
    absl::MutexLock lock(&mu_);
    sessions_.push_back(r->session_id());
    epochs_.push_back(r->epoch());
    return grpc::Status::OK;
  }

  void set_grant_reply(grpc::Status s) {
    absl::MutexLock lock(&mu_);
    grant_reply_ = std::move(s);
  }
  void set_renew_reply(grpc::Status s) {
    absl::MutexLock lock(&mu_);
    renew_reply_ = std::move(s);
  }
  std::vector<uint64_t> sessions() {
    absl::MutexLock lock(&mu_);
    return sessions_;
  }
  std::vector<uint64_t> epochs() {
    absl::MutexLock lock(&mu_);
    return epochs_;
  }
  int renewals() {
    absl::MutexLock lock(&mu_);
    return renewals_;
  }

 private:
  absl::Mutex mu_;
  grpc::Status grant_reply_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  grpc::Status renew_reply_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  std::vector<uint64_t> sessions_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> epochs_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  int renewals_ ABSL_GUARDED_BY(mu_) = 0;
};

constexpr control::SessionScope kScope{7, 0x5e5510042};

class LeaseManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ctx = OpenRdmaContext("", 1 << 20);
    if (!ctx.ok()) GTEST_SKIP() << "no RDMA device: " << ctx.status();
    auto engine = OpEngine::Create(*ctx, 64);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    auto control = control::ControlClient::Dial(absl::StrCat("127.0.0.1:", port_));
    ASSERT_TRUE(control.ok()) << control.status();
    control_ = std::move(*control);
  }
  void TearDown() override {
    leases_.reset();
    if (server_) server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  void MakeManager(absl::Duration ttl) {
    leases_ =
        std::make_unique<LeaseManager>(control_.get(), engine_.get(), counters_, kScope,
                                       /*connection_id=*/3, "test", 4096, ttl, absl::Seconds(5));
  }

  LeaseControl service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<control::ControlClient> control_;
  metrics::Registry registry_;
  const LeaseCounters counters_{
      registry_.AddCounter("kvstore_test_granted_total", "Leases granted."),
      registry_.AddCounter("kvstore_test_released_total", "Leases released."),
      registry_.AddCounter("kvstore_test_renewed_total", "Leases renewed.")};
  std::unique_ptr<OpEngine> engine_;
  std::unique_ptr<LeaseManager> leases_;
};

TEST_F(LeaseManagerTest, EveryLeaseRpcCarriesTheSession) {
  MakeManager(absl::Seconds(60));
  auto space = leases_->Reserve(100);
  ASSERT_TRUE(space.ok()) << space.status();
  leases_->Finish(*space, absl::OkStatus());
  leases_->Shutdown(/*release=*/true);
  ASSERT_GE(service_.sessions().size(), 2u);  // the grant and the release
  for (uint64_t s : service_.sessions()) EXPECT_EQ(s, kScope.session_id);
  for (uint64_t e : service_.epochs()) EXPECT_EQ(e, kScope.epoch);
  // Counted in the counters the owner gave: every lease granted, and at
  // shutdown every one released (the fake confirms each release).
  EXPECT_GE(counters_.granted->Value(), 1u);
  EXPECT_EQ(counters_.released->Value(), counters_.granted->Value());
}

TEST_F(LeaseManagerTest, GrantForAnUnknownSessionBreaksThePath) {
  service_.set_grant_reply(ToGrpcStatus(cluster::ToStatus(cluster::Refusal::SessionLost(
      "no live session 25860964418 (expired or never opened): handshake again"))));
  MakeManager(absl::Seconds(60));
  auto space = leases_->Reserve(100);
  EXPECT_EQ(space.status().code(), absl::StatusCode::kUnavailable) << space.status();
  EXPECT_TRUE(engine_->broken());
}

TEST_F(LeaseManagerTest, UnauthenticatedGrantBreaksThePath) {
  service_.set_grant_reply(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "session expired"));
  MakeManager(absl::Seconds(60));
  EXPECT_EQ(leases_->Reserve(100).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(engine_->broken());
}

TEST_F(LeaseManagerTest, RefusedGrantOfItsOwnDoesNotBreakThePath) {
  service_.set_grant_reply(
      grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "session lease quota reached"));
  MakeManager(absl::Seconds(60));
  EXPECT_EQ(leases_->Reserve(100).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(engine_->broken());
}

TEST_F(LeaseManagerTest, RenewalForAnUnknownSessionBreaksThePath) {
  service_.set_renew_reply(ToGrpcStatus(cluster::ToStatus(cluster::Refusal::SessionLost(
      "no live session 25860964418 (expired or never opened): handshake again"))));
  // The shortest TTL the client accepts: renewals start after 50 ms.
  MakeManager(absl::Milliseconds(100));
  auto space = leases_->Reserve(100);
  ASSERT_TRUE(space.ok()) << space.status();
  leases_->Finish(*space, absl::OkStatus());
  leases_->Start();
  EXPECT_TRUE(Eventually([&] { return engine_->broken(); }));
  EXPECT_GE(service_.renewals(), 1);
  leases_->Shutdown(/*release=*/false);
}

}  // namespace
}  // namespace initiator
}  // namespace kvstore
