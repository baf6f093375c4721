// Copyright 2026 The kvstore Authors.
//
// A primary's RDMA replication link (server/cluster/replication/replica_writer.h,
// rdma_replica_links.h) against a real RDMA server standing in for the
// backup. The backup's
// replication checks are replaced by a recording sink (the ReplicaInstaller
// is tested with the replication fixture): what is checked here is the
// transport, i.e. that a replicated entry arrives byte for byte with its
// tag, that a delete names its key, that the backup's refusal comes back in
// the ack without breaking the link, that malformed writes never leave the
// primary, and that a link's lease counters reach the server's registry
// (the one /metrics renders) under its backup's `peer` label.
//
// Needs an RDMA device: run through tests/rxe (the VM harness); skips
// otherwise.

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/control/control_client.h"
#include "common/metrics/exposition.h"
#include "common/metrics/registry.h"
#include "common/protocol/commit_wire.h"
#include "common/protocol/layout.h"
#include "common/rdma/initiator/path_core.h"
#include "common/rdma/initiator/rdma_context.h"
#include "gtest/gtest.h"
#include "proto/kv_cluster.pb.h"
#include "server/cluster/replication/rdma_replica_links.h"
#include "server/cluster/replication/replica_writer.h"
#include "server/kv_server.h"
#include "server/rdma/rdma_service.h"
#include "server/rdma/replica_commit_sink.h"
#include "server/storage/kv_store.h"
#include "tests/raw_rdma_client.h"

namespace kvstore {
namespace {

using server::KvServer;
using server::KvServerOptions;
using server::ReplicaWriter;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

absl::Time Deadline() { return absl::Now() + absl::Seconds(10); }

// What the sink saw of one replica commit, copied out of the message.
struct Seen {
  uint32_t shard_id = 0;
  uint64_t shard_epoch = 0;
  uint64_t seq = 0;
  std::string primary_node_id;
  uint64_t primary_incarnation = 0;
  bool is_delete = false;
  std::string key;
  std::string entry;
};

// Records every commit; installs puts unless told to refuse. Called on the
// backup's RDMA worker thread.
class RecordingSink final : public server::ReplicaCommitSink {
 public:
  absl::Status ApplyReplicaCommit(const server::ReplicaCommit& c,
                                  absl::FunctionRef<absl::Status()> install) override {
    absl::MutexLock lock(&mu_);
    seen_.push_back(Seen{c.shard_id, c.shard_epoch, c.seq, std::string(c.primary_node_id),
                         c.primary_incarnation, c.is_delete, std::string(c.key),
                         std::string(c.entry)});
    if (!reply_.ok()) return reply_;
    if (c.seq == refuse_seq_) return absl::FailedPreconditionError("refused by the test");
    return c.is_delete ? absl::OkStatus() : install();
  }
  void set_reply(absl::Status s) {
    absl::MutexLock lock(&mu_);
    reply_ = std::move(s);
  }
  // Refuses the write of this seq (0: none), the others installed.
  void set_refuse_seq(uint64_t seq) {
    absl::MutexLock lock(&mu_);
    refuse_seq_ = seq;
  }
  std::vector<Seen> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
  absl::Status reply_ ABSL_GUARDED_BY(mu_);
  uint64_t refuse_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

std::string Entry(absl::string_view key, absl::string_view value, uint64_t version) {
  std::string e(layout::EntryBytes(key.size(), value.size()), '\0');
  layout::EncodeEntry(e.data(), key, value, version);
  return e;
}

// The cluster secret of the backup: a replica link's session must be opened
// with it, or its replica commits are refused.
constexpr char kClusterSecret[] = "rdma-replica-link-test-secret";

// The backup: an RDMA server whose replica commits go to a recording sink.
class RdmaBackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KvServerOptions o;
    o.listen_address = "127.0.0.1";
    o.control_port = 0;
    o.resp_port = 0;
    o.pool_bytes = 16ull << 20;
    o.segment_bytes = 1ull << 20;
    o.transport = server::ServerTransport::kRdma;
    o.rdma_device = Env("KV_RDMA_DEVICE");
    o.rdma_ip = Env("KV_RDMA_IP");
    o.cluster_secret = kClusterSecret;
    auto s = KvServer::Start(o);
    if (!s.ok() && Env("KV_RDMA_DEVICE").empty()) {
      GTEST_SKIP() << "*** no RDMA device (KV_RDMA_DEVICE unset): " << s.status()
                   << " — run through tests/rxe/run-rdma-tests.sh ***";
    }
    ASSERT_TRUE(s.ok()) << s.status();
    backup_ = std::move(*s);
    backup_->rdma_service()->set_replica_sink(&sink_, /*offload_commits=*/false);
  }

