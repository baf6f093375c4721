// Copyright 2026 The kvstore Authors.
//
// RespServer as a net::FdWatcher: a descriptor another layer lends it is
// read on a loop's thread (marked as a watching thread) beside the
// connections, until its watch ends it; a watch still on when the loops
// stop is handed back (OnUnwatched), and none is taken after.

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include "common/testing/eventually.h"
#include "gtest/gtest.h"
#include "server/net/fd_watch.h"
#include "server/resp/resp_server.h"
#include "server/storage/kv_store.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::testing::Eventually;

// One end of a socketpair, kept open while a loop holds the watch; reads a
// byte per call and ends the watch after `reads_before_end` of them.
class PairWatch : public net::FdWatch {
 public:
  PairWatch(int fd, int reads_before_end) : fd_(fd), reads_before_end_(reads_before_end) {}
  ~PairWatch() override { close(fd_); }
  int fd() const override { return fd_; }
  bool OnReadable() override {
    char c;
    if (read(fd_, &c, 1) == 1) ++reads;
    if (!net::WatchingThreadScope::Active()) off_loop = true;
    return reads < reads_before_end_;
  }
  void OnUnwatched() override { ++unwatched; }

  std::atomic<int> reads{0};
  std::atomic<int> unwatched{0};
  std::atomic<bool> off_loop{false};

 private:
  const int fd_;
  const int reads_before_end_;
};

class RespWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryPoolOptions po;
    po.data_bytes = 16 << 20;
    po.index_bytes = 1 << 20;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.cleaner_interval = absl::ZeroDuration();
    store_ = *KvStore::Create(pool_.get(), so);
    RespServerOptions o;
    o.port = 0;
    o.threads = 2;
    auto s = RespServer::Start(store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  // A watch on one end of a new socketpair; `*peer` is the other end.
  static std::shared_ptr<PairWatch> Pair(int reads_before_end, int* peer) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    *peer = sv[1];
    return std::make_shared<PairWatch>(sv[0], reads_before_end);
  }

  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<RespServer> server_;
};

TEST_F(RespWatchTest, AWatchIsReadOnALoopUntilItEndsItself) {
  int peer;
  auto watch = Pair(/*reads_before_end=*/2, &peer);
  ASSERT_TRUE(server_->Watch(watch));
  ASSERT_EQ(write(peer, "a", 1), 1);
  ASSERT_TRUE(Eventually([&] { return watch->reads == 1; }));
  ASSERT_EQ(write(peer, "b", 1), 1);
  ASSERT_TRUE(Eventually([&] { return watch->reads == 2; }));
  // Ended by its second read: the loop dropped it, so a third byte is
  // never read, and stopping the loops hands nothing back.
  ASSERT_TRUE(Eventually([&] { return watch.use_count() == 1; }));
  ASSERT_EQ(write(peer, "c", 1), 1);
  server_->Stop();
  EXPECT_EQ(watch->reads, 2);
  EXPECT_EQ(watch->unwatched, 0);
  EXPECT_FALSE(watch->off_loop);
  close(peer);
}

TEST_F(RespWatchTest, StoppingTheLoopsHandsAWatchBackAndTakesNoMore) {
  int peer;
  auto watch = Pair(/*reads_before_end=*/100, &peer);
  ASSERT_TRUE(server_->Watch(watch));
  ASSERT_EQ(write(peer, "a", 1), 1);
  ASSERT_TRUE(Eventually([&] { return watch->reads == 1; }));
  server_->Stop();
  EXPECT_EQ(watch->unwatched, 1);
  EXPECT_EQ(watch.use_count(), 1);  // the loop let go of it

  int peer2;
  auto late = Pair(/*reads_before_end=*/1, &peer2);
  EXPECT_FALSE(server_->Watch(late));
  EXPECT_EQ(late->unwatched, 0);  // never watched: nothing to hand back
  close(peer);
  close(peer2);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
