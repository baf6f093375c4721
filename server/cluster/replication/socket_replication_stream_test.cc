// Copyright 2026 The kvstore Authors.
//
// SocketReplicationStream against a real PeerListener on loopback, with a
// backup whose installs a test decides (a fake install inside the test;
// replicator_async_test and started_writes_test run the real installer
// over the same transport): batches answered in order, a write's refusal
// delivered to its ticket alone, a wrong secret or a backup that goes away
// failing what is pending. And the stream lending its socket to an event
// loop (a small one here; resp_watch_test runs RespServer's): the replies
// read there, a loop that waits for a reply reading it itself, a stopped
// loop handing the socket back, a dropped stream leaving the loop. And
// ReplicationStreams' remembered streams over the same transport.

#include "server/cluster/replication/socket_replication_stream.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/metrics/registry.h"
#include "common/metrics/testing.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/peer/peer_client.h"
#include "server/cluster/peer/peer_listener.h"
#include "server/cluster/replication/replica_socket.h"
#include "server/cluster/replication/replication_stream.h"
#include "server/net/batch_scope.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::testing::Eventually;
using ::testing::HasSubstr;

absl::Time Soon() { return absl::Now() + absl::Seconds(60); }

// An event loop for these tests: watches what it is given (net::FdWatcher)
// on its thread, marked as a watching thread, and runs posted tasks there.
class TestLoop final : public net::FdWatcher {
 public:
  TestLoop() {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread([this] { Run(); });
  }
  ~TestLoop() override {
    Stop();
    close(wake_fd_);
    close(epoll_fd_);
  }
  bool Watch(std::shared_ptr<net::FdWatch> watch) override {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    pending_.push_back(std::move(watch));
    Wake();
    return true;
  }
  void Post(std::function<void()> task) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
    Wake();
  }
  // Ends the loop; the watches still on get OnUnwatched().
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      Wake();
    }
    if (thread_.joinable()) thread_.join();
  }
  int watching() const { return watching_; }
  int reads() const { return reads_; }
  std::shared_ptr<net::FdWatcher> AsShared() {
    return std::shared_ptr<net::FdWatcher>(this, [](net::FdWatcher*) {});
  }

 private:
  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  void Run() {
    const net::WatchingThreadScope scope;
    absl::flat_hash_map<int, std::shared_ptr<net::FdWatch>> watches;
    for (bool stop = false; !stop;) {
      epoll_event events[16];
      const int n = epoll_wait(epoll_fd_, events, 16, -1);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd != wake_fd_) {
          auto it = watches.find(fd);
          if (it == watches.end()) continue;
          ++reads_;
          if (!it->second->OnReadable()) {
            epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
            watches.erase(fd);
          }
          continue;
        }
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof(count));
        std::vector<std::shared_ptr<net::FdWatch>> pending;
        std::vector<std::function<void()>> tasks;
        {
          absl::MutexLock lock(&mu_);
          pending.swap(pending_);
          tasks.swap(tasks_);
          stop = stopping_;
        }
        for (auto& w : pending) {
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.fd = w->fd();
          epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, w->fd(), &ev);
          watches[w->fd()] = std::move(w);
        }
        for (auto& task : tasks) task();
      }
      watching_ = static_cast<int>(watches.size());
    }
    for (auto& [fd, w] : watches) w->OnUnwatched();
    watching_ = 0;
  }

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<net::FdWatch>> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> watching_{0};
  std::atomic<int> reads_{0};
  std::thread thread_;
};

class SocketReplicationStreamTest : public ::testing::Test {
 protected:
  // A backup whose install of a write is `install_` (OK by default),
  // recording the seqs it was given in order.
  void StartBackup(const std::string& secret = "s3cret") {
    PeerListenerOptions o;
    o.secret = secret;
    absl::flat_hash_map<std::string, PeerListener::Handler> handlers;
    handlers[std::string(kReplicatePurpose)] =
        ReplicaSocketHandler([this](const ReplicateBatchView& batch, absl::Time arrived) {
          return ApplyReplicateBatch(batch, arrived, [this](const ReplicateWrite& w, absl::Time) {
            absl::MutexLock lock(&mu_);
            installed_.push_back(w.commit.seq);
            return install_ ? install_(RequestOf(w)) : absl::OkStatus();
          });
        });
    auto l = PeerListener::Start(o, &backup_registry_, std::move(handlers));
    ASSERT_TRUE(l.ok()) << l.status();
    backup_ = *std::move(l);
    node_.set_node_id("backup");
    node_.set_replication_address(absl::StrCat("127.0.0.1:", backup_->port()));
  }