  void TearDown() override {
    if (backup_ != nullptr) backup_->rdma_service()->set_replica_sink(nullptr);
  }

  std::string BackupAddress() const { return absl::StrCat("127.0.0.1:", backup_->control_port()); }

  static wire::ReplicaCommit Tag(uint64_t seq) {
    wire::ReplicaCommit t;
    t.shard_id = 3;
    t.shard_epoch = 9;
    t.seq = seq;
    t.primary_node_id = "primary-a";
    t.primary_incarnation = 5;
    return t;
  }

  // Declared before the backup, so it outlives the backup's workers.
  RecordingSink sink_;
  std::unique_ptr<KvServer> backup_;
};

class RdmaReplicaWriterTest : public RdmaBackupTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Open(kClusterSecret)); }
  // The writer, on a session opened with `token` (the cluster secret: a
  // primary's link; anything else: a client's).
  void Open(const std::string& token) {
    ASSERT_NO_FATAL_FAILURE(RdmaBackupTest::SetUp());
    if (IsSkipped()) return;
    control::ControlSecurity security;
    security.auth_token = token;
    auto control = control::ControlClient::Dial(BackupAddress(), security);
    ASSERT_TRUE(control.ok()) << control.status();
    control_ = std::move(*control);
    auto hs = control_->Handshake("replica-of-test", /*wait_for_ready=*/true, Deadline());
    ASSERT_TRUE(hs.ok()) << hs.status();
    auto ctx = initiator::OpenRdmaContext(Env("KV_RDMA_DEVICE"), hs->limits().max_value_bytes());
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    counters_.leases.granted = registry_.AddCounter("kvstore_test_granted_total", "Granted.");
    counters_.leases.renewed = registry_.AddCounter("kvstore_test_renewed_total", "Renewed.");
    counters_.leases.released = registry_.AddCounter("kvstore_test_released_total", "Released.");
    counters_.lease_aborts = registry_.AddCounter("kvstore_test_aborts_total", "Aborts.");
    auto writer = ReplicaWriter::Connect(*ctx, control_.get(), *hs, "replica-of-test", 1 << 20,
                                         absl::Seconds(5), counters_);
    ASSERT_TRUE(writer.ok()) << writer.status();
    writer_ = std::move(*writer);
  }

  void TearDown() override {
    writer_.reset();
    control_.reset();
    RdmaBackupTest::TearDown();
  }

  metrics::Registry registry_;  // the writer's counters; outlives it
  initiator::PathCounters counters_;
  std::unique_ptr<control::ControlClient> control_;
  std::unique_ptr<ReplicaWriter> writer_;
};

TEST_F(RdmaReplicaWriterTest, PutInstallsTheEntryByteForByteWithItsTag) {
  // One entry small enough for a slot's scratch, one that needs a pooled
  // staging buffer (over 4 KiB).
  const std::string small = Entry("k-small", "v1", 7);
  const std::string large = Entry("k-large", std::string(64 << 10, 'x'), 8);
  absl::Status s = writer_->Put(small, Tag(11), Deadline());
  ASSERT_TRUE(s.ok()) << s;
  s = writer_->Put(large, Tag(12), Deadline());
  ASSERT_TRUE(s.ok()) << s;

  const std::vector<Seen> seen = sink_.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].shard_id, 3u);
  EXPECT_EQ(seen[0].shard_epoch, 9u);
  EXPECT_EQ(seen[0].seq, 11u);
  EXPECT_EQ(seen[0].primary_node_id, "primary-a");
  EXPECT_EQ(seen[0].primary_incarnation, 5u);
  EXPECT_FALSE(seen[0].is_delete);
  EXPECT_EQ(seen[0].entry, small);
  EXPECT_EQ(seen[1].seq, 12u);
  EXPECT_EQ(seen[1].entry, large);
  // Installed as sent: the version and checksum are the primary's.
  auto copy = backup_->store()->CopyEntry("k-small");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(*copy, small);
  copy = backup_->store()->CopyEntry("k-large");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(*copy, large);
  // The writes went into a lease the backup granted, counted where the
  // writer's owner said.
  EXPECT_GE(counters_.leases.granted->Value(), 1u);
  EXPECT_FALSE(writer_->broken());
}

