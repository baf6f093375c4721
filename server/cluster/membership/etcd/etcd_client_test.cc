// Copyright 2026 The kvstore Authors.
//
// EtcdClient against a real etcd (tests/cluster/etcd_process.h).

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

// Collects what a Watch delivers.
class Collector {
 public:
  std::function<void(absl::StatusOr<std::vector<WatchEvent>>)> Callback() {
    return [this](absl::StatusOr<std::vector<WatchEvent>> batch) {
      absl::MutexLock lock(&mu_);
      if (!batch.ok()) {
        errors_.push_back(batch.status());
        return;
      }
      for (WatchEvent& e : *batch) events_.push_back(std::move(e));
    };
  }
  // Waits (at most 10 s) until `n` events arrived; returns them all.
  std::vector<WatchEvent> WaitEvents(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n] { return events_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return events_;
  }
  std::vector<absl::Status> WaitError() {
    absl::MutexLock lock(&mu_);
    auto failed = [this] { return !errors_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&failed), absl::Seconds(10));
    return errors_;
  }
  std::vector<absl::Status> errors() {
    absl::MutexLock lock(&mu_);
    return errors_;
  }

 private:
  absl::Mutex mu_;
  std::vector<WatchEvent> events_;
  std::vector<absl::Status> errors_;
};

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

TEST_F(EtcdClientTest, PutGetAndGetPrefixWithRevisions) {
  auto r1 = client_->Put("/kv/a/1", "one");
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto r2 = client_->Put("/kv/a/2", "two");
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_GT(*r2, *r1);
  ASSERT_TRUE(client_->Put("/kv/b", "outside").ok());
  auto r3 = client_->Put("/kv/a/1", "uno");
  ASSERT_TRUE(r3.ok());

  auto got = client_->Get("/kv/a/1");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->value, "uno");
  EXPECT_EQ((*got)->create_revision, *r1);
  EXPECT_EQ((*got)->mod_revision, *r3);
  EXPECT_EQ((*got)->version, 2);
  EXPECT_EQ((*got)->lease, 0);

  auto absent = client_->Get("/kv/none");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());

  int64_t revision = 0;
  auto all = client_->GetPrefix("/kv/a/", &revision);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_THAT(*all, SizeIs(2));
  EXPECT_EQ((*all)[0].key, "/kv/a/1");
  EXPECT_EQ((*all)[1].key, "/kv/a/2");
  EXPECT_EQ((*all)[1].value, "two");
  EXPECT_EQ(revision, *r3);

  auto none = client_->GetPrefix("/nothing/", nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(EtcdClientTest, DeleteAndEmptyKey) {
  auto put = client_->Put("/kv/d", "x");
  ASSERT_TRUE(put.ok());
  auto del = client_->Delete("/kv/d");
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_GT(*del, *put);
  auto got = client_->Get("/kv/d");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());

  EXPECT_EQ(client_->Put("", "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Get("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Delete("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdClientTest, TxnCreateIfAbsent) {
  const Compare absent{"/kv/t", Compare::Target::kCreateRevision, Compare::Op::kEqual, 0, ""};
  const std::vector<TxnOp> create = {{TxnOp::Kind::kPut, "/kv/t", "first", 0}};
  const std::vector<TxnOp> read = {{TxnOp::Kind::kGet, "/kv/t", "", 0},
                                   {TxnOp::Kind::kGet, "/kv/missing", "", 0}};

  auto first = client_->Txn({absent}, create, read);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->succeeded);
  EXPECT_TRUE(first->gets.empty());

  auto second = client_->Txn({absent}, {{TxnOp::Kind::kPut, "/kv/t", "second", 0}}, read);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->succeeded);
  EXPECT_EQ(second->revision, first->revision);  // nothing written
  ASSERT_THAT(second->gets, SizeIs(1));          // the absent key is left out
  EXPECT_EQ(second->gets[0].value, "first");
  EXPECT_EQ(second->gets[0].mod_revision, first->revision);
}

TEST_F(EtcdClientTest, TxnModRevisionGuardsAgainstLostUpdates) {
  auto put = client_->Put("/kv/m", "v1");
  ASSERT_TRUE(put.ok());
  const Compare unchanged{"/kv/m", Compare::Target::kModRevision, Compare::Op::kEqual, *put, ""};
  auto ok = client_->Txn({unchanged}, {{TxnOp::Kind::kPut, "/kv/m", "v2", 0}}, {});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->succeeded);
  EXPECT_GT(ok->revision, *put);

  // The same compare is now stale: the failure branch (a delete) runs.
  auto stale = client_->Txn({unchanged}, {{TxnOp::Kind::kPut, "/kv/m", "v3", 0}},
                            {{TxnOp::Kind::kDelete, "/kv/other", "", 0}});
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_FALSE(stale->succeeded);
  auto got = client_->Get("/kv/m");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->value, "v2");

  // Greater / Less / NotEqual on the mod revision.
  const int64_t mod = (*got)->mod_revision;
  for (auto [op, number, want] :
       std::vector<std::tuple<Compare::Op, int64_t, bool>>{{Compare::Op::kGreater, mod - 1, true},
                                                           {Compare::Op::kGreater, mod, false},
                                                           {Compare::Op::kLess, mod + 1, true},
                                                           {Compare::Op::kNotEqual, mod, false}}) {
    auto r = client_->Txn({{"/kv/m", Compare::Target::kModRevision, op, number, ""}}, {}, {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->succeeded, want) << static_cast<int>(op) << " " << number;
  }
}

