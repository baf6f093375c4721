// Copyright 2026 The kvstore Authors.
//
// gRPC Put and Delete in cluster mode hold no thread for their replication
// round (control_service_put.cc, control_service_delete.cc): many
// replicated writes are in flight at once,
// through a real gRPC server and channel. The write hook stands in for the
// replicator (the real one: tests/cluster); it holds writes until the test
// lets them go.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/kv_control.grpc.pb.h"
#include "server/control/control_service.h"
#include "server/storage/kv_store.h"
#include "server/storage/lease_table.h"
#include "server/storage/memory_pool.h"
#include "server/storage/write_hook.h"

namespace kvstore {
namespace server {
namespace {

namespace pb = ::kvstore::v1;

// Holds every write until Release(), counting how many it holds at once.
// A key starting with "started" may go without a waiting thread
// (StartWrite takes it, and Release() finishes it, as a backup's answer
// would); any other key is declined there, so its committer waits in
// Write().
class HoldingHook : public WriteHook {
 public:
  absl::Status Write(absl::string_view, absl::string_view,
                     absl::FunctionRef<absl::Status()> publish) override {
    absl::MutexLock lock(&mu_);
    Hold();
    mu_.Await(absl::Condition(&released_));
    return publish();
  }
  bool StartWrite(absl::string_view key, const layout::KeyHash&, absl::string_view, Publish publish,
                  Done done) override {
    if (!absl::StartsWith(key, "started")) return false;
    {
      absl::MutexLock lock(&mu_);
      if (!released_) {
        Hold();
        started_.emplace_back(std::move(publish), std::move(done));
        return true;
      }
    }
    done(publish());
    return true;
  }
  bool WaitsForPeers(absl::string_view) override { return true; }

  // Holds the writes from now on again, counting from zero.
  void Rearm() {
    absl::MutexLock lock(&mu_);
    released_ = false;
    holding_ = 0;
  }
  void Release() {
    std::vector<std::pair<Publish, Done>> started;
    {
      absl::MutexLock lock(&mu_);
      released_ = true;
      started.swap(started_);
    }
    for (auto& [publish, done] : started) done(publish());
  }
  // Waits (60 s at most) until `n` writes are held at once.
  bool AwaitHolding(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return holding_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }
  int holding() {
    absl::MutexLock lock(&mu_);
    return holding_;
  }

 private:
  void Hold() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ++holding_; }

  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  int holding_ ABSL_GUARDED_BY(mu_) = 0;  // held so far (never decreases)
  std::vector<std::pair<Publish, Done>> started_ ABSL_GUARDED_BY(mu_);
};

class ControlPutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryPoolOptions po;
    po.data_bytes = 16 << 20;
    po.index_bytes = 1 << 20;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.cleaner_interval = absl::ZeroDuration();
    so.write_hook = &hook_;
    store_ = *KvStore::Create(pool_.get(), so);
    LeaseOptions lo;
    lo.expire_interval = absl::ZeroDuration();
    leases_ = std::make_unique<LeaseTable>(store_.get(), lo);
    ControlServiceDeps deps;
    deps.store = store_.get();
    deps.leases = leases_.get();
    deps.pool = pool_.get();
    deps.epoch = 1;
    service_ = std::make_unique<KvControlServiceImpl>(std::move(deps));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    // A sync pool as small as a busy server's (--grpc_max_threads): a write
    // that held one of its threads for the round could not have 24 in
    // flight.
    grpc::ResourceQuota quota;
    quota.SetMaxThreads(8);
    builder.SetResourceQuota(quota);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = pb::KvControl::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    hook_.Release();
    server_->Shutdown();
    server_.reset();
    service_.reset();
    leases_.reset();
    store_.reset();
  }

  grpc::Status Put(const std::string& key, const std::string& value) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    pb::PutResponse resp;
    return stub_->Put(&ctx, req, &resp);
  }
  std::string Get(const std::string& key) {
    grpc::ClientContext ctx;
    pb::GetRequest req;
    req.set_key(key);
    pb::GetResponse resp;
    grpc::Status s = stub_->Get(&ctx, req, &resp);
    return s.ok() ? resp.value() : "<" + s.error_message() + ">";
  }

  grpc::Status Delete(const std::string& key) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    pb::DeleteRequest req;
    req.set_key(key);
    pb::DeleteResponse resp;
    return stub_->Delete(&ctx, req, &resp);
  }

  // Runs `write` on keys `prefix`0..`n`-1 at once, waits until the hook
  // holds them all, lets them go and checks every answer and what `key`
  // reads afterwards.
  void InFlightTogether(const std::string& prefix, int n,
                        const std::function<grpc::Status(const std::string&)>& write,
                        const std::string& reads) {
    std::vector<grpc::Status> results(n);
    std::vector<std::thread> clients;
    for (int i = 0; i < n; ++i) {
      clients.emplace_back([&, i] { results[i] = write(absl::StrCat(prefix, i)); });
    }
    const bool all_held = hook_.AwaitHolding(n);
    hook_.Release();
    for (std::thread& t : clients) t.join();
    ASSERT_TRUE(all_held) << "held at most " << hook_.holding() << " of " << n << " at once";
    for (int i = 0; i < n; ++i) {
      EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].error_message();
      EXPECT_EQ(Get(absl::StrCat(prefix, i)), reads) << i;
    }
  }
  void PutsInFlightTogether(const std::string& prefix, int n) {
    InFlightTogether(
        prefix, n, [this](const std::string& key) { return Put(key, "v"); }, "v");
  }
  // The keys are written first (the hook lets those go), then deleted.
  void DeletesInFlightTogether(const std::string& prefix, int n) {
    hook_.Release();
    for (int i = 0; i < n; ++i) ASSERT_TRUE(Put(absl::StrCat(prefix, i), "v").ok());
    hook_.Rearm();
    InFlightTogether(
        prefix, n, [this](const std::string& key) { return Delete(key); }, "<key not found>");
  }

  HoldingHook hook_;
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<LeaseTable> leases_;
  std::unique_ptr<KvControlServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<pb::KvControl::Stub> stub_;
};

// Before, each Put held one of four writers across its round: this held
// four and waited in vain for the rest.
TEST_F(ControlPutTest, StartedPutsAreAllInFlightAtOnce) { PutsInFlightTogether("started", 24); }

// A commit StartCommit declines waits on the service's own workers, which
// are not few either.
TEST_F(ControlPutTest, DeclinedPutsWaitOnWorkersAllAtOnce) { PutsInFlightTogether("busy", 24); }

// Before, each Delete held a thread of gRPC's sync pool for its round.
TEST_F(ControlPutTest, StartedDeletesAreAllInFlightAtOnce) {
  DeletesInFlightTogether("started", 24);
}

TEST_F(ControlPutTest, DeclinedDeletesWaitOnWorkersAllAtOnce) {
  DeletesInFlightTogether("busy", 24);
}

TEST_F(ControlPutTest, RefusalsComeBeforeAnyWrite) {
  const grpc::Status s = Put(std::string(100000, 'k'), "v");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(hook_.holding(), 0);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
