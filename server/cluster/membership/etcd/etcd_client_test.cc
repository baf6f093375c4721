// Copyright 2026 The kvstore Authors.
//
// EtcdClient against a real etcd (tests/cluster/etcd_process.h): the
// contract cases (etcd_contract_cases.h, which the fake passes too), then
// what is the gRPC client's own: reconnecting after restarts, endpoints.

#include "server/cluster/membership/etcd/etcd_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd/etcd_contract_cases.h"
#include "tests/cluster/etcd_process.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using testing_etcd = ::kvstore::testing::EtcdProcess;

// A loopback port that refuses connections: bound (so nobody else takes it)
// but not listening. Closed by the destructor.
class DeadPort {
 public:
  DeadPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    endpoint_ = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  }
  ~DeadPort() { close(fd_); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  int fd_;
  std::string endpoint_;
};

std::unique_ptr<EtcdClient> MustConnect(std::vector<std::string> endpoints,
                                        absl::Duration timeout = absl::Seconds(2)) {
  EtcdOptions options;
  options.endpoints = std::move(endpoints);
  options.rpc_timeout = timeout;
  auto client = EtcdClient::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

// A real etcd process for the contract cases.
class RealEtcdEnv final : public EtcdContractEnv {
 public:
  absl::Status Start() override { return etcd_.Start(); }
  std::unique_ptr<EtcdClient> NewClient(absl::Duration rpc_timeout) override {
    return MustConnect({etcd_.endpoint()}, rpc_timeout);
  }
  std::string endpoint() const override { return etcd_.endpoint(); }
  void PassTime(absl::Duration d) override { absl::SleepFor(d); }
  absl::Status Compact(int64_t revision) override {
    kvstore::testing::ProcessResult compact = kvstore::testing::RunProcess(
        {"etcdctl", "--endpoints=" + etcd_.endpoint(), "compact", absl::StrCat(revision)}, "", 20);
    if (compact.exit_code == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("etcdctl compact: ", compact.out, compact.err));
  }
  void Kill() override { etcd_.Kill(); }
  // etcd re-raises SIGTERM after a clean shutdown.
  void Stop() override { EXPECT_EQ(etcd_.Stop(), -SIGTERM); }
  absl::Status Restart() override { return etcd_.Start(); }
  void Pause() override { etcd_.Pause(); }
  void Resume() override { etcd_.Resume(); }

 private:
  testing_etcd etcd_;
};

INSTANTIATE_TEST_SUITE_P(RealEtcd, EtcdContractTest,
                         ::testing::Values(EtcdContractParam{
                             "RealEtcd", [] { return std::make_unique<RealEtcdEnv>(); }}),
                         EtcdContractParamName);

// The gRPC client's own behaviour (reconnecting, endpoints), which only a
// real etcd shows.
class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status s = etcd_.Start();
    ASSERT_TRUE(s.ok()) << s;
    client_ = MustConnect({etcd_.endpoint()});
    ASSERT_NE(client_, nullptr);
  }

  testing_etcd etcd_;
  std::unique_ptr<EtcdClient> client_;
};