// Threads share one client and increment a counter by compare-and-swap on
// its mod revision: no increment may be lost.
TEST_F(EtcdClientTest, ConcurrentCompareAndSwapLosesNoUpdate) {
  ASSERT_TRUE(client_->Put("/kv/counter", "0").ok());
  constexpr int kThreads = 4, kIncrements = 10;
  std::vector<std::thread> threads;
  std::atomic<int> conflicts{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements;) {
        auto cur = client_->Get("/kv/counter");
        ASSERT_TRUE(cur.ok() && cur->has_value()) << cur.status();
        int n = std::stoi((*cur)->value);
        auto r = client_->Txn({{"/kv/counter", Compare::Target::kModRevision, Compare::Op::kEqual,
                                (*cur)->mod_revision, ""}},
                              {{TxnOp::Kind::kPut, "/kv/counter", std::to_string(n + 1), 0}}, {});
        ASSERT_TRUE(r.ok()) << r.status();
        if (r->succeeded) {
          ++i;
        } else {
          ++conflicts;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  auto final = client_->Get("/kv/counter");
  ASSERT_TRUE(final.ok() && final->has_value());
  EXPECT_EQ((*final)->value, std::to_string(kThreads * kIncrements));
  std::printf("conflicts retried: %d\n", conflicts.load());
}

TEST_F(EtcdClientTest, TxnValueVersionAndLeaseCompares) {
  auto lease = client_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("/kv/owner", "node-1", *lease).ok());

  auto is = [&](Compare c) {
    auto r = client_->Txn({c}, {}, {});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->succeeded;
  };
  using T = Compare::Target;
  using O = Compare::Op;
  EXPECT_TRUE(is({"/kv/owner", T::kValue, O::kEqual, 0, "node-1"}));
  EXPECT_FALSE(is({"/kv/owner", T::kValue, O::kEqual, 0, "node-2"}));
  EXPECT_TRUE(is({"/kv/owner", T::kValue, O::kNotEqual, 0, "node-2"}));
  EXPECT_TRUE(is({"/kv/owner", T::kLease, O::kEqual, *lease, ""}));
  EXPECT_FALSE(is({"/kv/owner", T::kLease, O::kEqual, *lease + 1, ""}));
  EXPECT_TRUE(is({"/kv/owner", T::kVersion, O::kEqual, 1, ""}));
  EXPECT_TRUE(is({"/kv/absent", T::kVersion, O::kEqual, 0, ""}));
  EXPECT_TRUE(is({"/kv/absent", T::kModRevision, O::kEqual, 0, ""}));

  auto got = client_->Get("/kv/owner");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->lease, *lease);
}

