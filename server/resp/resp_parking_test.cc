// Copyright 2026 The kvstore Authors.
//
// Parked SETs (commit_pool.h): a SET whose commit waits for other nodes
// runs off the RESP loop, so the loop's other connections are served
// meanwhile, and one connection's pipelined SETs are in flight together
// with their replies in request order. The write hook here stands in for
// the replicator (the real one: tests/cluster and the replication
// benchmark); it holds writes until the test lets them go.

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/protocol/resp.h"
#include "gtest/gtest.h"
#include "server/net/batch_scope.h"
#include "server/resp/resp_server.h"
#include "server/resp/resp_test_util.h"
#include "server/storage/kv_store.h"
#include "server/storage/memory_pool.h"
#include "server/storage/write_hook.h"

namespace kvstore {
namespace server {
namespace {

using resp::Reply;
using resp_test::Cmd;
using resp_test::Connect;
using resp_test::Read;
using resp_test::Send;
using resp_test::SetReceiveTimeout;

// Holds every write of a key starting with "held" or "loop-held" until
// Release(), as a replication round would until the backups answer; counts
// how many it holds at once. It says every write waits for peers but for
// keys starting with "loop-" (a hint the hook may get wrong: the loop then
// runs such a write itself, and waits with it).
class GatedHook : public WriteHook {
 public:
  absl::Status Write(absl::string_view key, absl::string_view,
                     absl::FunctionRef<absl::Status()> publish) override {
    if (absl::StartsWith(key, "held") || absl::StartsWith(key, "loop-held")) {
      absl::MutexLock lock(&mu_);
      ++holding_;
      max_holding_ = std::max(max_holding_, holding_);
      mu_.Await(absl::Condition(&released_));
      --holding_;
    }
    return publish();
  }
  bool WaitsForPeers(absl::string_view key) override { return !absl::StartsWith(key, "loop-"); }
  // A key starting with "inline" is started and finished at once, on the
  // calling thread (the loop's), as when the loop reads the reply itself.
  // A key starting with "batched" is queued, as on a replication stream,
  // and the queue goes as one batch where the stream's would: at once
  // outside a net::BatchScope, at the scope's end inside one.
  bool StartWrite(absl::string_view key, const layout::KeyHash&, absl::string_view, Publish publish,
                  Done done) override {
    if (absl::StartsWith(key, "batched")) {
      queued_.emplace_back(std::move(publish), std::move(done));
      if (queued_.size() == 1 && !net::BatchScope::Defer([this] { SendQueued(); })) SendQueued();
      return true;
    }
    if (!absl::StartsWith(key, "inline")) return false;
    done(publish());
    return true;
  }
  // The sizes of the batches "batched" writes went in, in order.
  std::vector<size_t> batches() {
    absl::MutexLock lock(&mu_);
    return batches_;
  }

  // On the loop's thread, as StartWrite.
  void SendQueued() {
    std::vector<std::pair<Publish, Done>> batch;
    batch.swap(queued_);
    {
      absl::MutexLock lock(&mu_);
      batches_.push_back(batch.size());
    }
    for (auto& [publish, done] : batch) done(publish());
  }

  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  // Waits (60 s at most) until `n` writes are held at once.
  bool AwaitHolding(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return holding_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }
  int max_holding() {
    absl::MutexLock lock(&mu_);
    return max_holding_;
  }

