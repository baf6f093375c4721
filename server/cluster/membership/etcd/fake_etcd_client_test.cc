// Copyright 2026 The kvstore Authors.
//
// FakeEtcd: the EtcdClient contract cases (etcd_contract_cases.h, also run
// against a real etcd by etcd_client_test), then what only a fake has:
// manual lease expiry and the clock, compaction errors, one client cut off
// while the others go on, and the watch threads.

#include "server/cluster/membership/etcd/fake_etcd_client.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd/etcd_contract_cases.h"
#include "server/storage/manual_clock.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

// The fake with a ManualClock: time passes when a case says so, and etcd's
// lessor runs right then. Every fault is "unreachable"; a restart renews
// every lease, as a real etcd's new leader does.
class FakeEtcdEnv final : public EtcdContractEnv {
 public:
  FakeEtcdEnv() : etcd_(FakeEtcdOptions{"fake-etcd:2379", &clock_}) {}
  absl::Status Start() override { return absl::OkStatus(); }
  std::unique_ptr<EtcdClient> NewClient(absl::Duration) override { return etcd_.NewClient(); }
  std::string endpoint() const override { return etcd_.endpoint(); }
  void PassTime(absl::Duration d) override {
    clock_.Advance(d);
    etcd_.ExpireDueLeases();
  }
  absl::Status Compact(int64_t revision) override { return etcd_.Compact(revision); }
  void Kill() override { etcd_.SetReachable(false); }
  void Stop() override { etcd_.SetReachable(false); }
  absl::Status Restart() override {
    etcd_.SetReachable(true);
    etcd_.RenewAllLeases();
    return absl::OkStatus();
  }
  void Pause() override { etcd_.SetReachable(false); }
  void Resume() override { etcd_.SetReachable(true); }

 private:
  ManualClock clock_;
  FakeEtcd etcd_;
};

INSTANTIATE_TEST_SUITE_P(Fake, EtcdContractTest,
                         ::testing::Values(EtcdContractParam{
                             "Fake", [] { return std::make_unique<FakeEtcdEnv>(); }}),
                         EtcdContractParamName);