  std::unique_ptr<SocketReplicationStream> Open(const std::string& secret = "s3cret") {
    SocketReplicationStreamOptions so;
    so.secret = secret;
    so.self = "primary";
    return std::make_unique<SocketReplicationStream>(node_, &metrics_, so);
  }
  // A stream that lends its socket to `loop` once connected (as
  // ReplicationStreams does: asked before the connection is up).
  std::shared_ptr<SocketReplicationStream> OpenLent(TestLoop& loop) {
    auto stream = OpenShared();
    stream->WatchRepliesWith(loop.AsShared());
    return stream;
  }
  // Owned by a shared_ptr, as ReplicationStreams owns its streams.
  std::shared_ptr<SocketReplicationStream> OpenShared() {
    SocketReplicationStreamOptions so;
    so.secret = "s3cret";
    so.self = "primary";
    return std::make_shared<SocketReplicationStream>(node_, &metrics_, so);
  }

  static v1::ReplicateRequest Write(uint64_t seq) {
    v1::ReplicateRequest w;
    w.set_seq(seq);
    w.set_key(absl::StrCat("k", seq));
    w.set_entry(std::string(4096, 'v'));
    return w;
  }

  std::vector<uint64_t> installed() {
    absl::MutexLock lock(&mu_);
    return installed_;
  }

  void TearDown() override {
    // The backup's threads call install_ and record into installed_: they
    // end before the fixture's members do.
    if (backup_ != nullptr) backup_->Stop();
  }

  metrics::Registry registry_;
  ReplicationStreamMetrics metrics_{&registry_};
  metrics::Registry backup_registry_;
  std::unique_ptr<PeerListener> backup_;
  v1::ClusterNode node_;
  absl::Mutex mu_;
  std::vector<uint64_t> installed_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status(const v1::ReplicateRequest&)> install_;
};

TEST_F(SocketReplicationStreamTest, WritesArriveInOrderAndEachTicketGetsItsAnswer) {
  StartBackup();
  auto stream = Open();
  std::vector<std::shared_ptr<ReplicationStream::Ticket>> tickets;
  // Sent before the connection is up: they wait in the queue, in order.
  for (uint64_t seq = 1; seq <= 100; ++seq) tickets.push_back(stream->Send(Write(seq), Soon()));
  for (auto& t : tickets) EXPECT_TRUE(stream->Wait(*t, Soon()).ok());
  std::vector<uint64_t> want;
  for (uint64_t seq = 1; seq <= 100; ++seq) want.push_back(seq);
  EXPECT_EQ(installed(), want);
  EXPECT_FALSE(stream->broken());
  // Fewer batches than writes: what queued behind a batch went together.
  EXPECT_LT(metrics::testing::Value(registry_, "kvstore_replication_stream_batches_total"), 100u);
  EXPECT_EQ(metrics::testing::Value(backup_registry_, "kvstore_peer_socket_accepted_total"), 1u);
}

// A RESP loop reads a pipeline of SETs inside a net::BatchScope: on an
// idle stream, the first write used to go alone and the others after its
// answer (two batches, and the client's replies in two writes).
TEST_F(SocketReplicationStreamTest, WritesQueuedInABatchScopeGoAsOneBatch) {
  StartBackup();
  auto stream = OpenShared();
  ASSERT_TRUE(stream->Wait(*stream->Send(Write(1), Soon()), Soon()).ok());  // connected, idle
  const auto batches = [&] {
    return metrics::testing::Value(registry_, "kvstore_replication_stream_batches_total");
  };
  const uint64_t before = batches();
  std::vector<std::shared_ptr<ReplicationStream::Ticket>> tickets;
  {
    net::BatchScope scope;
    for (uint64_t seq = 2; seq <= 17; ++seq) tickets.push_back(stream->Send(Write(seq), Soon()));
    EXPECT_EQ(batches(), before);  // held back until the scope ends
  }
  for (auto& t : tickets) EXPECT_TRUE(stream->Wait(*t, Soon()).ok());
  EXPECT_EQ(batches(), before + 1);
  std::vector<uint64_t> want;
  for (uint64_t seq = 1; seq <= 17; ++seq) want.push_back(seq);
  EXPECT_EQ(installed(), want);
}

