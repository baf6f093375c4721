// Copyright 2026 The kvstore Authors.
//
// The RDMA client's location cache against a real kvserver (Soft-RoCE in
// the VM): a repeated GET is answered by one entry READ (counted as a hit)
// and returns the right value; after ANOTHER client overwrites or deletes
// the key, the reader's cached location is detected as stale and never
// yields the old value once the write was acknowledged; the client's own
// writes invalidate its cache; the cache can be turned off; MultiGet reads
// large values in its batch. Needs an RDMA device.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace {

using ::kvstore::testing::KvServerProcess;

constexpr char kHits[] = R"(kvstore_client_location_cache_total{result="hit"})";
constexpr char kMisses[] = R"(kvstore_client_location_cache_total{result="miss"})";
constexpr char kStale[] = R"(kvstore_client_location_cache_total{result="stale"})";
constexpr char kFallbacks[] = "kvstore_client_server_fallback_gets_total";
// The clock-skew bound one-sided readers assume (common/protocol/fence.h).
constexpr int64_t kSkewMarginMs = 250;

// SET key value PXAT at_ms on the server's RESP port (the C++ client's
// Put has no expiry); true on +OK.
bool SetWithExpiry(int resp_port, const std::string& key, const std::string& value, int64_t at_ms) {
  const std::string at = absl::StrCat(at_ms);
  const std::string req =
      absl::StrCat("*5\r\n$3\r\nSET\r\n$", key.size(), "\r\n", key, "\r\n$", value.size(), "\r\n",
                   value, "\r\n$4\r\nPXAT\r\n$", at.size(), "\r\n", at, "\r\n");
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(resp_port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
            send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  char reply[5] = {};
  ok = ok && recv(fd, reply, sizeof(reply), MSG_WAITALL) == 5 && std::string(reply, 5) == "+OK\r\n";
  close(fd);
  return ok;
}

std::string DeviceFlag() {
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  return absl::StrCat("--rdma_device=", dev ? dev : "");
}

uint64_t Metric(client::KvClient& c, const char* name) {
  std::map<std::string, uint64_t> m = c.metrics();
  auto it = m.find(name);
  return it == m.end() ? 0 : it->second;
}

// A value that names its key and round, so a stale answer is recognisable.
std::string ValueFor(const std::string& key, int round, size_t size) {
  std::string v = absl::StrCat(key, "#", round, "#");
  v.resize(std::max(size, v.size()), static_cast<char>('a' + round % 26));
  return v;
}

class RdmaLocationCacheTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--pool_size=64M", "--transport=rdma", DeviceFlag()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto s = KvServerProcess::Start(flags);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::make_unique<KvServerProcess>(std::move(*s));
  }
  std::unique_ptr<client::KvClient> Connect(size_t cache_entries = 65536) {
    client::Options o;
    o.servers = {server_->control_address()};
    o.transport = client::TransportMode::kRdma;
    o.rdma_location_cache_entries = cache_entries;
    auto c = client::KvClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return nullptr;
    EXPECT_EQ((*c)->transport_name(), "rdma");
    return std::move(*c);
  }
  void TearDown() override {
    if (HasFailure() && server_) std::printf("server log:\n%s\n", server_->Log().c_str());
  }
  std::unique_ptr<KvServerProcess> server_;
};

TEST_F(RdmaLocationCacheTest, RepeatedGetsHitAndReturnTheValue) {
  StartServer();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  const std::vector<size_t> sizes = {1, 64, 3000, 5000, 100 << 10};
  std::vector<std::string> keys;
  for (size_t i = 0; i < sizes.size(); ++i) {
    keys.push_back(absl::StrCat("hit", i));
    ASSERT_TRUE(c->Put(keys[i], ValueFor(keys[i], 0, sizes[i])).ok());
  }
  // First GET: a miss (the PUT left nothing cached); it records the location.
  const uint64_t misses0 = Metric(*c, kMisses);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto v = c->Get(keys[i]);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, ValueFor(keys[i], 0, sizes[i]));
  }
  EXPECT_EQ(Metric(*c, kMisses) - misses0, keys.size());
  const uint64_t hits0 = Metric(*c, kHits);
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto v = c->Get(keys[i]);
      ASSERT_TRUE(v.ok()) << v.status();
      EXPECT_EQ(*v, ValueFor(keys[i], 0, sizes[i]));
      auto e = c->Exists(keys[i]);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_TRUE(*e);
    }
  }
  EXPECT_EQ(Metric(*c, kHits) - hits0, 3 * 2 * keys.size());
  EXPECT_EQ(Metric(*c, kStale), 0u);

  // Zero copy on a hit: the value lands in registered memory.
  std::vector<char> mem(200 << 10);
  auto buf = c->Register(mem.data(), mem.size());
  ASSERT_TRUE(buf.ok()) << buf.status();
  const uint64_t hits1 = Metric(*c, kHits);
  auto n = c->GetInto(keys[4], *buf, 0, mem.size());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(mem.data(), *n), ValueFor(keys[4], 0, sizes[4]));
  EXPECT_EQ(Metric(*c, kHits) - hits1, 1u);
}