TEST_F(EtcdClientTest, KeepAliveKeepsKeyAndExpiredLeaseIsNotFound) {
  // etcd raises TTLs below its minimum (1.5 x election timeout) to 2 s.
  auto kept = client_->GrantLease(absl::Seconds(2));
  auto left = client_->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(kept.ok() && left.ok());
  ASSERT_TRUE(client_->Put("/kv/kept", "x", *kept).ok());
  ASSERT_TRUE(client_->Put("/kv/left", "x", *left).ok());

  // Renew `kept` for longer than a TTL; `left` expires meanwhile.
  const absl::Time end = absl::Now() + absl::Seconds(4);
  while (absl::Now() < end) {
    auto ttl = client_->KeepAliveOnce(*kept);
    ASSERT_TRUE(ttl.ok()) << ttl.status();
    EXPECT_GE(*ttl, absl::Seconds(1));
    absl::SleepFor(absl::Milliseconds(500));
  }
  auto kept_kv = client_->Get("/kv/kept");
  ASSERT_TRUE(kept_kv.ok());
  EXPECT_TRUE(kept_kv->has_value());

  auto left_kv = client_->Get("/kv/left");
  ASSERT_TRUE(left_kv.ok());
  EXPECT_FALSE(left_kv->has_value());
  EXPECT_EQ(client_->KeepAliveOnce(*left).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, GrantLeaseRoundsUpToSeconds) {
  auto lease = client_->GrantLease(absl::Milliseconds(2500));
  ASSERT_TRUE(lease.ok()) << lease.status();
  auto ttl = client_->KeepAliveOnce(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(*ttl, absl::Seconds(3));
}

TEST_F(EtcdClientTest, RevokeDeletesKeysAtOnce) {
  auto lease = client_->GrantLease(absl::Seconds(60));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(client_->Put("/kv/r1", "x", *lease).ok());
  ASSERT_TRUE(client_->Put("/kv/r2", "x", *lease).ok());
  ASSERT_TRUE(client_->RevokeLease(*lease).ok());
  auto keys = client_->GetPrefix("/kv/r", nullptr);
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->empty());
  EXPECT_EQ(client_->KeepAliveOnce(*lease).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->RevokeLease(*lease).code(), absl::StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, WatchDeliversPutsAndDeletesFromARevision) {
  auto r1 = client_->Put("/w/a", "1");
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(client_->Put("/x/outside", "1").ok());
  auto r2 = client_->Delete("/w/a");
  ASSERT_TRUE(r2.ok());

  Collector seen;
  auto watch = client_->Watch("/w/", *r1, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  auto r3 = client_->Put("/w/b", "2");  // after the watch started
  ASSERT_TRUE(r3.ok());

  std::vector<WatchEvent> events = seen.WaitEvents(3);
  ASSERT_THAT(events, SizeIs(3));
  EXPECT_EQ(events[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(events[0].kv.key, "/w/a");
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[0].kv.mod_revision, *r1);
  EXPECT_EQ(events[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(events[1].kv.key, "/w/a");
  EXPECT_EQ(events[1].kv.mod_revision, *r2);
  EXPECT_EQ(events[2].type, WatchEvent::Type::kPut);
  EXPECT_EQ(events[2].kv.key, "/w/b");
  EXPECT_EQ(events[2].kv.mod_revision, *r3);
  EXPECT_TRUE(seen.errors().empty());
  watch->reset();  // cancels and joins; no error is reported for it
  EXPECT_TRUE(seen.errors().empty());
}

TEST_F(EtcdClientTest, WatchReportsErrorOnceWhenEtcdDies) {
  Collector seen;
  auto watch = client_->Watch("/w/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  etcd_.Kill();
  std::vector<absl::Status> errors = seen.WaitError();
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_EQ(errors[0].code(), absl::StatusCode::kUnavailable) << errors[0];
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_THAT(seen.errors(), SizeIs(1));
}

TEST_F(EtcdClientTest, HungEtcdTimesOutAsUnavailable) {
  auto client = MustConnect({etcd_.endpoint()}, absl::Milliseconds(300));
  ASSERT_NE(client, nullptr);
  etcd_.Pause();
  const absl::Time start = absl::Now();
  auto got = client->Get("/kv/x");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr(etcd_.endpoint()));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  Collector seen;
  EXPECT_EQ(client->Watch("/w/", 0, seen.Callback()).status().code(),
            absl::StatusCode::kUnavailable);
  etcd_.Resume();
  EXPECT_TRUE(client->Get("/kv/x").ok());
}

TEST_F(EtcdClientTest, GetPrefixEndingIn0xff) {
  ASSERT_TRUE(client_
                  ->Put("p\xff"
                        "1",
                        "x")
                  .ok());
  ASSERT_TRUE(client_->Put("p\xff\xff", "x").ok());
  ASSERT_TRUE(client_->Put("p", "x").ok());
  ASSERT_TRUE(client_->Put("q", "x").ok());
  auto keys = client_->GetPrefix("p\xff", nullptr);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_THAT(*keys, SizeIs(2));
  EXPECT_EQ((*keys)[0].key,
            "p\xff"
            "1");
  EXPECT_EQ((*keys)[1].key, "p\xff\xff");
  auto all = client_->GetPrefix("", nullptr);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(*all, SizeIs(4));
}

TEST_F(EtcdClientTest, WatchFromCompactedRevisionIsOutOfRange) {
  auto r1 = client_->Put("/w/c", "1");
  auto r2 = client_->Put("/w/c", "2");
  ASSERT_TRUE(r1.ok() && r2.ok());
  kvstore::testing::ProcessResult compact = kvstore::testing::RunProcess(
      {"etcdctl", "--endpoints=" + etcd_.endpoint(), "compact", absl::StrCat(*r2)}, "", 20);
  ASSERT_EQ(compact.exit_code, 0) << compact.out << compact.err;

  Collector seen;
  auto watch = client_->Watch("/w/", *r1, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  std::vector<absl::Status> errors = seen.WaitError();
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_EQ(errors[0].code(), absl::StatusCode::kOutOfRange) << errors[0];
  EXPECT_THAT(errors[0].message(), HasSubstr(absl::StrCat(*r2)));
}

TEST_F(EtcdClientTest, WatchOutlivesItsClient) {
  Collector seen;
  auto watch = client_->Watch("/w/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  client_.reset();
  auto other = MustConnect({etcd_.endpoint()});
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->Put("/w/late", "x").ok());
  EXPECT_THAT(seen.WaitEvents(1), SizeIs(1));
  watch->reset();
  EXPECT_TRUE(seen.errors().empty());
}

// etcd restarted on the same port with its data: the watch reports the
// break, and the same client reaches the new process within a second or so
// (the channel's reconnect backoff is capped at 1 s).
TEST_F(EtcdClientTest, RestartBreaksWatchAndClientReconnects) {
  ASSERT_TRUE(client_->Put("/kv/durable", "x").ok());
  Collector seen;
  auto watch = client_->Watch("/kv/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_EQ(etcd_.Stop(), -SIGTERM);  // etcd re-raises SIGTERM after a clean shutdown
  EXPECT_THAT(seen.WaitError(), SizeIs(1));
  absl::Status started = etcd_.Start();
  ASSERT_TRUE(started.ok()) << started;

  absl::StatusOr<std::optional<KeyValue>> got;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  do {
    got = client_->Get("/kv/durable");
    if (!got.ok()) absl::SleepFor(absl::Milliseconds(100));
  } while (!got.ok() && absl::Now() < deadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->has_value());
}

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
