// Copyright 2026 The kvstore Authors.
//
// The RDMA data path end to end against a real kvserver on a real verbs
// device (rxe0 in the Soft-RoCE VM of tests/rxe, or a host NIC): library and
// kvctl round trips over RDMA, a 16 MiB value, the zero-copy API, and RDMA
// and TCP clients on one server seeing each other's writes.

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace {

using ::kvstore::testing::BinaryPath;
using ::kvstore::testing::KvServerProcess;
using ::kvstore::testing::ProcessResult;
using ::kvstore::testing::RequestsOn;
using ::kvstore::testing::RunProcess;
using ::kvstore::testing::SeriesValue;
using ::testing::HasSubstr;

// The client series the fallback assertions read.
constexpr char kServerFallbackGets[] = "kvstore_client_server_fallback_gets_total";

std::string DeviceFlag() {
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  return absl::StrCat("--rdma_device=", dev ? dev : "");
}

class RdmaEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    seed_ = std::random_device{}();
    std::printf("seed %u\n", seed_);
    // Soft-RoCE under qemu moves tens of MB/s: a 16 MiB READ takes longer
    // than the default read span (half the grace period), so give large
    // one-sided READs room to finish instead of falling back to the server.
    auto s = KvServerProcess::Start(
        {"--pool_size=256M", "--transport=rdma", "--grace_period=6s", DeviceFlag()});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = new KvServerProcess(std::move(*s));
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void TearDown() override {
    if (HasFailure()) std::printf("server log:\n%s\n", server_->Log().c_str());
  }
  std::unique_ptr<client::KvClient> Client(client::TransportMode mode, bool in_pieces = false) {
    client::Options o;
    o.servers = {server_->control_address()};
    o.transport = mode;
    o.rdma_read_in_pieces = in_pieces;
    auto c = client::KvClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  static std::string Random(size_t n, uint64_t salt) {
    std::mt19937_64 rng(seed_ ^ salt);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  }

  static uint32_t seed_;
  static KvServerProcess* server_;
};

uint32_t RdmaEndToEnd::seed_ = 0;
KvServerProcess* RdmaEndToEnd::server_ = nullptr;

// Finding 8: a MultiGet batch holds one op slot per key and used to ask for
// one more for each key left to the single-key path (here the large entry,
// too big for a slot's scratch). Four threads x 16 keys hold all 64 slots of
// the client's path, so each waited forever for a 65th. Now the batch reuses
// its own slots and every slot wait has the call's deadline.
TEST_F(RdmaEndToEnd, ConcurrentMultiGetsWithALargeEntryDoNotDeadlock) {
  auto c = Client(client::TransportMode::kRdma);
  ASSERT_NE(c, nullptr);
  std::vector<std::string> keys;
  for (int i = 0; i < 16; ++i) {
    keys.push_back(absl::StrCat("dl:", i));
    // One entry larger than a slot's 4 KiB scratch.
    ASSERT_TRUE(c->Put(keys.back(), Random(i == 7 ? 20000 : 100, 500 + i)).ok());
  }
  std::atomic<int> finished{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        auto got = c->MultiGet(keys);
        if (!got.ok() || !(*got)[7].ok() || (*got)[7]->size() != 20000) failures++;
      }
      finished++;
    });
  }
  // A hang cannot be joined: give it a minute, then fail the whole binary.
  for (int i = 0; i < 600 && finished.load() < 4; ++i) absl::SleepFor(absl::Milliseconds(100));
  if (finished.load() < 4) {
    std::fprintf(stderr, "MultiGet threads hung: %d of 4 finished\n", finished.load());
    std::abort();
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(RdmaEndToEnd, LibraryRoundTripsOverRdma) {
  auto c = Client(client::TransportMode::kRdma);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->transport_name(), "rdma");
  std::string key("bin\0key", 7);
  std::string value = Random(3000, 1);
  ASSERT_TRUE(c->Put(key, value).ok());
  auto got = c->Get(key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == value);
  EXPECT_TRUE(*c->Exists(key));
  EXPECT_EQ(c->Get("never-written").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(*c->Exists("never-written"));
  ASSERT_TRUE(c->Put(key, "").ok());  // overwrite with an empty value
  EXPECT_EQ(*c->Get(key), "");
  ASSERT_TRUE(c->Delete(key).ok());
  EXPECT_EQ(c->Delete(key).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c->Get(key).status().code(), absl::StatusCode::kNotFound);

  // More PUTs than the connection has commit credits, and more bytes than
  // one lease: credits come back, leases are refilled.
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(c->Put(absl::StrCat("many:", i % 50), Random(20000, i)).ok()) << i;
  }
  EXPECT_TRUE(*c->Get("many:49") == Random(20000, 399));

  std::string big = Random(16 << 20, 2);
  ASSERT_TRUE(c->Put("big", big).ok());
  auto big_got = c->Get("big");
  ASSERT_TRUE(big_got.ok()) << big_got.status();
  EXPECT_EQ(big_got->size(), big.size());
  EXPECT_TRUE(*big_got == big);

  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) {
    pairs.emplace_back(absl::StrCat("m:", i), Random(i * 13, 100 + i));
    keys.push_back(pairs.back().first);
  }
  keys.push_back("m:absent");
  ASSERT_TRUE(c->MultiPut(pairs).ok());
  auto many = c->MultiGet(keys);
  ASSERT_TRUE(many.ok()) << many.status();
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE((*many)[i].ok()) << i << " " << (*many)[i].status();
    EXPECT_TRUE(*(*many)[i] == pairs[i].second) << i;
  }
  EXPECT_EQ((*many)[300].status().code(), absl::StatusCode::kNotFound);

  const std::map<std::string, uint64_t> k = c->metrics();
  const uint64_t fallbacks = SeriesValue(k, "kvstore_client_server_fallback_gets_total");
  const uint64_t leases = SeriesValue(k, "kvstore_client_leases_granted_total");
  std::printf("rdma requests %lu tcp requests %lu checksum_retries %lu fallbacks %lu leases %lu\n",
              RequestsOn(k, "rdma"), RequestsOn(k, "tcp"),
              SeriesValue(k, "kvstore_client_checksum_retries_total"), fallbacks, leases);
  EXPECT_GT(RequestsOn(k, "rdma"), 600u);
  EXPECT_EQ(RequestsOn(k, "tcp"), 0u);
  EXPECT_GT(leases, 0u);
  EXPECT_EQ(fallbacks, 0u);
}

