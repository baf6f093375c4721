// Copyright 2026 The kvstore Authors.
//
// What an RDMA client can and cannot do to a server (requires-rdma):
//  * an entry written into a lease but never committed (the client died)
//    leaves no trace once the lease expires; a late commit is ABORTED;
//  * a WRITE with a stale lease key, another connection's lease key, or any
//    key aimed at the index or the data arena fails remotely and changes
//    nothing, and the server keeps serving;
//  * commits are validated: owner, bounds, checksum.

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "common/grpc_status.h"
#include "common/protocol/layout.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/raw_rdma_client.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace {

using ::kvstore::testing::KvServerProcess;
using ::kvstore::testing::RawRdmaClient;
using ::testing::HasSubstr;

std::string Entry(absl::string_view key, absl::string_view value) {
  std::string e(layout::EntryBytes(key.size(), value.size()), '\0');
  layout::EncodeEntry(e.data(), key, value, 1);
  return e;
}

class RdmaFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dev = std::getenv("KV_RDMA_DEVICE");
    auto s =
        KvServerProcess::Start({"--pool_size=64M", "--segment_size=1M", "--transport=rdma",
                                "--lease_ttl=2s", "--grace_period=100ms", "--rdma_idle_probe=1s",
                                absl::StrCat("--rdma_device=", dev ? dev : "")});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::make_unique<KvServerProcess>(std::move(*s));
    client::Options o;
    o.servers = {server_->control_address()};
    o.transport = client::TransportMode::kTcp;
    auto c = client::KvClient::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    tcp_ = std::move(*c);
  }
  void TearDown() override {
    if (HasFailure()) std::printf("server log:\n%s\n", server_->Log().c_str());
  }
  std::unique_ptr<RawRdmaClient> Raw() {
    auto c = RawRdmaClient::Connect(server_->control_address());
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  uint64_t Counter(const std::string& name) {
    auto s = tcp_->Stats();
    EXPECT_TRUE(s.ok());
    return s.ok() ? s->counters[name] : 0;
  }
  // Waits until `name` reaches `want` (bounded).
  bool WaitCounter(const std::string& name, uint64_t want, absl::Duration limit) {
    const absl::Time end = absl::Now() + limit;
    while (absl::Now() < end) {
      if (Counter(name) >= want) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }
  // The server still serves RDMA and TCP clients.
  void ExpectHealthy() {
    ASSERT_TRUE(tcp_->Put("health", "ok").ok());
    EXPECT_EQ(*tcp_->Get("health"), "ok");
    client::Options o;
    o.servers = {server_->control_address()};
    o.transport = client::TransportMode::kRdma;
    auto r = client::KvClient::Connect(o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE((*r)->Put("health-rdma", "ok").ok());
    EXPECT_EQ(*(*r)->Get("health-rdma"), "ok");
  }

  std::unique_ptr<KvServerProcess> server_;
  std::unique_ptr<client::KvClient> tcp_;
};

TEST_F(RdmaFaults, UncommittedWriteLeavesNoTraceAndLateCommitIsAborted) {
  const uint64_t free_before = Counter("kvstore_pool_segments_free");
  auto raw = Raw();
  ASSERT_NE(raw, nullptr);
  auto lease = raw->Grant(64 << 10);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_NE(lease->write_rkey(), 0u);
  const std::string entry = Entry("ghost", "never committed");
  ASSERT_TRUE(raw->Write(lease->write_addr(), lease->write_rkey(), entry).ok());
  EXPECT_EQ(tcp_->Get("ghost").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WaitCounter("kvstore_leases_expired_total", 1, absl::Seconds(6)));
  absl::Status late = raw->Commit(lease->lease_id(), lease->arena_offset(), entry.size());
  EXPECT_EQ(late.code(), absl::StatusCode::kAborted) << late;
  EXPECT_EQ(tcp_->Get("ghost").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Counter("kvstore_keys"), 0u);
  // The lease's chunk comes back once the grace period has passed.
  const absl::Time end = absl::Now() + absl::Seconds(5);
  while (Counter("kvstore_pool_segments_free") < free_before && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(Counter("kvstore_pool_segments_free"), free_before);
  // The window died with the lease: writing through it now fails remotely.
  EXPECT_EQ(raw->Write(lease->write_addr(), lease->write_rkey(), entry).code(),
            absl::StatusCode::kPermissionDenied);
  ExpectHealthy();
}

TEST_F(RdmaFaults, ClientKilledBetweenWriteAndCommit) {
  const uint64_t free_before = Counter("kvstore_pool_segments_free");
  auto r = testing::RunProcess({testing::BinaryPath("tests/rdma_write_no_commit"),
                                "--server=" + server_->control_address(), "--key=zombie"});
  EXPECT_EQ(r.exit_code, -9) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("written"));
  EXPECT_EQ(tcp_->Get("zombie").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WaitCounter("kvstore_leases_expired_total", 1, absl::Seconds(6)));
  EXPECT_EQ(tcp_->Get("zombie").status().code(), absl::StatusCode::kNotFound);
  const absl::Time end = absl::Now() + absl::Seconds(5);
  while (Counter("kvstore_pool_segments_free") < free_before && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(Counter("kvstore_pool_segments_free"), free_before);
  EXPECT_EQ(Counter("kvstore_keys"), 0u);
  // The dead client's queue pair is found out by an idle probe and reaped.
  EXPECT_TRUE(WaitCounter("kvstore_rdma_connections_reaped_total", 1, absl::Seconds(10)));
  EXPECT_EQ(Counter("kvstore_rdma_connections"), 0u);
  ExpectHealthy();
}

TEST_F(RdmaFaults, StaleLeaseKeyFailsRemotelyAndChangesNothing) {
  auto raw = Raw();
  ASSERT_NE(raw, nullptr);
  auto lease = raw->Grant(64 << 10);
  ASSERT_TRUE(lease.ok()) << lease.status();
  const auto& data = raw->data_region();
  const uint64_t lease_in_data = data.addr() + (lease->arena_offset() - data.arena_offset());
  auto before = raw->Read(lease_in_data, data.rkey(), 4096);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(raw->Release(lease->lease_id()).ok());
  absl::Status w = raw->Write(lease->write_addr(), lease->write_rkey(), std::string(4096, 'X'));
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
  ASSERT_TRUE(raw->Reconnect().ok());
  auto after = raw->Read(lease_in_data, data.rkey(), 4096);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(*after == *before);
  ExpectHealthy();
}

TEST_F(RdmaFaults, ForeignLeaseKeyFailsRemotelyAndForeignCommitIsRefused) {
  auto a = Raw();
  auto b = Raw();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto lease = a->Grant(64 << 10);
  ASSERT_TRUE(lease.ok()) << lease.status();
  const std::string entry = Entry("owned-by-a", "a's value");
  // B cannot write through A's window: it is bound to A's queue pair.
  absl::Status w = b->Write(lease->write_addr(), lease->write_rkey(), Entry("stolen", "x"));
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
  ASSERT_TRUE(b->Reconnect().ok());
  // A can; B's commit naming A's lease is refused; A's commit publishes.
  ASSERT_TRUE(a->Write(lease->write_addr(), lease->write_rkey(), entry).ok());
  absl::Status foreign = b->Commit(lease->lease_id(), lease->arena_offset(), entry.size());
  EXPECT_EQ(foreign.code(), absl::StatusCode::kPermissionDenied) << foreign;
  EXPECT_EQ(tcp_->Get("owned-by-a").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(a->Commit(lease->lease_id(), lease->arena_offset(), entry.size()).ok());
  EXPECT_EQ(*tcp_->Get("owned-by-a"), "a's value");
  // Nor can B end A's lease.
  EXPECT_EQ(b->Release(lease->lease_id()).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(a->Release(lease->lease_id()).ok());
  EXPECT_EQ(tcp_->Get("stolen").status().code(), absl::StatusCode::kNotFound);
  ExpectHealthy();
}

TEST_F(RdmaFaults, WritesAtTheIndexOrTheDataArenaFail) {
  ASSERT_TRUE(tcp_->Put("k", "v").ok());
  auto raw = Raw();
  ASSERT_NE(raw, nullptr);
  const auto& index = raw->index_region();
  auto before = raw->Read(index.addr(), index.rkey(), 64 * 1024);
  ASSERT_TRUE(before.ok()) << before.status();
  absl::Status w = raw->Write(index.addr(), index.rkey(), std::string(4096, '\xff'));
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
  ASSERT_TRUE(raw->Reconnect().ok());
  auto after = raw->Read(index.addr(), index.rkey(), 64 * 1024);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(*after == *before);
  const auto& data = raw->data_region();
  w = raw->Write(data.addr(), data.rkey(), std::string(64, 'z'));
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
  ASSERT_TRUE(raw->Reconnect().ok());
  EXPECT_EQ(*tcp_->Get("k"), "v");
  ExpectHealthy();
}

TEST_F(RdmaFaults, OverwriteAfterCommitIsCaughtByServerReads) {
  auto raw = Raw();
  ASSERT_NE(raw, nullptr);
  auto lease = raw->Grant(64 << 10);
  ASSERT_TRUE(lease.ok());
  const std::string entry = Entry("mutable?", "original");
  ASSERT_TRUE(raw->Write(lease->write_addr(), lease->write_rkey(), entry).ok());
  ASSERT_TRUE(raw->Commit(lease->lease_id(), lease->arena_offset(), entry.size()).ok());
  EXPECT_EQ(*tcp_->Get("mutable?"), "original");
  // The lease holder can still write over its committed entry; server-side
  // readers verify entries in live leases and refuse the changed bytes.
  std::string changed = entry;
  changed[layout::kEntryHeaderBytes + 8] = 'X';
  ASSERT_TRUE(raw->Write(lease->write_addr(), lease->write_rkey(), changed).ok());
  EXPECT_EQ(tcp_->Get("mutable?").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_GE(Counter("kvstore_modified_after_commit_total"), 1u);
  ASSERT_TRUE(raw->Write(lease->write_addr(), lease->write_rkey(), entry).ok());
  EXPECT_EQ(*tcp_->Get("mutable?"), "original");
  // Changed again and never read while the lease lived: when the lease ends
  // the server checks its entries once more and unpublishes the changed one.
  ASSERT_TRUE(raw->Write(lease->write_addr(), lease->write_rkey(), changed).ok());
  const uint64_t caught = Counter("kvstore_modified_after_commit_total");
  ASSERT_TRUE(raw->Release(lease->lease_id()).ok());
  EXPECT_EQ(tcp_->Get("mutable?").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Counter("kvstore_modified_after_commit_total"), caught + 1);
}

// The same for a one-sided reader (Options::rdma_read_in_pieces) of an entry
// large enough to be READ in pieces and checksummed piece by piece
// (read_chunks.h): a byte changed in
// the last piece must fail the checksum, on the location-cache hit path and
// on the two-READ path, and the server (asked after the retries) refuses the
// changed entry too. The changed bytes are never returned.
TEST_F(RdmaFaults, OverwriteInALargeEntrysLastPieceIsCaughtByOneSidedReads) {
  auto raw = Raw();
  ASSERT_NE(raw, nullptr);
  auto lease = raw->Grant(768 << 10);
  ASSERT_TRUE(lease.ok()) << lease.status();
  const std::string value(600 << 10, 'v');
  const std::string entry = Entry("large?", value);
  ASSERT_TRUE(raw->Write(lease->write_addr(), lease->write_rkey(), entry).ok());
  ASSERT_TRUE(raw->Commit(lease->lease_id(), lease->arena_offset(), entry.size()).ok());
  client::Options o;
  o.servers = {server_->control_address()};
  o.transport = client::TransportMode::kRdma;
  o.rdma_read_in_pieces = true;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto first = (*c)->Get("large?");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first == value);  // and its location is cached now
  std::string changed = entry;
  changed[layout::kEntryHeaderBytes + 6 + (580 << 10)] = 'X';
  ASSERT_TRUE(raw->Write(lease->write_addr(), lease->write_rkey(), changed).ok());
  auto second = (*c)->Get("large?");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kDataLoss) << second.status();
  const std::map<std::string, uint64_t> k = (*c)->metrics();
  EXPECT_GE(testing::SeriesValue(k, R"(kvstore_client_location_cache_total{result="stale"})"), 1u);
  EXPECT_GE(testing::SeriesValue(k, "kvstore_client_checksum_retries_total"), 1u);
  EXPECT_GE(testing::SeriesValue(k, "kvstore_client_server_fallback_gets_total"), 1u);
}

TEST_F(RdmaFaults, IdleLiveClientsSurviveProbes) {
  client::Options o;
  o.servers = {server_->control_address()};
  o.transport = client::TransportMode::kRdma;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(tcp_->Put("probe-me", "still here").ok());
  EXPECT_EQ(*(*c)->Get("probe-me"), "still here");  // a reader: it holds no lease
  const uint64_t before = Counter("kvstore_rdma_idle_probes_total");
  // Probed every second once idle for a second (--rdma_idle_probe=1s).
  ASSERT_TRUE(WaitCounter("kvstore_rdma_idle_probes_total", before + 3, absl::Seconds(15)));
  EXPECT_EQ(Counter("kvstore_rdma_connections_reaped_total"), 0u);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(*(*c)->Get("probe-me"), "still here");
  EXPECT_EQ(testing::SeriesValue((*c)->metrics(), "kvstore_client_reconnects_total"), 0u);
}

// Finding 7: a client that stops taking acks (posts no receive) used to
// stall the one commit poller for every client: the server retried the ack
// forever (rnr_retry 7), its ack ring filled, and the poller waited 5 s for
// a slot. Now the ack fails within milliseconds, the connection is torn
// down, and other clients' PUTs keep their latency.
TEST_F(RdmaFaults, AClientThatTakesNoAcksCannotStallOthers) {
  auto raw = Raw();
  ASSERT_NE(raw, nullptr);
  client::Options o;
  o.servers = {server_->control_address()};
  o.transport = client::TransportMode::kRdma;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Put("warm", "x").ok());
  std::atomic<bool> flooding{true};
  std::thread flood([&] {
    // Malformed commits: each is answered with an error ack.
    const std::string junk(24, 'j');
    for (int i = 0; i < 1000 && raw->SendOnly(junk).ok(); ++i) {
    }
    flooding = false;
  });
  absl::Duration worst;
  const absl::Time end = absl::Now() + absl::Seconds(3);
  for (int i = 0; absl::Now() < end || flooding.load(); ++i) {
    const absl::Time t0 = absl::Now();
    ASSERT_TRUE((*c)->Put(absl::StrCat("k", i % 10), "v").ok());
    worst = std::max(worst, absl::Now() - t0);
  }
  flood.join();
  std::printf("slowest PUT while flooded: %s\n", absl::FormatDuration(worst).c_str());
  EXPECT_LT(worst, absl::Seconds(2));
  EXPECT_TRUE(WaitCounter("kvstore_rdma_connections_reaped_total", 1, absl::Seconds(10)));
  ExpectHealthy();
}

TEST_F(RdmaFaults, CommitsAreValidated) {
  auto raw = Raw();
  ASSERT_NE(raw, nullptr);
  auto lease = raw->Grant(64 << 10);
  ASSERT_TRUE(lease.ok());
  std::string entry = Entry("checked", "value");
  // Outside the lease.
  EXPECT_EQ(
      raw->Commit(lease->lease_id(), lease->arena_offset() + lease->length(), entry.size()).code(),
      absl::StatusCode::kInvalidArgument);
  // A corrupted entry (a flipped value byte).
  std::string bad = entry;
  bad[layout::kEntryHeaderBytes + 8] ^= 1;
  ASSERT_TRUE(raw->Write(lease->write_addr(), lease->write_rkey(), bad).ok());
  EXPECT_EQ(raw->Commit(lease->lease_id(), lease->arena_offset(), entry.size()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(tcp_->Get("checked").status().code(), absl::StatusCode::kNotFound);
  // A lease that was never granted.
  EXPECT_EQ(raw->Commit(987654321, lease->arena_offset(), entry.size()).code(),
            absl::StatusCode::kAborted);
  // The real thing.
  const uint64_t next = lease->arena_offset() + entry.size();
  ASSERT_TRUE(raw->Write(lease->write_addr() + entry.size(), lease->write_rkey(), entry).ok());
  ASSERT_TRUE(raw->Commit(lease->lease_id(), next, entry.size()).ok());
  EXPECT_EQ(*tcp_->Get("checked"), "value");
}

}  // namespace
}  // namespace kvstore