// The heart of it: B's acknowledged overwrite or delete must be visible to
// A's next GET although A holds the old location. Overwrites keep the size
// (the entry moves, same shape) or change it; a low grace period and small
// segments make the old memory get freed and reused while A still caches it.
TEST_F(RdmaLocationCacheTest, AnotherClientsWritesAreNeverHiddenByTheCache) {
  StartServer({"--segment_size=1M", "--grace_period=200ms"});
  auto reader = Connect();
  auto writer = Connect();
  ASSERT_NE(reader, nullptr);
  ASSERT_NE(writer, nullptr);
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  constexpr int kKeys = 24;
  std::vector<std::string> keys;
  std::vector<int> round_of(kKeys, 0);
  std::vector<size_t> size_of(kKeys, 0);
  std::vector<bool> present(kKeys, true);
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(absl::StrCat("shared", i));
    size_of[i] = 64 + rng() % 2000;
    ASSERT_TRUE(writer->Put(keys[i], ValueFor(keys[i], 0, size_of[i])).ok());
  }
  for (int step = 0; step < 600; ++step) {
    const int i = rng() % kKeys;
    // The reader caches the current location first.
    auto v = reader->Get(keys[i]);
    if (present[i]) {
      ASSERT_TRUE(v.ok()) << keys[i] << ": " << v.status();
      ASSERT_EQ(*v, ValueFor(keys[i], round_of[i], size_of[i])) << "step " << step;
    } else {
      ASSERT_EQ(v.status().code(), absl::StatusCode::kNotFound) << v.status();
    }
    const int what = rng() % 4;
    if (what == 3 && present[i]) {
      ASSERT_TRUE(writer->Delete(keys[i]).ok());
      present[i] = false;
    } else {
      ++round_of[i];
      // Half the overwrites keep the size: same slot shape, new place.
      if (what == 0) size_of[i] = 64 + rng() % 2000;
      ASSERT_TRUE(writer->Put(keys[i], ValueFor(keys[i], round_of[i], size_of[i])).ok());
      present[i] = true;
    }
    // After the acknowledgement: never the old value.
    auto after = reader->Get(keys[i]);
    if (present[i]) {
      ASSERT_TRUE(after.ok()) << keys[i] << ": " << after.status();
      ASSERT_EQ(*after, ValueFor(keys[i], round_of[i], size_of[i])) << "step " << step;
    } else {
      ASSERT_EQ(after.status().code(), absl::StatusCode::kNotFound) << "step " << step;
    }
  }
  EXPECT_GT(Metric(*reader, kStale), 0u);
  EXPECT_GT(Metric(*reader, kHits), 0u);
}