TEST_F(RdmaEndToEnd, ZeroCopyGetIntoAndPutFrom) {
  auto c = Client(client::TransportMode::kRdma);
  ASSERT_NE(c, nullptr);
  const size_t n = 16 << 20;
  std::vector<char> src(n), dst(n + 4096);
  std::string pattern = Random(n, 3);
  std::copy(pattern.begin(), pattern.end(), src.begin());
  auto rsrc = c->Register(src.data(), src.size());
  auto rdst = c->Register(dst.data(), dst.size());
  ASSERT_TRUE(rsrc.ok()) << rsrc.status();
  ASSERT_TRUE(rdst.ok()) << rdst.status();
  ASSERT_TRUE(c->PutFrom("zc", *rsrc, 0, n).ok());
  auto len = c->GetInto("zc", *rdst, 100, n + 200);
  ASSERT_TRUE(len.ok()) << len.status();
  EXPECT_EQ(*len, n);
  EXPECT_EQ(0, std::memcmp(dst.data() + 100, src.data(), n));
  // Written with PutFrom, read with the copying API: the same bytes.
  EXPECT_TRUE(*c->Get("zc") == pattern);
  // A buffer too small is an error naming the size, and nothing is lost.
  auto small = c->GetInto("zc", *rdst, 0, 1000);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(small.status().message()), HasSubstr("bytes"));
  // A sub-range of a registered buffer.
  ASSERT_TRUE(c->PutFrom("zc2", *rsrc, 12345, 777).ok());
  auto v = c->Get("zc2");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, pattern.substr(12345, 777));
}