 private:
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  int holding_ ABSL_GUARDED_BY(mu_) = 0;
  int max_holding_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<size_t> batches_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<Publish, Done>> queued_;  // the loop's thread only
};

class RespParkingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryPoolOptions po;
    po.data_bytes = 32 << 20;
    po.index_bytes = 1 << 20;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.write_hook = &hook_;
    store_ = *KvStore::Create(pool_.get(), so);
    RespServerOptions o;
    o.port = 0;
    o.threads = 1;  // every connection on the one loop
    auto s = RespServer::Start(store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  void TearDown() override {
    hook_.Release();
    server_.reset();
  }
  int Dial() {
    const int fd = Connect(server_->port());
    SetReceiveTimeout(fd, 60);  // a stalled loop fails the test, slowly
    return fd;
  }

  // Sends `request`, a write the hook holds, on a connection that is then
  // closed while the write is held; the loop must go on serving another
  // connection, and once released the write must complete without its
  // client: `key` reads `value` (polled, 60 s at most).
  void ExpectWriteOutlivesItsConnection(const std::string& request, const std::string& key,
                                        const std::string& value) {
    const int a = Dial();
    Send(a, request);
    ASSERT_TRUE(hook_.AwaitHolding(1));
    close(a);
    const int b = Dial();
    Send(b, Cmd({"PING"}));
    ASSERT_EQ(Read(b, 1).size(), 1u);
    hook_.Release();
    bool seen = false;
    for (int i = 0; i < 600 && !seen; ++i) {
      Send(b, Cmd({"GET", key}));
      std::vector<Reply> r = Read(b, 1);
      seen = r.size() == 1 && r[0].str == value;
      if (!seen) absl::SleepFor(absl::Milliseconds(100));
    }
    EXPECT_TRUE(seen) << key;
    close(b);
  }

  GatedHook hook_;
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<RespServer> server_;
};

TEST_F(RespParkingTest, AParkedSetLeavesTheLoopServingOthers) {
  const int a = Dial();
  Send(a, Cmd({"SET", "held", "v"}));
  ASSERT_TRUE(hook_.AwaitHolding(1));
  // The loop is free: another connection is answered while a's SET waits
  // (before parking, the loop itself waited and this read timed out).
  const int b = Dial();
  Send(b, Cmd({"PING"}) + Cmd({"SET", "free", "x"}) + Cmd({"GET", "free"}));
  std::vector<Reply> rb = Read(b, 3);
  ASSERT_EQ(rb.size(), 3u);
  EXPECT_EQ(rb[0].str, "PONG");
  EXPECT_EQ(rb[1].str, "OK");
  EXPECT_EQ(rb[2].str, "x");
  hook_.Release();
  std::vector<Reply> ra = Read(a, 1);
  ASSERT_EQ(ra.size(), 1u);
  EXPECT_EQ(ra[0].str, "OK");
  Send(b, Cmd({"GET", "held"}));
  rb = Read(b, 1);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].str, "v");
  close(a);
  close(b);
}

TEST_F(RespParkingTest, PipelinedSetsAreInFlightTogetherAndAnsweredInOrder) {
  const int fd = Dial();
  // 16 SETs of different keys, then one of a key already in flight (it must
  // follow the first), then reads of both: the reads wait for the SETs.
  std::string batch;
  for (int i = 0; i < 16; ++i) {
    batch += Cmd({"SET", absl::StrCat("held", i), absl::StrCat("v", i)});
  }
  batch += Cmd({"SET", "held0", "again"});
  batch += Cmd({"GET", "held0"});
  batch += Cmd({"GET", "held15"});
  Send(fd, batch);
  // All 16 are parked at once (before, one at a time: this waited for 16 in vain).
  ASSERT_TRUE(hook_.AwaitHolding(16)) << "held at most " << hook_.max_holding();
  hook_.Release();
  std::vector<Reply> r = Read(fd, 19);
  ASSERT_EQ(r.size(), 19u);
  for (int i = 0; i < 17; ++i) EXPECT_EQ(r[i].str, "OK") << i;
  EXPECT_EQ(r[17].str, "again");
  EXPECT_EQ(r[18].str, "v15");
  EXPECT_EQ(hook_.max_holding(), 16);
  close(fd);
}

// The commit still runs; its entry stays the job's.
TEST_F(RespParkingTest, AConnectionClosedWhileItsSetIsParkedLosesNothingElse) {
  ExpectWriteOutlivesItsConnection(Cmd({"SET", "held", "v"}), "held", "v");
}

TEST_F(RespParkingTest, ASetFinishedOnTheLoopsOwnThreadIsAnswered) {
  // Finished on the loop's thread, the commit writes no eventfd (the loop
  // is awake: CommitPool::LoopScope); the loop answers it before it sleeps
  // again (else this read times out).
  const int fd = Dial();
  Send(fd, Cmd({"SET", "inline1", "a"}) + Cmd({"SET", "inline2", "b"}) + Cmd({"GET", "inline1"}));
  std::vector<Reply> r = Read(fd, 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].str, "OK");
  EXPECT_EQ(r[1].str, "OK");
  EXPECT_EQ(r[2].str, "a");
  Send(fd, Cmd({"SET", "inline3", "c"}));
  r = Read(fd, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].str, "OK");
  close(fd);
}

// The SETs of one read are replicated as one batch. Before, the first of a
// pipeline found the stream idle and went alone.
TEST_F(RespParkingTest, APipelinesReplicatedSetsStartAsOneBatch) {
  const int fd = Dial();
  std::string pipeline;
  for (int i = 0; i < 8; ++i) pipeline += Cmd({"SET", absl::StrCat("batched", i), "v"});
  Send(fd, pipeline);
  std::vector<Reply> r = Read(fd, 8);
  ASSERT_EQ(r.size(), 8u);
  for (const Reply& reply : r) EXPECT_EQ(reply.str, "OK");
  EXPECT_EQ(hook_.batches(), std::vector<size_t>{8});
  // Alone in its read, a SET is not held back for company.
  Send(fd, Cmd({"SET", "batched8", "v"}));
  r = Read(fd, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].str, "OK");
  EXPECT_EQ(hook_.batches(), (std::vector<size_t>{8, 1}));
  close(fd);
}