// A batch (RdmaReplicaLink's sender): the PUTs that pass the checks go in
// one doorbell and are installed in order, each with its own tag; one that
// fails the checks is refused alone and nothing of it is sent.
TEST_F(RdmaReplicaWriterTest, PutBatchInstallsEveryWriteAndRefusesOnlyTheBadOne) {
  const std::string a = Entry("b-a", "1", 1);
  const std::string large = Entry("b-large", std::string(64 << 10, 'y'), 2);
  std::string torn = Entry("b-torn", "3", 3);
  torn.resize(torn.size() - 8);  // lengths no longer add up
  const std::string c = Entry("b-c", "4", 4);
  std::vector<ReplicaWriter::BatchPut> puts = {
      {a, Tag(41)}, {large, Tag(42)}, {torn, Tag(43)}, {c, Tag(44)}};
  writer_->PutBatch(absl::MakeSpan(puts), Deadline());
  EXPECT_TRUE(puts[0].status.ok()) << puts[0].status;
  EXPECT_TRUE(puts[1].status.ok()) << puts[1].status;
  EXPECT_EQ(puts[2].status.code(), absl::StatusCode::kInvalidArgument) << puts[2].status;
  EXPECT_TRUE(puts[3].status.ok()) << puts[3].status;
  const std::vector<Seen> seen = sink_.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].seq, 41u);
  EXPECT_EQ(seen[0].entry, a);
  EXPECT_EQ(seen[1].seq, 42u);
  EXPECT_EQ(seen[1].entry, large);
  EXPECT_EQ(seen[2].seq, 44u);
  EXPECT_EQ(seen[2].entry, c);
  auto copy = backup_->store()->CopyEntry("b-large");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(*copy, large);
  EXPECT_FALSE(writer_->broken());
}

// The backup's counters of batch commits (kvstore_rdma_replica_batch*).
uint64_t BackupCounter(KvServer* backup, const std::string& name) {
  const std::map<std::string, uint64_t> flat =
      metrics::FlattenSnapshot(backup->rdma_service()->registry().TakeSnapshot());
  auto it = flat.find(name);
  return it == flat.end() ? 0 : it->second;
}

// To a backup that takes batch commits, a batch of PUTs goes as its WRITEs
// and one commit SEND: the backup counts one batch of all of them, and
// installs each in order with its own tag.
TEST_F(RdmaReplicaWriterTest, PutBatchCommitsItsWritesWithOneSend) {
  ASSERT_GT(writer_->batch_commits(Tag(0).primary_node_id.size()), 10u);
  std::vector<std::string> entries;
  for (int i = 0; i < 10; ++i) entries.push_back(Entry(absl::StrCat("one-", i), "v", 50 + i));
  std::vector<ReplicaWriter::BatchPut> puts;
  for (int i = 0; i < 10; ++i) puts.push_back({entries[i], Tag(500 + i)});
  writer_->PutBatch(absl::MakeSpan(puts), Deadline());
  for (const auto& p : puts) EXPECT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(BackupCounter(backup_.get(), "kvstore_rdma_replica_batches_total"), 1u);
  EXPECT_EQ(BackupCounter(backup_.get(), "kvstore_rdma_replica_batch_writes_total"), 10u);
  const std::vector<Seen> seen = sink_.seen();
  ASSERT_EQ(seen.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(seen[i].seq, 500u + i);
    EXPECT_EQ(seen[i].entry, entries[i]);
    EXPECT_EQ(seen[i].primary_node_id, "primary-a");
    EXPECT_EQ(seen[i].primary_incarnation, 5u);
    auto copy = backup_->store()->CopyEntry(absl::StrCat("one-", i));
    ASSERT_TRUE(copy.ok()) << copy.status();
    EXPECT_EQ(*copy, entries[i]);
  }
}

