// Copyright 2026 The kvstore Authors.
//
// The cases of the EtcdClient contract (etcd_contract_cases.h). Each says
// what etcd does and the client shows; both the fake and a real etcd must
// pass every one.

#include "server/cluster/membership/etcd/etcd_contract_cases.h"

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"

namespace kvstore {
namespace server {
namespace etcd {

using ::kvstore::testing::Eventually;
using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string EtcdContractParamName(const ::testing::TestParamInfo<EtcdContractParam>& info) {
  return info.param.name;
}

void EtcdContractTest::SetUp() {
  env_ = GetParam().make();
  ASSERT_NE(env_, nullptr);
  absl::Status started = env_->Start();
  ASSERT_TRUE(started.ok()) << started;
  client_ = env_->NewClient(kContractRpcTimeout);
  ASSERT_NE(client_, nullptr);
}

std::function<void(absl::StatusOr<std::vector<WatchEvent>>)> Collector::Callback() {
  return [this](absl::StatusOr<std::vector<WatchEvent>> batch) {
    absl::MutexLock lock(&mu_);
    ++batches_;
    if (!batch.ok()) {
      errors_.push_back(batch.status());
      return;
    }
    for (WatchEvent& e : *batch) events_.push_back(std::move(e));
  };
}

std::vector<WatchEvent> Collector::WaitEvents(size_t n) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return events_.size() >= n; };
  mu_.AwaitWithTimeout(absl::Condition(&enough), ::kvstore::testing::kEventuallyBound);
  return events_;
}

std::vector<absl::Status> Collector::WaitError() {
  absl::MutexLock lock(&mu_);
  auto failed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !errors_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&failed), ::kvstore::testing::kEventuallyBound);
  return errors_;
}

std::vector<WatchEvent> Collector::events() {
  absl::MutexLock lock(&mu_);
  return events_;
}

std::vector<absl::Status> Collector::errors() {
  absl::MutexLock lock(&mu_);
  return errors_;
}

int Collector::batches() {
  absl::MutexLock lock(&mu_);
  return batches_;
}

