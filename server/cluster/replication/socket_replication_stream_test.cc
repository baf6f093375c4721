// Copyright 2026 The kvstore Authors.
//
// SocketReplicationStream against a real PeerListener on loopback, with a
// backup whose installs a test decides (a fake install inside the test;
// replicator_async_test and started_writes_test run the real installer
// over the same transport): batches answered in order, a write's refusal
// delivered to its ticket alone, a wrong secret or a backup that goes away
// failing what is pending.

#include "server/cluster/replication/socket_replication_stream.h"

#include <memory>
#include <string>
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
#include "server/cluster/peer/peer_listener.h"
#include "server/cluster/replication/replica_socket.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::testing::Eventually;
using ::testing::HasSubstr;

absl::Time Soon() { return absl::Now() + absl::Seconds(60); }

class SocketReplicationStreamTest : public ::testing::Test {
 protected:
  // A backup whose install of a write is `install_` (OK by default),
  // recording the seqs it was given in order.
  void StartBackup(const std::string& secret = "s3cret") {
    PeerListenerOptions o;
    o.secret = secret;
    absl::flat_hash_map<std::string, PeerListener::Handler> handlers;
    handlers[std::string(kReplicatePurpose)] =
        ReplicaSocketHandler([this](const v1::ReplicateBatch& batch, absl::Time arrived) {
          return ApplyReplicateBatch(batch, arrived,
                                     [this](const v1::ReplicateRequest& w, absl::Time) {
                                       absl::MutexLock lock(&mu_);
                                       installed_.push_back(w.seq());
                                       return install_ ? install_(w) : absl::OkStatus();
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

}  // namespace
}  // namespace server
}  // namespace kvstore