// The client's own PUT or DELETE drops its cached location: the next GET
// is a miss, not a stale hit.
// A key whose expiry time has passed reads as absent one-sided, whether
// the client has its location cached (a hit) or not (a miss), while the
// entry is still in the server's index (active expiry is off): the reader
// checks the entry's expiry itself. Within the clock-skew bound of the
// expiry the reader cannot tell, and the server answers.
TEST_F(RdmaLocationCacheTest, AnExpiredKeyReadsAsAbsentOnHitsAndMisses) {
  StartServer({"--expiry_interval=0"});
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  const int64_t at = absl::ToUnixMillis(absl::Now()) + 4000;
  ASSERT_TRUE(SetWithExpiry(server_->resp_port(), "hot", "hot-value", at));
  ASSERT_TRUE(SetWithExpiry(server_->resp_port(), "cold", "cold-value", at));
  ASSERT_TRUE(c->Put("forever", "v").ok());
  const uint64_t hits0 = Metric(*c, kHits);
  for (int i = 0; i < 2; ++i) {
    auto v = c->Get("hot");
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, "hot-value");
  }
  EXPECT_GT(Metric(*c, kHits), hits0);  // the second GET used the cached location
  // One-sided GETs are reported to the server in batches, for eviction.
  for (int i = 0; i < 4200; ++i) ASSERT_TRUE(c->Get("forever").ok());
  EXPECT_GE(Metric(*c, R"(kvstore_client_read_reports_total{result="ok"})"), 1u);
  // Wait (bounded) until the reader's clock is past the expiry by more than
  // the skew bound: then it may, and must, decide alone.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (absl::ToUnixMillis(absl::Now()) < at + kSkewMarginMs && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const uint64_t fallbacks = Metric(*c, kFallbacks);
  const uint64_t hits1 = Metric(*c, kHits);
  EXPECT_TRUE(absl::IsNotFound(c->Get("hot").status()));  // cached location
  EXPECT_GT(Metric(*c, kHits) + Metric(*c, kStale), hits1);
  EXPECT_TRUE(absl::IsNotFound(c->Get("cold").status()));  // never read before
  EXPECT_EQ(Metric(*c, kFallbacks), fallbacks);            // decided one-sided
  EXPECT_EQ(*c->Get("forever"), "v");
  // Inside the bound the reader cannot tell, and the server decides: a
  // value that close to its expiry is only ever returned by the server.
  const int64_t near = absl::ToUnixMillis(absl::Now()) + kSkewMarginMs / 2;
  ASSERT_TRUE(SetWithExpiry(server_->resp_port(), "edge", "edge-value", near));
  auto edge = c->Get("edge");
  if (edge.ok()) {
    EXPECT_EQ(*edge, "edge-value");
    EXPECT_EQ(Metric(*c, kFallbacks), fallbacks + 1);
  } else {
    EXPECT_TRUE(absl::IsNotFound(edge.status())) << edge.status();
  }
}

TEST_F(RdmaLocationCacheTest, OwnWritesInvalidate) {
  StartServer();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Put("own", "v1").ok());
  ASSERT_EQ(*c->Get("own"), "v1");
  ASSERT_EQ(*c->Get("own"), "v1");  // a hit
  const uint64_t misses0 = Metric(*c, kMisses);
  ASSERT_TRUE(c->Put("own", "v2").ok());
  auto v = c->Get("own");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v2");
  EXPECT_EQ(Metric(*c, kMisses) - misses0, 1u);
  ASSERT_TRUE(c->Delete("own").ok());
  EXPECT_EQ(c->Get("own").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Metric(*c, kStale), 0u);
}

TEST_F(RdmaLocationCacheTest, CacheOffStillReads) {
  StartServer();
  auto c = Connect(/*cache_entries=*/0);
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(c->Put(absl::StrCat("off", i), ValueFor("off", i, 100)).ok());
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 8; ++i) {
      auto v = c->Get(absl::StrCat("off", i));
      ASSERT_TRUE(v.ok()) << v.status();
      EXPECT_EQ(*v, ValueFor("off", i, 100));
    }
  }
  ASSERT_TRUE(c->Put("off0", "new").ok());
  EXPECT_EQ(*c->Get("off0"), "new");
  EXPECT_EQ(Metric(*c, kHits), 0u);
  EXPECT_EQ(Metric(*c, kMisses), 0u);
  EXPECT_EQ(Metric(*c, kStale), 0u);
}

// Large values are READ in the batch (pooled buffers), next to small ones
// and absent keys; a second MultiGet after an overwrite sees the new values.
TEST_F(RdmaLocationCacheTest, MultiGetReadsLargeValues) {
  StartServer();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  std::vector<std::string> keys;
  std::vector<std::string> want;
  for (int i = 0; i < 10; ++i) {
    keys.push_back(absl::StrCat("mg", i));
    const size_t size = i % 2 == 0 ? (64 << 10) + i * 4096 : 100 + i;
    want.push_back(ValueFor(keys.back(), i, size));
    ASSERT_TRUE(c->Put(keys.back(), want.back()).ok());
  }
  keys.push_back("mg-absent");
  for (int round = 0; round < 2; ++round) {
    auto r = c->MultiGet(keys);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->size(), keys.size());
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      ASSERT_TRUE((*r)[i].ok()) << keys[i] << ": " << (*r)[i].status();
      EXPECT_EQ(*(*r)[i], want[i]) << keys[i];
    }
    EXPECT_EQ((*r)[keys.size() - 1].status().code(), absl::StatusCode::kNotFound);
    want[2] = ValueFor(keys[2], 100, 300 << 10);
    ASSERT_TRUE(c->Put(keys[2], want[2]).ok());
  }
  // MultiGet recorded the locations: single GETs now hit.
  const uint64_t hits0 = Metric(*c, kHits);
  auto v = c->Get(keys[0]);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, want[0]);
  EXPECT_EQ(Metric(*c, kHits) - hits0, 1u);
}

}  // namespace
}  // namespace kvstore