// The backup stops a batch at the write it refuses: the writes before it
// are installed, it gets the refusal, and the writes after it are sent
// again one by one, each with an answer of its own.
TEST_F(RdmaReplicaWriterTest, ARefusalStopsTheBatchAndTheRestAreSentAlone) {
  sink_.set_refuse_seq(603);
  std::vector<std::string> entries;
  for (int i = 0; i < 6; ++i) entries.push_back(Entry(absl::StrCat("stop-", i), "v", 60 + i));
  std::vector<ReplicaWriter::BatchPut> puts;
  for (int i = 0; i < 6; ++i) puts.push_back({entries[i], Tag(600 + i)});
  writer_->PutBatch(absl::MakeSpan(puts), Deadline());
  for (int i = 0; i < 6; ++i) {
    if (i == 3) {
      EXPECT_EQ(puts[i].status.code(), absl::StatusCode::kFailedPrecondition) << puts[i].status;
    } else {
      EXPECT_TRUE(puts[i].status.ok()) << i << ": " << puts[i].status;
    }
  }
  // One batch (600..603, stopped at 603), then 604 and 605 alone.
  EXPECT_EQ(BackupCounter(backup_.get(), "kvstore_rdma_replica_batches_total"), 1u);
  const std::vector<Seen> seen = sink_.seen();
  ASSERT_EQ(seen.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(seen[i].seq, 600u + i);
  EXPECT_FALSE(backup_->store()->CopyEntry("stop-3").ok());
  EXPECT_TRUE(backup_->store()->CopyEntry("stop-5").ok());
  EXPECT_FALSE(writer_->broken());
}

// A backup older than batch commits (its ConnectQp answer does not offer
// them) gets a commit per write, as before.
TEST_F(RdmaBackupTest, ABackupWithoutBatchCommitsGetsOneCommitPerWrite) {
  backup_->rdma_service()->set_announce_replica_batches(false);
  control::ControlSecurity security;
  security.auth_token = kClusterSecret;
  auto control = control::ControlClient::Dial(BackupAddress(), security);
  ASSERT_TRUE(control.ok()) << control.status();
  auto hs = (*control)->Handshake("replica-of-test", /*wait_for_ready=*/true, Deadline());
  ASSERT_TRUE(hs.ok()) << hs.status();
  auto ctx = initiator::OpenRdmaContext(Env("KV_RDMA_DEVICE"), hs->limits().max_value_bytes());
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  metrics::Registry registry;
  initiator::PathCounters counters;
  counters.leases.granted = registry.AddCounter("kvstore_test_granted_total", "Granted.");
  counters.leases.renewed = registry.AddCounter("kvstore_test_renewed_total", "Renewed.");
  counters.leases.released = registry.AddCounter("kvstore_test_released_total", "Released.");
  counters.lease_aborts = registry.AddCounter("kvstore_test_aborts_total", "Aborts.");
  auto writer = ReplicaWriter::Connect(*ctx, control->get(), *hs, "replica-of-test", 1 << 20,
                                       absl::Seconds(5), counters);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->batch_commits(9), 0u);
  std::vector<std::string> entries;
  for (int i = 0; i < 4; ++i) entries.push_back(Entry(absl::StrCat("old-", i), "v", 70 + i));
  std::vector<ReplicaWriter::BatchPut> puts;
  for (int i = 0; i < 4; ++i) puts.push_back({entries[i], Tag(700 + i)});
  (*writer)->PutBatch(absl::MakeSpan(puts), Deadline());
  for (const auto& p : puts) EXPECT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(BackupCounter(backup_.get(), "kvstore_rdma_replica_batches_total"), 0u);
  EXPECT_EQ(sink_.seen().size(), 4u);
  writer->reset();
}

TEST_F(RdmaReplicaWriterTest, DeleteNamesItsKey) {
  absl::Status s = writer_->Delete("gone", Tag(21), Deadline());
  ASSERT_TRUE(s.ok()) << s;
  const std::vector<Seen> seen = sink_.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].is_delete);
  EXPECT_EQ(seen[0].key, "gone");
  EXPECT_EQ(seen[0].seq, 21u);
  EXPECT_EQ(seen[0].primary_node_id, "primary-a");
}