// With Options::rdma_read_in_pieces, entries of 512 KiB and more are READ in
// up to four pieces and checksummed piece by piece
// (client/internal/rdma/read_chunks.h). Sizes on both sides of
// the first split and of the piece boundaries, through the two-READ path,
// the location-cache hit path and the zero-copy path: every byte must come
// back, and with no checksum retry and no server fallback (a piece hashed
// wrongly or out of order would be a "torn" entry that the server's CPU
// then answers correctly, hiding the fault from a value comparison alone).
TEST_F(RdmaEndToEnd, LargeEntriesReadInPiecesAtEveryBoundary) {
  // Both ways, so the default (one READ) is held to the same bar.
  for (const bool in_pieces : {true, false}) {
    SCOPED_TRACE(in_pieces ? "in pieces" : "one READ");
    auto c = Client(client::TransportMode::kRdma, in_pieces);
    ASSERT_NE(c, nullptr);
    const size_t kMax = (3 << 20) + 4096;
    std::vector<char> dst(kMax + 64);
    auto rdst = c->Register(dst.data(), dst.size());
    ASSERT_TRUE(rdst.ok()) << rdst.status();
    const size_t sizes[] = {(512 << 10) - 200, (512 << 10) - 40,         512 << 10,
                            (1 << 20) + 17,    (1 << 20) + 3 * 4096 + 5, (3 << 20) + 1};
    int i = 0;
    for (size_t n : sizes) {
      const std::string key = absl::StrCat("pieces:", in_pieces, ":", i);
      const std::string value = Random(n, 500 + i++);
      ASSERT_TRUE(c->Put(key, value).ok()) << n;
      for (int pass = 0; pass < 2; ++pass) {  // a miss (two READs), then a cache hit
        auto got = c->Get(key);
        ASSERT_TRUE(got.ok()) << n << " " << got.status();
        EXPECT_TRUE(*got == value) << n << " pass " << pass;
      }
      auto len = c->GetInto(key, *rdst, 13, kMax);
      ASSERT_TRUE(len.ok()) << n << " " << len.status();
      ASSERT_EQ(*len, n);
      EXPECT_EQ(0, std::memcmp(dst.data() + 13, value.data(), n)) << n;
    }
    const std::map<std::string, uint64_t> k = c->metrics();
    EXPECT_EQ(SeriesValue(k, "kvstore_client_checksum_retries_total"), 0u);
    EXPECT_EQ(SeriesValue(k, kServerFallbackGets), 0u);
    EXPECT_GE(SeriesValue(k, "kvstore_client_location_cache_total{result=\"hit\"}"), 6u);
  }
}

