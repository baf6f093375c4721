// Copyright 2026 The kvstore Authors.
//
// Fencing that one-sided readers see (docs/architecture.md §19.5), on a real
// RDMA device (rxe0 in the Soft-RoCE VM of tests/rxe): an in-process
// KvServer publishes its FencePage as the REGION_KIND_FENCE region; a
// client's RDMA GETs READ it with their bucket READs and refuse what they
// read when the page says fenced, lapsed or another map epoch; and
// RdmaService::FenceAll() breaks every client queue pair, refusing new ones
// until Unfence(). Tagged requires-rdma: deploy/test.sh runs it in the VM.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/internal/rdma/rdma_data_path.h"
#include "client/kv_client.h"
#include "common/control/control_client.h"
#include "common/metrics/exposition.h"
#include "common/metrics/registry.h"
#include "common/protocol/fence.h"
#include "common/rdma/initiator/rdma_context.h"
#include "gtest/gtest.h"
#include "proto/kv_control.pb.h"
#include "server/kv_server.h"

namespace kvstore {
namespace {

using client::RdmaDataPath;
using server::KvServer;
using server::KvServerOptions;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

uint64_t Refusals(metrics::Registry& r, const char* reason) {
  // Registering the reader's series again returns it.
  return r
      .AddCounter("kvstore_client_fence_refusals_total",
                  "One-sided reads refused because the server's fence words said fenced, "
                  "lease lapsed or another cluster map epoch.",
                  {{"reason", reason}})
      ->Value();
}

uint64_t ServerCounter(const KvServer& s, const std::string& series) {
  auto flat = metrics::FlattenSnapshot(s.registry().TakeSnapshot());
  auto it = flat.find(series);
  return it == flat.end() ? 0 : it->second;
}

uint64_t UnixMs() { return static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())); }

absl::Time Deadline() { return absl::Now() + absl::Seconds(10); }

class RdmaFenceTest : public ::testing::Test {
 protected:
  virtual bool PublishFence() const { return true; }

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
    // A cluster node's page, on one process (no etcd needed).
    o.fence_single_node = PublishFence();
    auto s = KvServer::Start(o);
    if (!s.ok() && Env("KV_RDMA_DEVICE").empty()) {
      GTEST_SKIP() << "*** no RDMA device (KV_RDMA_DEVICE unset): " << s.status()
                   << " — run through tests/rxe/run-rdma-tests.sh ***";
    }
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    address_ = absl::StrCat("127.0.0.1:", server_->control_port());
    std::printf("%s\n", server_->StartupLine().c_str());
  }

  // An RDMA path built by hand, as KvClient builds one, so the test can
  // set its map epoch and read its counters.
  void OpenPath() {
    auto control = control::ControlClient::Dial(address_);
    ASSERT_TRUE(control.ok()) << control.status();
    control_ = std::move(*control);
    auto hs = control_->Handshake("rdma_fence_test", true, Deadline());
    ASSERT_TRUE(hs.ok()) << hs.status();
    handshake_ = *hs;
    auto ctx = initiator::OpenRdmaContext(Env("KV_RDMA_DEVICE"), hs->limits().max_value_bytes());
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    auto path = RdmaDataPath::Connect(*ctx, control_.get(), *hs, "rdma_fence_test", 1 << 20,
                                      absl::Seconds(5), &registry_);
    ASSERT_TRUE(path.ok()) << path.status();
    path_ = std::move(*path);
  }

  void TearDown() override {
    path_.reset();
    control_.reset();
  }

  server::FencePage& page() { return *server_->fence_page(); }

  std::unique_ptr<KvServer> server_;
  std::string address_;
  metrics::Registry registry_;  // the path's counters; outlives it
  std::unique_ptr<control::ControlClient> control_;
  v1::HandshakeResponse handshake_;
  std::unique_ptr<RdmaDataPath> path_;
};

TEST_F(RdmaFenceTest, HandshakeListsTheFencePage) {
  ASSERT_NO_FATAL_FAILURE(OpenPath());
  int fences = 0;
  for (const auto& r : handshake_.regions()) {
    if (r.kind() != v1::REGION_KIND_FENCE) continue;
    ++fences;
    EXPECT_EQ(r.length(), fence::kFenceBytes);
    EXPECT_EQ(r.addr(), reinterpret_cast<uint64_t>(page().data()));
    EXPECT_NE(r.rkey(), 0u);
  }
  EXPECT_EQ(fences, 1);
  // Single-node: the page never expires and names map epoch 0.
  EXPECT_EQ(page().words().valid_until_ms, fence::kNoExpiry);
  EXPECT_EQ(page().words().map_epoch, 0u);
}