TEST_F(RdmaReplicaWriterTest, TheBackupsRefusalComesBackAndTheLinkStaysUp) {
  sink_.set_reply(absl::FailedPreconditionError("shard 3 epoch 9 is behind epoch 10"));
  absl::Status s = writer_->Put(Entry("k", "v", 1), Tag(31), Deadline());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("epoch 10"), absl::string_view::npos) << s;
  s = writer_->Delete("k", Tag(32), Deadline());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  // A refusal is the backup's answer, not a transport failure.
  EXPECT_FALSE(writer_->broken());
  sink_.set_reply(absl::OkStatus());
  s = writer_->Put(Entry("k", "v", 2), Tag(33), Deadline());
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(sink_.seen().size(), 3u);
}

// A replica commit is accepted only on a queue pair whose session a peer
// opened: the same writer on a client's session (this server has no client
// tokens, so anyone is a client) is acked PERMISSION_DENIED, the sink sees
// nothing, the store holds nothing.
class RdmaClientReplicaTest : public RdmaReplicaWriterTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Open("")); }
};

TEST_F(RdmaClientReplicaTest, AReplicaCommitOnAClientsQueuePairIsRefused) {
  absl::Status s = writer_->Put(Entry("planted", "by-a-client", 1), Tag(51), Deadline());
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  s = writer_->Delete("k-small", Tag(52), Deadline());
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_TRUE(sink_.seen().empty());
  EXPECT_FALSE(backup_->store()->CopyEntry("planted").ok());
  const std::map<std::string, uint64_t> flat =
      metrics::FlattenSnapshot(backup_->registry().TakeSnapshot());
  EXPECT_EQ(flat.at("kvstore_rdma_commit_permission_denied_total"), 2u);
}