TEST(FakeEtcd, ExpireLeaseDeletesItsKeysWithoutAClock) {
  FakeEtcd etcd;
  auto client = etcd.NewClient();
  auto lease = client->GrantLease(absl::Seconds(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  // etcd's minimum TTL.
  EXPECT_EQ(*client->KeepAliveOnce(*lease), absl::Seconds(2));
  ASSERT_TRUE(client->Put("/k/a", "x", *lease).ok());
  ASSERT_TRUE(client->Put("/k/b", "y").ok());
  Collector seen;
  auto watch = client->Watch("/k/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_EQ(etcd.ExpireDueLeases(), 0);  // no clock: nothing expires by itself

  const int64_t before = etcd.revision();
  ASSERT_TRUE(etcd.ExpireLease(*lease).ok());
  EXPECT_EQ(etcd.revision(), before + 1);
  std::vector<WatchEvent> events = seen.WaitEvents(1);
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(events[0].kv.key, "/k/a");
  EXPECT_EQ(events[0].kv.mod_revision, before + 1);
  EXPECT_FALSE(client->Get("/k/a")->has_value());
  EXPECT_TRUE(client->Get("/k/b")->has_value());
  EXPECT_EQ(client->KeepAliveOnce(*lease).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(etcd.ExpireLease(*lease).code(), absl::StatusCode::kNotFound);
}

TEST(FakeEtcd, LeasesExpireOnTheClockAtTheNextCall) {
  ManualClock clock;
  FakeEtcd etcd(FakeEtcdOptions{"fake", &clock});
  auto client = etcd.NewClient();
  auto lease = client->GrantLease(absl::Seconds(3));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(client->Put("/k", "x", *lease).ok());
  clock.Advance(absl::Milliseconds(2999));
  EXPECT_TRUE(client->Get("/k")->has_value());
  ASSERT_TRUE(client->KeepAliveOnce(*lease).ok());  // 3 s from now again
  clock.Advance(absl::Milliseconds(2999));
  EXPECT_TRUE(client->Get("/k")->has_value());
  clock.Advance(absl::Milliseconds(1));
  EXPECT_FALSE(client->Get("/k")->has_value());  // expired by this call
  EXPECT_EQ(client->KeepAliveOnce(*lease).status().code(), absl::StatusCode::kNotFound);

  // ExpireDueLeases() is the lessor running without any call.
  auto other = client->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(other.ok());
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(etcd.ExpireDueLeases(), 1);
  EXPECT_EQ(etcd.ExpireDueLeases(), 0);
}

TEST(FakeEtcd, AnOutageLetsLeasesRunOutAndARestartRenewsThem) {
  ManualClock clock;
  FakeEtcd etcd(FakeEtcdOptions{"fake", &clock});
  auto client = etcd.NewClient();
  auto lease = client->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(client->Put("/k", "x", *lease).ok());

  // Cut off (etcd up): the lease runs out as nobody can renew it.
  etcd.SetReachable(false);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(client->KeepAliveOnce(*lease).status().code(), absl::StatusCode::kUnavailable);
  etcd.SetReachable(true);
  EXPECT_EQ(client->KeepAliveOnce(*lease).status().code(), absl::StatusCode::kNotFound);

  // Down and restarted: every lease starts its TTL over.
  lease = client->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok());
  etcd.SetReachable(false);
  clock.Advance(absl::Seconds(3));
  etcd.RenewAllLeases();
  etcd.SetReachable(true);
  EXPECT_TRUE(client->KeepAliveOnce(*lease).ok());
}

TEST(FakeEtcd, CompactRefusesTheFutureAndTheAlreadyCompacted) {
  FakeEtcd etcd;
  auto client = etcd.NewClient();
  auto r = client->Put("/k", "1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(etcd.Compact(*r + 1).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(etcd.Compact(*r).ok());
  absl::Status again = etcd.Compact(*r);
  EXPECT_EQ(again.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(again.message(), HasSubstr("compacted"));
  // A watch from before the compaction ends at once and leaks nothing.
  Collector seen;
  auto watch = client->Watch("/", *r - 1, seen.Callback());
  ASSERT_TRUE(watch.ok());
  EXPECT_THAT(seen.WaitError(), SizeIs(1));
  EXPECT_EQ(etcd.watch_count(), 0);
}

// Two nodes share the store; one is cut off from etcd: its calls fail and
// its watch ends, the other's go on; it comes back and sees everything.
TEST(FakeEtcd, OneClientCutOffWhileTheOthersGoOn) {
  FakeEtcd etcd;
  auto n1 = etcd.NewClient("n1");
  auto n2 = etcd.NewClient("n2");
  Collector seen1, seen2;
  auto w1 = n1->Watch("/k/", 0, seen1.Callback());
  auto w2 = n2->Watch("/k/", 0, seen2.Callback());
  ASSERT_TRUE(w1.ok() && w2.ok());
  ASSERT_TRUE(n1->Put("/k/1", "from n1").ok());
  EXPECT_EQ((*n2->Get("/k/1"))->value, "from n1");

  etcd.SetClientReachable("n1", false);
  auto failed = n1->Get("/k/1");
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(), HasSubstr(etcd.endpoint()));
  EXPECT_EQ(n1->Watch("/k/", 0, seen1.Callback()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(seen1.WaitError(), SizeIs(1));
  ASSERT_TRUE(n2->Put("/k/2", "from n2").ok());
  EXPECT_THAT(seen2.WaitEvents(2), SizeIs(2));
  EXPECT_TRUE(seen2.errors().empty());

  etcd.SetClientReachable("n1", true);
  EXPECT_EQ((*n1->Get("/k/2"))->value, "from n2");
  w1->reset();
  w2->reset();
  EXPECT_EQ(etcd.watch_count(), 0);
}

// The callback runs on the watch's own thread, not the writer's, and may
// call the client (no lock of the store is held).
TEST(FakeEtcd, ACallbackRunsOnItsOwnThreadAndMayCallTheClient) {
  FakeEtcd etcd;
  auto client = etcd.NewClient();
  absl::Mutex mu;
  std::thread::id callback_thread;
  std::string read_back;
  auto watch = client->Watch("/k", 0, [&](absl::StatusOr<std::vector<WatchEvent>> events) {
    ASSERT_TRUE(events.ok());
    auto got = client->Get("/k");
    absl::MutexLock lock(&mu);
    callback_thread = std::this_thread::get_id();
    read_back = got.ok() && got->has_value() ? (*got)->value : "?";
  });
  ASSERT_TRUE(watch.ok());
  ASSERT_TRUE(client->Put("/k", "v").ok());
  absl::MutexLock lock(&mu);
  auto called = [&] { return !read_back.empty(); };
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&called), absl::Seconds(60)));
  EXPECT_NE(callback_thread, std::this_thread::get_id());
  EXPECT_EQ(read_back, "v");
}

// Clients and watches keep the store: either may outlive the FakeEtcd.
TEST(FakeEtcd, ClientsAndWatchesOutliveTheFake) {
  Collector seen;  // outlives the watch, whose thread calls it
  std::unique_ptr<EtcdClient> client;
  std::unique_ptr<WatchHandle> watch;
  {
    FakeEtcd etcd;
    client = etcd.NewClient();
    auto w = client->Watch("/", 0, seen.Callback());
    ASSERT_TRUE(w.ok());
    watch = *std::move(w);
  }
  ASSERT_TRUE(client->Put("/k", "v").ok());
  EXPECT_THAT(seen.WaitEvents(1), SizeIs(1));
}

TEST(FakeEtcd, APutOrTxnUnderAnUnknownLeaseWritesNothing) {
  FakeEtcd etcd;
  auto client = etcd.NewClient();
  const int64_t before = etcd.revision();
  EXPECT_EQ(client->Put("/k", "v", 12345).status().code(), absl::StatusCode::kNotFound);
  auto txn = client->Txn(
      {}, {{TxnOp::Kind::kPut, "/a", "1", 0}, {TxnOp::Kind::kPut, "/b", "2", 12345}}, {});
  EXPECT_EQ(txn.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(etcd.revision(), before);
  EXPECT_FALSE(client->Get("/a")->has_value());
}

}  // namespace
}  // namespace etcd
}  // namespace server
}  // namespace kvstore