TEST_F(RespParkingTest, SetsOfConnectionsServedInOneWakeupStartAsOneBatch) {
  // The loop is kept busy (an MSET it runs itself, held by the hook) while
  // two other connections each send a SET: the next epoll_wait returns
  // both, and their writes go as one batch (group commit), where each
  // connection's read used to start its own.
  const int blocker = Dial();
  const int a = Dial();
  const int b = Dial();
  Send(blocker, Cmd({"MSET", "loop-held-m", "v"}));
  ASSERT_TRUE(hook_.AwaitHolding(1));
  Send(a, Cmd({"SET", "batched-a", "v"}));
  Send(b, Cmd({"SET", "batched-b", "v"}));
  hook_.Release();
  std::vector<Reply> r = Read(blocker, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].str, "OK");
  for (int fd : {a, b}) {
    r = Read(fd, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].str, "OK");
  }
  EXPECT_EQ(hook_.batches(), std::vector<size_t>{2});
  close(blocker);
  close(a);
  close(b);
}

// Write commands other than a plain SET are parked whole (before, the
// loop ran them, and this PING waited for the INCR's round).
TEST_F(RespParkingTest, AParkedWriteCommandLeavesTheLoopServingOthers) {
  const int a = Dial();
  Send(a, Cmd({"INCR", "held-n"}));
  ASSERT_TRUE(hook_.AwaitHolding(1));
  const int b = Dial();
  Send(b, Cmd({"PING"}) + Cmd({"INCR", "free-n"}) + Cmd({"GET", "free-n"}));
  std::vector<Reply> rb = Read(b, 3);
  ASSERT_EQ(rb.size(), 3u);
  EXPECT_EQ(rb[0].str, "PONG");
  EXPECT_EQ(rb[1].integer, 1);
  EXPECT_EQ(rb[2].str, "1");
  hook_.Release();
  std::vector<Reply> ra = Read(a, 1);
  ASSERT_EQ(ra.size(), 1u);
  EXPECT_EQ(ra[0].integer, 1);
  close(a);
  close(b);
}

TEST_F(RespParkingTest, RequestsBehindAParkedCommandWaitAndKeepTheirOrder) {
  const int a = Dial();
  // A streamed SET, a GET and an MSET behind a parked INCR: none may run
  // before it (the GET reads what it wrote; the SET is not parked beside
  // it, since a command's keys are not tracked).
  Send(a, Cmd({"INCR", "held-c"}) + Cmd({"SET", "held-x", "v"}) + Cmd({"GET", "held-c"}) +
              Cmd({"MSET", "held-a", "1", "held-b", "2"}) + Cmd({"DEL", "held-x"}));
  ASSERT_TRUE(hook_.AwaitHolding(1));
  const int b = Dial();
  Send(b, Cmd({"PING"}));
  ASSERT_EQ(Read(b, 1).size(), 1u);
  EXPECT_EQ(hook_.max_holding(), 1);
  hook_.Release();
  std::vector<Reply> r = Read(a, 5);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].integer, 1);
  EXPECT_EQ(r[1].str, "OK");
  EXPECT_EQ(r[2].str, "1");
  EXPECT_EQ(r[3].str, "OK");
  EXPECT_EQ(r[4].integer, 1);
  close(a);
  close(b);
}

// The command still runs on its worker; only its reply has nowhere to go.
TEST_F(RespParkingTest, AConnectionClosedWhileItsCommandIsParkedLosesNothingElse) {
  ExpectWriteOutlivesItsConnection(Cmd({"APPEND", "held-s", "abc"}), "held-s", "abc");
}

// Refusals a command makes before it writes are the loop's, not a
// worker's: same words, no hand-off.
TEST_F(RespParkingTest, AWriteRefusedForItsArityIsAnsweredAtOnce) {
  const int a = Dial();
  Send(a, Cmd({"INCR", "held-x", "extra"}) + Cmd({"PING"}));
  std::vector<Reply> r = Read(a, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].str, "ERR wrong number of arguments for 'incr' command");
  EXPECT_EQ(r[1].str, "PONG");
  EXPECT_EQ(hook_.max_holding(), 0);
  close(a);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