TEST_F(RdmaReplicaWriterTest, MalformedWritesNeverLeaveThePrimary) {
  const std::string entry = Entry("k", "v", 1);
  wire::ReplicaCommit no_id = Tag(41);
  no_id.primary_node_id = "";
  EXPECT_EQ(writer_->Put(entry, no_id, Deadline()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer_->Delete("k", no_id, Deadline()).code(), absl::StatusCode::kInvalidArgument);
  const std::string long_id(wire::kMaxReplicaNodeIdBytes + 1, 'n');
  wire::ReplicaCommit too_long = Tag(42);
  too_long.primary_node_id = long_id;
  EXPECT_EQ(writer_->Put(entry, too_long, Deadline()).code(), absl::StatusCode::kInvalidArgument);
  // Lengths that do not add up to the size (trailing bytes), and an entry
  // cut short.
  EXPECT_EQ(
      writer_->Put(entry + std::string(layout::kEntryAlign, '\0'), Tag(43), Deadline()).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(writer_->Put(entry.substr(0, entry.size() - 1), Tag(44), Deadline()).ok());
  // A key over the backup's limit.
  const std::string huge_key(backup_->store()->limits().max_key_bytes + 1, 'k');
  EXPECT_EQ(writer_->Delete(huge_key, Tag(45), Deadline()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(sink_.seen().empty());
  EXPECT_FALSE(writer_->broken());
}

// Holds every replica commit from `slow_primary` until Release(); records
// the others' keys.
class GatedSink final : public server::ReplicaCommitSink {
 public:
  explicit GatedSink(std::string slow_primary) : slow_(std::move(slow_primary)) {}
  absl::Status ApplyReplicaCommit(const server::ReplicaCommit& c,
                                  absl::FunctionRef<absl::Status()> install) override {
    absl::MutexLock lock(&mu_);
    if (c.primary_node_id == slow_) {
      ++held_;
      mu_.Await(absl::Condition(&released_));
      return absl::OkStatus();
    }
    others_.push_back(std::string(c.key));
    return c.is_delete ? absl::OkStatus() : install();
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  int held() {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  std::vector<std::string> others() {
    absl::MutexLock lock(&mu_);
    return others_;
  }

 private:
  const std::string slow_;
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> others_ ABSL_GUARDED_BY(mu_);
};

// A peer that sends replica commits beyond its credits without waiting for
// acks (the backup reposts each receive as soon as the commit is queued, so
// only the commit queue can stop it) is failed, and while its commits are
// stuck another primary's replication still goes through: each connection
// has its own bounded lane of the replica commit queue.
TEST_F(RdmaReplicaWriterTest, ACreditViolatorIsFailedAndOtherPrimariesKeepReplicating) {
  GatedSink gated("slow-primary");
  backup_->rdma_service()->set_replica_sink(&gated, /*offload_commits=*/false);
  // With the cluster secret: a peer's queue pair (a client's may not send
  // replica commits at all, RdmaClientReplicaTest).
  auto raw = ::kvstore::testing::RawRdmaClient::Connect(BackupAddress(), kClusterSecret);
  ASSERT_TRUE(raw.ok()) << raw.status();
  wire::ReplicaCommit tag = Tag(1);
  tag.primary_node_id = "slow-primary";
  std::string msg(wire::CommitBytes(16), '\0');
  auto violations = [this] {
    const std::map<std::string, uint64_t> flat =
        metrics::FlattenSnapshot(backup_->rdma_service()->registry().TakeSnapshot());
    auto it = flat.find("kvstore_rdma_credit_violations_total");
    return it == flat.end() ? uint64_t{0} : it->second;
  };
  auto send = [&](uint64_t seq) {
    tag.seq = seq;
    const size_t n = wire::EncodeReplicaDeleteCommit(seq, "slow-key", tag, msg.data());
    return (*raw)->SendOnly(absl::string_view(msg.data(), n));
  };
  // The first commit takes a replica worker and stays there.
  ASSERT_TRUE(send(1).ok());
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (gated.held() == 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(gated.held(), 1);
  // Far more than any credit count; the backup fails the connection on the
  // first commit over its credits, after which our sends fail.
  int sent = 1;
  while (sent < 4096 && violations() == 0 && send(sent + 1).ok()) ++sent;
  std::printf("commits sent before the violator was failed: %d\n", sent);
  while (violations() == 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(violations(), 1u);
  EXPECT_EQ(gated.held(), 1);  // the queued ones were dropped, never run
  // The slow primary's commit still holds a replica worker; this primary's
  // delete is answered all the same.
  absl::Status s = writer_->Delete("fast-key", Tag(71), Deadline());
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(gated.others(), std::vector<std::string>{"fast-key"});
  gated.Release();
  backup_->rdma_service()->set_replica_sink(&sink_, /*offload_commits=*/false);
}

// A link's deletes (ReplicaWriter::DeleteBatch) cost one round trip, not one
// each: every commit is posted before the first ack is awaited, so while
// the backup holds the first one the others already wait in its lane. Then
// each gets its own answer, in order; one that fails the checks is not sent.
TEST_F(RdmaReplicaWriterTest, DeleteBatchPostsEveryCommitBeforeTheFirstAck) {
  GatedSink gated("primary-a");
  backup_->rdma_service()->set_replica_sink(&gated, /*offload_commits=*/false);
  auto waiting = [this] {
    const std::map<std::string, uint64_t> flat =
        metrics::FlattenSnapshot(backup_->rdma_service()->registry().TakeSnapshot());
    auto it = flat.find("kvstore_rdma_commits_waiting{queue=\"replica\"}");
    return it == flat.end() ? uint64_t{0} : it->second;
  };
  std::vector<std::string> keys;  // the deletes' keys: views into these
  for (int i = 0; i < 5; ++i) keys.push_back(absl::StrCat("held-", i));
  for (int i = 0; i < 5; ++i) keys.push_back(absl::StrCat("del-", i));
  std::vector<ReplicaWriter::BatchDelete> held;
  for (int i = 0; i < 5; ++i) held.push_back({keys[i], Tag(800 + i), {}});
  std::thread deleter([&] { writer_->DeleteBatch(absl::MakeSpan(held), Deadline()); });
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while ((gated.held() == 0 || waiting() < 4) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(gated.held(), 1);
  EXPECT_EQ(waiting(), 4u);
  gated.Release();
  deleter.join();
  for (const auto& d : held) EXPECT_TRUE(d.status.ok()) << d.key << ": " << d.status;
  EXPECT_EQ(waiting(), 0u);
  backup_->rdma_service()->set_replica_sink(&sink_, /*offload_commits=*/false);

  sink_.set_refuse_seq(902);
  const std::string huge_key(backup_->store()->limits().max_key_bytes + 1, 'k');
  std::vector<ReplicaWriter::BatchDelete> dels;
  for (int i = 0; i < 5; ++i) dels.push_back({keys[5 + i], Tag(900 + i), {}});
  dels.push_back({huge_key, Tag(905), {}});
  writer_->DeleteBatch(absl::MakeSpan(dels), Deadline());
  for (int i = 0; i < 5; ++i) {
    if (i == 2) {
      EXPECT_EQ(dels[i].status.code(), absl::StatusCode::kFailedPrecondition) << dels[i].status;
    } else {
      EXPECT_TRUE(dels[i].status.ok()) << i << ": " << dels[i].status;
    }
  }
  EXPECT_EQ(dels[5].status.code(), absl::StatusCode::kInvalidArgument) << dels[5].status;
  const std::vector<Seen> seen = sink_.seen();
  ASSERT_EQ(seen.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(seen[i].is_delete);
    EXPECT_EQ(seen[i].seq, 900u + i);
    EXPECT_EQ(seen[i].key, absl::StrCat("del-", i));
  }
  EXPECT_FALSE(writer_->broken());
}

// RdmaReplicaLinks as a primary's KvServer runs it, with a registry
// standing in for the server's: the link connects in the background, and
// its initiator's lease counters appear there under the backup's node id.
TEST_F(RdmaBackupTest, ALinksLeaseCountersReachTheServersMetricsPerPeer) {
  metrics::Registry registry;
  server::RdmaReplicaLinksOptions o;
  o.device = Env("KV_RDMA_DEVICE");
  o.peer_secret = kClusterSecret;
  o.self = "primary-a";
  o.connect_timeout = absl::Seconds(10);
  auto links = std::make_unique<server::RdmaReplicaLinks>(o, &registry);
  v1::ClusterNode node;
  node.set_node_id("backup:1");  // a host:port node id
  node.set_control_address(BackupAddress());
  node.set_incarnation(1);
  // The first Get() starts the connect and returns null (the write would go
  // by gRPC); the link is up once the connector thread made it.
  std::shared_ptr<server::RdmaReplicaLink> link = links->Get(node);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (link == nullptr && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
    link = links->Get(node);
  }
  ASSERT_NE(link, nullptr) << "no RDMA link to the backup within 60 s";
  std::vector<server::RdmaReplicaLinks::Send> sends = {{link, absl::OkStatus()}};
  const std::string entry = Entry("k", "v", 1);
  links->SendAll(sends, "k", entry, Tag(51), Deadline());
  ASSERT_TRUE(sends[0].status.ok()) << sends[0].status;
  ASSERT_EQ(sink_.seen().size(), 1u);
  EXPECT_EQ(sink_.seen()[0].entry, entry);

  const std::map<std::string, uint64_t> flat = metrics::FlattenSnapshot(registry.TakeSnapshot());
  auto value = [&flat](const std::string& series) {
    auto it = flat.find(series);
    return it == flat.end() ? uint64_t{0} : it->second;
  };
  EXPECT_EQ(value("kvstore_replication_rdma_connects_total"), 1u);
  EXPECT_GE(value("kvstore_replication_rdma_leases_granted_total{peer=\"backup_1\"}"), 1u);
  EXPECT_EQ(flat.count("kvstore_replication_rdma_lease_aborts_total{peer=\"backup_1\"}"), 1u);
  const std::string text = metrics::FormatPrometheusText(registry.TakeSnapshot());
  EXPECT_NE(text.find("kvstore_replication_rdma_leases_granted_total{peer=\"backup_1\"} "),
            std::string::npos)
      << text;
  // Gone before the backup: its leases are released while the backup serves.
  link.reset();
  sends.clear();
  links.reset();
}

}  // namespace
}  // namespace kvstore