TEST_F(RdmaFenceTest, FencedOrLapsedPageRefusesOneSidedReads) {
  ASSERT_NO_FATAL_FAILURE(OpenPath());
  ASSERT_EQ(path_->name(), "rdma");
  ASSERT_TRUE(path_->Put("k", "v1", Deadline()).ok());
  auto got = path_->Get("k", Deadline());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v1");

  // Fenced: every read fails kUnavailable; nothing read is returned.
  page().Fence();
  got = path_->Get("k", Deadline());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  std::printf("fenced GET: %s\n", got.status().ToString().c_str());
  EXPECT_EQ(path_->Exists("k", Deadline()).status().code(), absl::StatusCode::kUnavailable);
  auto many = path_->MultiGet({"k", "absent"}, Deadline());
  EXPECT_EQ(many.status().code(), absl::StatusCode::kUnavailable) << many.status();
  EXPECT_EQ(Refusals(registry_, "fenced"), 3u);
  // A refusal is not a broken queue pair: nothing to reconnect.
  EXPECT_FALSE(path_->broken());

  // Lapsed: valid_until in the past, or within the clock-skew margin.
  page().set_valid_until_ms(UnixMs() - 1000);
  EXPECT_EQ(path_->Get("k", Deadline()).status().code(), absl::StatusCode::kUnavailable);
  page().set_valid_until_ms(UnixMs() + fence::kClockSkewMarginMs / 2);
  EXPECT_EQ(path_->Get("k", Deadline()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Refusals(registry_, "lease_lapsed"), 2u);

  // A lease comfortably ahead of the clock admits the read, as does the
  // single-node page again; the same path serves on.
  page().set_valid_until_ms(UnixMs() + 60'000);
  got = path_->Get("k", Deadline());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v1");
  page().set_valid_until_ms(fence::kNoExpiry);
  many = path_->MultiGet({"k", "absent"}, Deadline());
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_EQ(many->size(), 2u);
  EXPECT_EQ((*many)[0].value_or("?"), "v1");
  EXPECT_EQ((*many)[1].status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ServerCounter(*server_, "kvstore_rdma_fences_total"), 0u);
}

TEST_F(RdmaFenceTest, OtherMapEpochIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(OpenPath());
  ASSERT_TRUE(path_->Put("k", "v", Deadline()).ok());
  // The reader routes by epoch 5; the server applied 0.
  path_->SetMapEpoch(5);
  auto got = path_->Get("k", Deadline());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  std::printf("epoch-mismatch GET: %s\n", got.status().ToString().c_str());
  EXPECT_EQ(path_->MultiGet({"k"}, Deadline()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The server applies epoch 5, with a lease: the reads go through.
  page().set_map_epoch(5);
  page().set_valid_until_ms(UnixMs() + 60'000);
  got = path_->Get("k", Deadline());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  // The server moves on to 6; the reader has not.
  page().set_map_epoch(6);
  EXPECT_EQ(path_->Get("k", Deadline()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Refusals(registry_, "map_epoch"), 3u);
  path_->SetMapEpoch(6);
  EXPECT_TRUE(path_->Get("k", Deadline()).ok());
  EXPECT_FALSE(path_->broken());
}

TEST_F(RdmaFenceTest, FenceAllBreaksQueuePairsUntilUnfence) {
  if (server_ == nullptr) return;
  client::Options o;
  o.servers = {address_};
  o.transport = client::TransportMode::kRdma;
  o.rdma_device = Env("KV_RDMA_DEVICE");
  o.op_timeout = absl::Seconds(10);
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  client::KvClient& kv = **c;
  ASSERT_EQ(kv.transport_name(), "rdma");
  ASSERT_TRUE(kv.Put("k", "v").ok());
  ASSERT_TRUE(kv.Get("k").ok());
  ASSERT_NE(server_->rdma_service(), nullptr);

  const absl::Time t0 = absl::Now();
  EXPECT_GE(server_->rdma_service()->FenceAll(), 1);
  EXPECT_TRUE(server_->rdma_service()->fenced());
  EXPECT_EQ(ServerCounter(*server_, "kvstore_rdma_connections"), 0u);
  // The client's queue pair fails; its reconnect is refused while fenced.
  auto got = kv.Get("k");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  std::printf("GET after FenceAll (%s later): %s\n", absl::FormatDuration(absl::Now() - t0).c_str(),
              got.status().ToString().c_str());
  got = kv.Get("k");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_EQ(ServerCounter(*server_, "kvstore_rdma_connections"), 0u);
  // Fencing twice counts once.
  server_->rdma_service()->FenceAll();
  EXPECT_EQ(ServerCounter(*server_, "kvstore_rdma_fences_total"), 1u);

  // Unfenced: the client connects a new queue pair and reads again.
  server_->rdma_service()->Unfence();
  EXPECT_FALSE(server_->rdma_service()->fenced());
  got = kv.Get("k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  EXPECT_EQ(kv.transport_name(), "rdma");
  EXPECT_EQ(ServerCounter(*server_, "kvstore_rdma_connections"), 1u);
  const std::map<std::string, uint64_t> m = kv.metrics();
  auto it = m.find("kvstore_client_reconnects_total");
  ASSERT_NE(it, m.end());
  EXPECT_GE(it->second, 1u);
}

// A single-node server as kvserver runs it: no fence page in the handshake,
// so a cached GET READs the entry alone. The page itself still exists (a
// cluster node's code path), but readers never look at it: fencing it
// changes nothing they see.
class RdmaNoFenceTest : public RdmaFenceTest {
 protected:
  bool PublishFence() const override { return false; }
};

TEST_F(RdmaNoFenceTest, SingleNodeServerPublishesNoFencePage) {
  ASSERT_NO_FATAL_FAILURE(OpenPath());
  ASSERT_EQ(path_->name(), "rdma");
  for (const auto& r : handshake_.regions()) EXPECT_NE(r.kind(), v1::REGION_KIND_FENCE);
  ASSERT_TRUE(path_->Put("k", "v1", Deadline()).ok());
  for (int i = 0; i < 3; ++i) {
    auto got = path_->Get("k", Deadline());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, "v1");
  }
  page().Fence();
  auto got = path_->Get("k", Deadline());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v1");
  EXPECT_EQ(Refusals(registry_, "fenced"), 0u);
}

}  // namespace
}  // namespace kvstore