// Calls Get and KeepAliveOnce back to back on one client, from its own
// thread, and remembers when both last succeeded together.
class BusyCaller {
 public:
  BusyCaller(EtcdClient* client, int64_t lease) : client_(client), lease_(lease) {
    thread_ = std::thread([this] { Run(); });
  }
  ~BusyCaller() {
    stop_ = true;
    thread_.join();
  }
  // Waits (at most `limit`) for a round where both calls succeeded and that
  // started after `after`; returns whether one came.
  bool WaitSuccessAfter(absl::Time after, absl::Duration limit) {
    absl::MutexLock lock(&mu_);
    auto done = [this, after] { return last_ok_start_ >= after; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), limit);
  }
  std::string last_error() {
    absl::MutexLock lock(&mu_);
    return last_error_;
  }

 private:
  void Run() {
    while (!stop_) {
      const absl::Time start = absl::Now();
      auto got = client_->Get("/kv/busy");
      auto ttl = client_->KeepAliveOnce(lease_);
      {
        absl::MutexLock lock(&mu_);
        if (got.ok() && ttl.ok()) {
          last_ok_start_ = start;
        } else {
          last_error_ = !got.ok() ? got.status().ToString() : ttl.status().ToString();
        }
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  EtcdClient* const client_;
  const int64_t lease_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  absl::Time last_ok_start_ = absl::InfinitePast();  // guarded by mu_
  std::string last_error_;                           // guarded by mu_
  std::thread thread_;
};

// The repro of a client that stayed broken after a restart: calls keep
// failing during the outage (as Membership's keepalives do), and the client
// must still reach the new etcd within a few seconds and watch at once.
void CallsThroughRestartRecover(testing_etcd& etcd, EtcdClient* client, bool kill) {
  auto lease = client->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client->Put("/kv/busy", "x", *lease).ok());
  BusyCaller caller(client, *lease);
  ASSERT_TRUE(caller.WaitSuccessAfter(absl::Now(), absl::Seconds(3))) << caller.last_error();
  if (kill) {
    etcd.Kill();
  } else {
    EXPECT_EQ(etcd.Stop(), -SIGTERM);
  }
  absl::SleepFor(absl::Milliseconds(1500));  // several failed rounds
  absl::Status started = etcd.Start();
  ASSERT_TRUE(started.ok()) << started;
  const absl::Time back = absl::Now();
  ASSERT_TRUE(caller.WaitSuccessAfter(back, absl::Seconds(3)))
      << "no Get+KeepAliveOnce succeeded within 3 s of the restart; last error: "
      << caller.last_error();
  std::printf("recovered %s after the restart\n", absl::FormatDuration(absl::Now() - back).c_str());

  Collector seen;
  auto watch = client->Watch("/kv/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(client->Put("/kv/after", "y").ok());
  std::vector<WatchEvent> events = seen.WaitEvents(1);  // revision 0: from now on
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kv.key, "/kv/after");
}

TEST_F(EtcdClientTest, CallsDuringAStopStillRecoverAfterTheRestart) {
  CallsThroughRestartRecover(etcd_, client_.get(), /*kill=*/false);
}

TEST_F(EtcdClientTest, CallsDuringAKillStillRecoverAfterTheRestart) {
  CallsThroughRestartRecover(etcd_, client_.get(), /*kill=*/true);
}

// A watch that ended with the old etcd plus failed calls during the outage
// were enough to keep the client broken. After the restart a new watch is
// the first call, and must work at once.
TEST_F(EtcdClientTest, EndedWatchAndFailedCallsThenWatchAtOnce) {
  Collector seen;
  auto watch = client_->Watch("/kv/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_EQ(etcd_.Stop(), -SIGTERM);
  EXPECT_THAT(seen.WaitError(), SizeIs(1));
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(client_->Get("/kv/x").ok());
    absl::SleepFor(absl::Milliseconds(100));
  }
  absl::Status started = etcd_.Start();
  ASSERT_TRUE(started.ok()) << started;
  Collector again;
  auto rewatch = client_->Watch("/kv/", 0, again.Callback());
  ASSERT_TRUE(rewatch.ok()) << rewatch.status();
  ASSERT_TRUE(client_->Put("/kv/x", "y").ok());
  EXPECT_THAT(again.WaitEvents(1), SizeIs(1));
}

TEST(EtcdConnectTest, NoEndpointsIsInvalidArgument) {
  EXPECT_EQ(EtcdClient::Connect(EtcdOptions{}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EtcdConnectTest, TlsEndpointIsInvalidArgument) {
  EtcdOptions options;
  options.endpoints = {"https://127.0.0.1:2379"};
  EXPECT_EQ(EtcdClient::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EtcdConnectTest, DeadEndpointIsUnavailableNamingIt) {
  DeadPort dead1, dead2;
  EtcdOptions options;
  options.endpoints = {dead1.endpoint(), "http://" + dead2.endpoint()};
  options.rpc_timeout = absl::Milliseconds(500);
  auto client = EtcdClient::Connect(options);
  ASSERT_EQ(client.status().code(), absl::StatusCode::kUnavailable) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr(dead1.endpoint()));
  EXPECT_THAT(client.status().message(), HasSubstr(dead2.endpoint()));
}

TEST(EtcdConnectTest, ConnectSkipsDeadEndpoint) {
  testing_etcd etcd;
  ASSERT_TRUE(etcd.Start().ok());
  DeadPort dead;
  auto client = MustConnect({dead.endpoint(), "http://" + etcd.endpoint()});
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->Put("/kv/f", "x").ok());
}

// Two independent etcds stand in for two members: after the first dies, one
// call fails and the next goes to the second endpoint.
TEST(EtcdConnectTest, FailsOverToNextEndpoint) {
  testing_etcd first, second;
  ASSERT_TRUE(first.Start().ok());
  ASSERT_TRUE(second.Start().ok());
  auto client = MustConnect({first.endpoint(), second.endpoint()});
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put("/kv/where", "first").ok());
  first.Kill();
  auto failed = client->Get("/kv/where");
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr(first.endpoint()));
  auto got = client->Get("/kv/where");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());  // the second etcd never saw the put
  EXPECT_TRUE(client->Put("/kv/where", "second").ok());
}

}  // namespace
}  // namespace etcd
}  // namespace server
}  // namespace kvstore