namespace {

TEST_P(EtcdContractTest, PutGetAndGetPrefixWithRevisions) {
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

TEST_P(EtcdContractTest, DeleteAndEmptyKey) {
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

// Reads and writes that change nothing take no revision.
TEST_P(EtcdContractTest, OnlyChangesTakeARevision) {
  auto put = client_->Put("/kv/r", "x");
  ASSERT_TRUE(put.ok());
  auto del = client_->Delete("/kv/absent");
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_EQ(*del, *put);
  auto read = client_->Txn({}, {{TxnOp::Kind::kGet, "/kv/r", "", 0}}, {});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->revision, *put);
  auto next = client_->Put("/kv/r", "y");
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, *put + 1);
}

TEST_P(EtcdContractTest, TxnCreateIfAbsent) {
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

// A branch's operations run in order under one revision: a get sees the
// branch's own put (the controller's campaign reads its token so).
TEST_P(EtcdContractTest, TxnBranchRunsInOrderUnderOneRevision) {
  auto before = client_->Put("/kv/o/old", "x");
  ASSERT_TRUE(before.ok());
  auto r = client_->Txn({},
                        {{TxnOp::Kind::kPut, "/kv/o/a", "1", 0},
                         {TxnOp::Kind::kDelete, "/kv/o/old", "", 0},
                         {TxnOp::Kind::kPut, "/kv/o/b", "2", 0},
                         {TxnOp::Kind::kGet, "/kv/o/a", "", 0}},
                        {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->succeeded);
  EXPECT_EQ(r->revision, *before + 1);
  ASSERT_THAT(r->gets, SizeIs(1));
  EXPECT_EQ(r->gets[0].value, "1");
  EXPECT_EQ(r->gets[0].create_revision, r->revision);
  auto b = client_->Get("/kv/o/b");
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_EQ((*b)->mod_revision, r->revision);
  auto old = client_->Get("/kv/o/old");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->has_value());

  // One key written twice in a branch is refused, and nothing is written.
  auto twice = client_->Txn(
      {}, {{TxnOp::Kind::kPut, "/kv/o/c", "1", 0}, {TxnOp::Kind::kPut, "/kv/o/c", "2", 0}}, {});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument) << twice.status();
  auto c = client_->Get("/kv/o/c");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
}

TEST_P(EtcdContractTest, TxnModRevisionGuardsAgainstLostUpdates) {
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
TEST_P(EtcdContractTest, ConcurrentCompareAndSwapLosesNoUpdate) {
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

TEST_P(EtcdContractTest, TxnValueVersionAndLeaseCompares) {
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
  EXPECT_TRUE(is({"/kv/owner", T::kValue, O::kLess, 0, "node-2"}));
  EXPECT_TRUE(is({"/kv/owner", T::kValue, O::kGreater, 0, "node-0"}));
  EXPECT_TRUE(is({"/kv/owner", T::kLease, O::kEqual, *lease, ""}));
  EXPECT_FALSE(is({"/kv/owner", T::kLease, O::kEqual, *lease + 1, ""}));
  EXPECT_TRUE(is({"/kv/owner", T::kVersion, O::kEqual, 1, ""}));
  EXPECT_TRUE(is({"/kv/absent", T::kVersion, O::kEqual, 0, ""}));
  EXPECT_TRUE(is({"/kv/absent", T::kModRevision, O::kEqual, 0, ""}));
  EXPECT_TRUE(is({"/kv/absent", T::kLease, O::kEqual, 0, ""}));
  // A value compare on a key that does not exist fails, whatever the op.
  EXPECT_FALSE(is({"/kv/absent", T::kValue, O::kEqual, 0, ""}));
  EXPECT_FALSE(is({"/kv/absent", T::kValue, O::kNotEqual, 0, "x"}));

  auto got = client_->Get("/kv/owner");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->lease, *lease);
  // A put without a lease takes the key off it; a put under no such lease
  // is refused.
  ASSERT_TRUE(client_->Put("/kv/owner", "node-1").ok());
  EXPECT_TRUE(is({"/kv/owner", T::kLease, O::kEqual, 0, ""}));
  EXPECT_EQ(client_->Put("/kv/owner", "x", *lease + 1000).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(EtcdContractTest, KeepAliveKeepsKeyAndExpiredLeaseIsNotFound) {
  // etcd raises TTLs below its minimum (1.5 x election timeout) to 2 s.
  auto kept = client_->GrantLease(absl::Seconds(2));
  auto left = client_->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(kept.ok() && left.ok());
  ASSERT_TRUE(client_->Put("/kv/kept", "x", *kept).ok());
  ASSERT_TRUE(client_->Put("/kv/left", "x", *left).ok());

  // Renew `kept` for longer than a TTL; `left` expires meanwhile.
  for (absl::Duration passed; passed < absl::Seconds(4); passed += absl::Milliseconds(500)) {
    auto ttl = client_->KeepAliveOnce(*kept);
    ASSERT_TRUE(ttl.ok()) << ttl.status();
    EXPECT_GE(*ttl, absl::Seconds(1));
    env_->PassTime(absl::Milliseconds(500));
  }
  auto kept_kv = client_->Get("/kv/kept");
  ASSERT_TRUE(kept_kv.ok());
  EXPECT_TRUE(kept_kv->has_value());

  auto left_kv = client_->Get("/kv/left");
  ASSERT_TRUE(left_kv.ok());
  EXPECT_FALSE(left_kv->has_value());
  EXPECT_EQ(client_->KeepAliveOnce(*left).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(EtcdContractTest, GrantLeaseRoundsUpToSeconds) {
  auto lease = client_->GrantLease(absl::Milliseconds(2500));
  ASSERT_TRUE(lease.ok()) << lease.status();
  auto ttl = client_->KeepAliveOnce(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(*ttl, absl::Seconds(3));
}

TEST_P(EtcdContractTest, RevokeDeletesKeysAtOnceWithDeleteEvents) {
  auto lease = client_->GrantLease(absl::Seconds(60));
  ASSERT_TRUE(lease.ok());
  auto r1 = client_->Put("/kv/r1", "x", *lease);
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(client_->Put("/kv/r2", "x", *lease).ok());
  Collector seen;
  auto watch = client_->Watch("/kv/r", *r1, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(client_->RevokeLease(*lease).ok());
  int64_t revision = 0;
  auto keys = client_->GetPrefix("/kv/r", &revision);
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->empty());
  EXPECT_EQ(client_->KeepAliveOnce(*lease).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->RevokeLease(*lease).code(), absl::StatusCode::kNotFound);

  std::vector<WatchEvent> events = seen.WaitEvents(4);
  ASSERT_THAT(events, SizeIs(4));  // two puts, then both deletes in one revision
  for (int i : {2, 3}) {
    EXPECT_EQ(events[i].type, WatchEvent::Type::kDelete) << i;
    EXPECT_EQ(events[i].kv.mod_revision, revision) << i;
  }
  EXPECT_EQ(events[2].kv.key, "/kv/r1");
  EXPECT_EQ(events[3].kv.key, "/kv/r2");
}

TEST_P(EtcdContractTest, WatchDeliversPutsAndDeletesFromARevision) {
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

// From now (revision 0): nothing of the past, and a transaction's events
// arrive together, in one batch.
TEST_P(EtcdContractTest, WatchFromNowDeliversATxnInOneBatch) {
  ASSERT_TRUE(client_->Put("/w/past", "1").ok());
  Collector seen;
  auto watch = client_->Watch("/w/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  auto txn = client_->Txn(
      {}, {{TxnOp::Kind::kPut, "/w/t1", "1", 0}, {TxnOp::Kind::kPut, "/w/t2", "2", 0}}, {});
  ASSERT_TRUE(txn.ok()) << txn.status();
  std::vector<WatchEvent> events = seen.WaitEvents(2);
  ASSERT_THAT(events, SizeIs(2));
  EXPECT_EQ(events[0].kv.key, "/w/t1");
  EXPECT_EQ(events[1].kv.key, "/w/t2");
  EXPECT_EQ(events[1].kv.mod_revision, txn->revision);
  watch->reset();
  EXPECT_EQ(seen.batches(), 1);
}

// A watch owner proves its watch is alive by asking: etcd answers with an
// empty batch behind the events it already sent, and nothing else arrives.
TEST_P(EtcdContractTest, WatchAnswersAProgressRequestWithAnEmptyBatch) {
  Collector seen;
  auto watch = client_->Watch("/w/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(client_->Put("/w/a", "1").ok());
  ASSERT_THAT(seen.WaitEvents(1), SizeIs(1));
  ASSERT_EQ(seen.batches(), 1);
  (*watch)->RequestProgress();
  EXPECT_TRUE(Eventually([&] { return seen.batches() == 2; }));
  watch->reset();
  EXPECT_THAT(seen.events(), SizeIs(1));
  EXPECT_THAT(seen.errors(), SizeIs(0));
}

TEST_P(EtcdContractTest, WatchReportsErrorOnceWhenEtcdDies) {
  Collector seen;
  auto watch = client_->Watch("/w/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  env_->Kill();
  std::vector<absl::Status> errors = seen.WaitError();
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_EQ(errors[0].code(), absl::StatusCode::kUnavailable) << errors[0];
  watch->reset();  // joined: every callback there will be has run
  EXPECT_THAT(seen.errors(), SizeIs(1));
}

TEST_P(EtcdContractTest, HungEtcdTimesOutAsUnavailable) {
  auto client = env_->NewClient(absl::Milliseconds(300));
  ASSERT_NE(client, nullptr);
  env_->Pause();
  const absl::Time start = absl::Now();
  auto got = client->Get("/kv/x");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr(env_->endpoint()));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  Collector seen;
  EXPECT_EQ(client->Watch("/w/", 0, seen.Callback()).status().code(),
            absl::StatusCode::kUnavailable);
  env_->Resume();
  EXPECT_TRUE(client->Get("/kv/x").ok());
}

TEST_P(EtcdContractTest, GetPrefixEndingIn0xff) {
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

TEST_P(EtcdContractTest, WatchFromCompactedRevisionIsOutOfRange) {
  auto r1 = client_->Put("/w/c", "1");
  auto r2 = client_->Put("/w/c", "2");
  ASSERT_TRUE(r1.ok() && r2.ok());
  absl::Status compacted = env_->Compact(*r2);
  ASSERT_TRUE(compacted.ok()) << compacted;

  Collector seen;
  auto watch = client_->Watch("/w/", *r1, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  std::vector<absl::Status> errors = seen.WaitError();
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_EQ(errors[0].code(), absl::StatusCode::kOutOfRange) << errors[0];
  EXPECT_THAT(errors[0].message(), HasSubstr(absl::StrCat(*r2)));

  // From the compaction revision itself the history is still there.
  Collector kept;
  auto from_r2 = client_->Watch("/w/", *r2, kept.Callback());
  ASSERT_TRUE(from_r2.ok()) << from_r2.status();
  std::vector<WatchEvent> events = kept.WaitEvents(1);
  ASSERT_THAT(events, SizeIs(1));
  EXPECT_EQ(events[0].kv.value, "2");
  EXPECT_TRUE(kept.errors().empty());
}

TEST_P(EtcdContractTest, WatchOutlivesItsClient) {
  Collector seen;
  auto watch = client_->Watch("/w/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  client_.reset();
  auto other = env_->NewClient(kContractRpcTimeout);
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->Put("/w/late", "x").ok());
  EXPECT_THAT(seen.WaitEvents(1), SizeIs(1));
  watch->reset();
  EXPECT_TRUE(seen.errors().empty());
}

// etcd restarted with its data: the watch reports the break, and the same
// client reaches the new process (a real one within a second or so: the
// channel's reconnect backoff is capped at 1 s).
TEST_P(EtcdContractTest, RestartBreaksWatchAndClientReconnects) {
  ASSERT_TRUE(client_->Put("/kv/durable", "x").ok());
  Collector seen;
  auto watch = client_->Watch("/kv/", 0, seen.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status();
  env_->Stop();
  EXPECT_THAT(seen.WaitError(), SizeIs(1));
  absl::Status started = env_->Restart();
  ASSERT_TRUE(started.ok()) << started;

  absl::StatusOr<std::optional<KeyValue>> got;
  ASSERT_TRUE(Eventually(
      [&] {
        got = client_->Get("/kv/durable");
        return got.ok();
      },
      ::kvstore::testing::kEventuallyBound, absl::Milliseconds(100)))
      << got.status();
  EXPECT_TRUE(got->has_value());
}

}  // namespace
}  // namespace etcd
}  // namespace server
}  // namespace kvstore