TEST_F(RdmaEndToEnd, KvctlOverRdma) {
  const std::string value = Random(1 << 20, 4);
  const std::string path = testing::TempDir() + "/rdma_value.bin";
  std::ofstream(path, std::ios::binary).write(value.data(), value.size());
  const std::string server = "--server=" + server_->control_address();
  ProcessResult put = RunProcess({BinaryPath("client/kvctl/kvctl"), server, "--transport=rdma",
                                  "put", "kvctl-rdma", "--file", path});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  ProcessResult get = RunProcess(
      {BinaryPath("client/kvctl/kvctl"), server, "--transport=rdma", "get", "kvctl-rdma"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_TRUE(get.out == value);
  ProcessResult stat =
      RunProcess({BinaryPath("client/kvctl/kvctl"), server, "--transport=rdma", "stat", "--json"});
  ASSERT_EQ(stat.exit_code, 0) << stat.err;
  EXPECT_THAT(stat.out, HasSubstr("\"transport\":\"rdma\""));
  // Server series are flat-map keys; JSON escapes their label quotes.
  EXPECT_THAT(stat.out,
              HasSubstr(R"("kvstore_server_requests_total{op=\"put\",transport=\"rdma\"}")"));
  EXPECT_THAT(stat.out, HasSubstr("\"kvstore_leases_granted_total\""));
  EXPECT_THAT(stat.out, HasSubstr("\"kvstore_client_checksum_retries_total\""));
  EXPECT_THAT(stat.out, HasSubstr("\"kvstore_client_leases_granted_total\""));
}

TEST_F(RdmaEndToEnd, RdmaAndTcpClientsSeeEachOthersWrites) {
  auto rdma = Client(client::TransportMode::kRdma);
  auto tcp = Client(client::TransportMode::kTcp);
  ASSERT_NE(rdma, nullptr);
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(tcp->transport_name(), "tcp");
  for (int i = 0; i < 50; ++i) {
    const std::string k = absl::StrCat("mixed:", i);
    ASSERT_TRUE((i % 2 ? rdma : tcp)->Put(k, absl::StrCat("v", i)).ok());
  }
  for (int i = 0; i < 50; ++i) {
    const std::string k = absl::StrCat("mixed:", i);
    EXPECT_EQ(*(i % 2 ? tcp : rdma)->Get(k), absl::StrCat("v", i)) << k;
  }
  // redis-cli, a third-party RESP client, sees what RDMA wrote.
  ProcessResult cli =
      RunProcess({"redis-cli", "-p", std::to_string(server_->resp_port()), "GET", "mixed:1"});
  EXPECT_EQ(cli.out, "v1\n");
  ASSERT_TRUE(tcp->Delete("mixed:1").ok());
  EXPECT_EQ(rdma->Get("mixed:1").status().code(), absl::StatusCode::kNotFound);
  // auto on a client with a device picks RDMA.
  auto autoc = Client(client::TransportMode::kAuto);
  ASSERT_NE(autoc, nullptr);
  EXPECT_EQ(autoc->transport_name(), "rdma");
  EXPECT_EQ(SeriesValue(autoc->metrics(), "kvstore_client_tcp_fallbacks_total"), 0u);
}

TEST(RdmaFallback, RdmaCapableClientUsesTcpWithATcpOnlyServer) {
  auto s = KvServerProcess::Start({"--pool_size=64M", "--transport=tcp"});
  ASSERT_TRUE(s.ok()) << s.status();
  client::Options o;
  o.servers = {s->control_address()};
  o.transport = client::TransportMode::kAuto;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->transport_name(), "tcp");
  EXPECT_EQ(SeriesValue((*c)->metrics(), "kvstore_client_tcp_fallbacks_total"), 1u);
  ASSERT_TRUE((*c)->Put("k", "v").ok());
  EXPECT_EQ(*(*c)->Get("k"), "v");
  o.transport = client::TransportMode::kRdma;
  auto strict = client::KvClient::Connect(o);
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(strict.status().message()), HasSubstr("no RDMA device"));
}

}  // namespace
}  // namespace kvstore

namespace kvstore {
namespace {

// A pool split into several memory regions (as on a device whose max_mr_size
// is smaller than the pool): entries inside a segment are read one-sided from
// whichever region holds them; an entry spanning two regions is served by the
// server, correctly.
TEST(RdmaRegions, PoolSplitIntoSeveralMemoryRegions) {
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  auto s = testing::KvServerProcess::Start(
      {"--pool_size=64M", "--segment_size=1M", "--max_mr_bytes=4M", "--transport=rdma",
       "--grace_period=6s", absl::StrCat("--rdma_device=", dev ? dev : "")});
  ASSERT_TRUE(s.ok()) << s.status();
  client::Options o;
  o.servers = {s->control_address()};
  o.transport = client::TransportMode::kRdma;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  // ~8 MiB of 100 KiB values: spread over at least two regions.
  for (int i = 0; i < 80; ++i) {
    ASSERT_TRUE(
        (*c)->Put(absl::StrCat("r", i), std::string(100 << 10, static_cast<char>('a' + i % 26)))
            .ok());
  }
  for (int i = 0; i < 80; ++i) {
    auto v = (*c)->Get(absl::StrCat("r", i));
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, std::string(100 << 10, static_cast<char>('a' + i % 26)));
  }
  EXPECT_EQ(SeriesValue((*c)->metrics(), kServerFallbackGets), 0u);
  std::string big(6 << 20, 'B');
  big[12345] = 'x';
  ASSERT_TRUE((*c)->Put("spanning", big).ok());
  auto v = (*c)->Get("spanning");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(*v == big);
  EXPECT_TRUE(*(*c)->Exists("spanning"));
  std::printf("fallback gets after the spanning entry: %lu\n",
              SeriesValue((*c)->metrics(), kServerFallbackGets));
  EXPECT_EQ(SeriesValue((*c)->metrics(), kServerFallbackGets), 1u);
}

}  // namespace
}  // namespace kvstore