// A thread that waits for a write it holds back sends it first; a stream
// no shared_ptr owns cannot be named in a scope and sends at once.
TEST_F(SocketReplicationStreamTest, AWaitInsideABatchScopeSendsWhatTheScopeHeld) {
  StartBackup();
  auto shared = OpenShared();
  auto owned = Open();
  net::BatchScope scope;
  EXPECT_TRUE(shared->Wait(*shared->Send(Write(1), Soon()), Soon()).ok());
  EXPECT_TRUE(owned->Wait(*owned->Send(Write(2), Soon()), Soon()).ok());
  EXPECT_FALSE(shared->broken());
  EXPECT_FALSE(owned->broken());
}

TEST_F(SocketReplicationStreamTest, ARefusalReachesItsOwnTicketOnly) {
  StartBackup();
  install_ = [](const v1::ReplicateRequest& w) {
    return w.seq() == 2 ? absl::FailedPreconditionError("stale shard epoch") : absl::OkStatus();
  };
  auto stream = Open();
  std::vector<std::shared_ptr<ReplicationStream::Ticket>> tickets;
  for (uint64_t seq = 1; seq <= 3; ++seq) tickets.push_back(stream->Send(Write(seq), Soon()));
  EXPECT_TRUE(stream->Wait(*tickets[0], Soon()).ok());
  absl::Status refused = stream->Wait(*tickets[1], Soon());
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("stale shard epoch"));
  EXPECT_TRUE(stream->Wait(*tickets[2], Soon()).ok());
  EXPECT_FALSE(stream->broken());
}

TEST_F(SocketReplicationStreamTest, AWrongSecretFailsTheWritesWithTheBackupsReason) {
  StartBackup("the-real-one");
  auto stream = Open("a-guess");
  auto ticket = stream->Send(Write(1), Soon());
  absl::Status s = stream->Wait(*ticket, Soon());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("wrong cluster secret"));
  EXPECT_TRUE(stream->broken());
  EXPECT_TRUE(installed().empty());
  EXPECT_TRUE(Eventually([&] {
    return metrics::testing::Value(backup_registry_, "kvstore_peer_socket_refused_total") == 1u;
  }));
}

TEST_F(SocketReplicationStreamTest, ABackupThatGoesAwayFailsWhatIsPendingAsUnavailable) {
  StartBackup();
  absl::Notification in_install, release;
  install_ = [&](const v1::ReplicateRequest& w) {
    if (w.seq() == 2) {
      in_install.Notify();
      release.WaitForNotification();
    }
    return absl::OkStatus();
  };
  auto stream = Open();
  ASSERT_TRUE(stream->Wait(*stream->Send(Write(1), Soon()), Soon()).ok());
  auto pending = stream->Send(Write(2), Soon());
  in_install.WaitForNotification();
  auto queued = stream->Send(Write(3), Soon());
  // The backup's socket is shut down under the install; the stream learns
  // it from the socket, not from a deadline.
  std::thread stop([&] { backup_->Stop(); });
  absl::Status s = stream->Wait(*pending, Soon());
  release.Notify();
  stop.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(stream->Wait(*queued, Soon()).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(stream->broken());
}

TEST_F(SocketReplicationStreamTest, AnUnansweredWriteBreaksTheStreamAtItsDeadline) {
  StartBackup();
  absl::Notification release;
  install_ = [&](const v1::ReplicateRequest&) {
    release.WaitForNotification();
    return absl::OkStatus();
  };
  auto stream = Open();
  auto ticket = stream->Send(Write(1), Soon());
  EXPECT_EQ(stream->Wait(*ticket, absl::Now() + absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(stream->broken());
  release.Notify();
  // The backup's thread may still be leaving `release`: joined before the
  // test's locals go.
  backup_->Stop();
}

TEST_F(SocketReplicationStreamTest, ALentSocketsRepliesAreReadOnTheLoop) {
  StartBackup();
  TestLoop loop;
  auto stream = OpenLent(loop);
  std::vector<std::shared_ptr<ReplicationStream::Ticket>> tickets;
  for (uint64_t seq = 1; seq <= 100; ++seq) tickets.push_back(stream->Send(Write(seq), Soon()));
  for (auto& t : tickets) EXPECT_TRUE(stream->Wait(*t, Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return loop.watching() == 1; }));
  // Written once the socket is lent: only the loop reads their replies.
  const int reads_before = loop.reads();
  for (uint64_t seq = 101; seq <= 110; ++seq) {
    EXPECT_TRUE(stream->Wait(*stream->Send(Write(seq), Soon()), Soon()).ok());
  }
  EXPECT_GT(loop.reads(), reads_before);
  // Asking to lend before the connection was up did not cancel the
  // connect (it once did: every new stream broke and reconnected).
  EXPECT_FALSE(stream->broken());
  EXPECT_EQ(metrics::testing::Value(registry_, "kvstore_replication_streams_broken_total"), 0u);
  EXPECT_EQ(metrics::testing::Value(backup_registry_, "kvstore_peer_socket_accepted_total"), 1u);
  EXPECT_EQ(installed().size(), 110u);
}

TEST_F(SocketReplicationStreamTest, ALoopThatWaitsForAReplyOnlyItReadsReadsItItself) {
  StartBackup();
  TestLoop loop;
  auto stream = OpenLent(loop);
  EXPECT_TRUE(stream->Wait(*stream->Send(Write(1), Soon()), Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return loop.watching() == 1; }));
  // A synchronous write on the loop's own thread: the loop cannot run its
  // watch while it waits, so the wait reads the reply (else it would wait
  // until the deadline and break the stream).
  absl::Notification done;
  absl::Status status;
  loop.Post([&] {
    status = stream->Wait(*stream->Send(Write(2), Soon()), Soon());
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_FALSE(stream->broken());
}

TEST_F(SocketReplicationStreamTest, AStoppedLoopHandsTheSocketBackToTheStream) {
  StartBackup();
  TestLoop loop;
  auto stream = OpenLent(loop);
  EXPECT_TRUE(stream->Wait(*stream->Send(Write(1), Soon()), Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return loop.watching() == 1; }));
  loop.Stop();
  // The stream's thread reads again.
  EXPECT_TRUE(stream->Wait(*stream->Send(Write(2), Soon()), Soon()).ok());
  EXPECT_FALSE(stream->broken());
}

TEST_F(SocketReplicationStreamTest, ADroppedStreamLeavesTheLoop) {
  StartBackup();
  TestLoop loop;
  auto stream = OpenLent(loop);
  EXPECT_TRUE(stream->Wait(*stream->Send(Write(1), Soon()), Soon()).ok());
  ASSERT_TRUE(Eventually([&] { return loop.watching() == 1; }));
  // Its destructor shuts the socket down; the loop reads the end, drops
  // the watch, and with it the last hold on the socket, which closes.
  stream.reset();
  EXPECT_TRUE(Eventually([&] { return loop.watching() == 0; }));
  EXPECT_TRUE(Eventually([&] {
    return metrics::testing::Value(registry_, "kvstore_replication_streams_broken_total") == 1;
  }));
}

// ReplicationStreams::GetRemembered: the remembered stream while the table
// and the stream stay as they were; Get()'s answer as soon as either
// changes (a stream that broke, one dropped from the table while someone
// still holds it, a node given by another object).
TEST_F(SocketReplicationStreamTest, ARememberedStreamIsTheOneGetWouldReturn) {
  StartBackup();
  PeerClientOptions pco;
  pco.peer_secret = "s3cret";
  PeerClient peers(pco);
  metrics::Registry registry;
  ReplicationStreams streams(&peers, &registry, "primary");
  ReplicationStreams::Remembered last;

  std::shared_ptr<ReplicationStream> first = streams.GetRemembered(1, node_, &last);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(streams.GetRemembered(1, node_, &last), first);
  EXPECT_EQ(streams.Get(1, node_), first);

  first->Abandon(absl::UnavailableError("test"));
  std::shared_ptr<ReplicationStream> second = streams.GetRemembered(1, node_, &last);
  EXPECT_NE(second, first);
  EXPECT_EQ(streams.Get(1, node_), second);
  // Remembered now with the table as it is.
  EXPECT_EQ(streams.GetRemembered(1, node_, &last), second);

  // Dropped from the table while `second` is still held (so not broken).
  streams.Retain([](uint32_t, const std::string&) { return false; });
  EXPECT_FALSE(second->broken());
  std::shared_ptr<ReplicationStream> third = streams.GetRemembered(1, node_, &last);
  EXPECT_NE(third, second);
  EXPECT_EQ(streams.Get(1, node_), third);

  // The same node in another object, and another shard: each asks the table.
  const v1::ClusterNode copy = node_;
  EXPECT_EQ(streams.GetRemembered(1, copy, &last), third);
  EXPECT_EQ(last.node, &copy);
  std::shared_ptr<ReplicationStream> other_shard = streams.GetRemembered(2, copy, &last);
  EXPECT_NE(other_shard, third);
  EXPECT_EQ(last.shard_id, 2u);
  streams.AbandonAll(absl::UnavailableError("test over"));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
