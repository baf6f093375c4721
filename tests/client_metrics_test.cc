// Copyright 2026 The kvstore Authors.
//
// KvClient::metrics() against a real kvserver over TCP: the request counters
// and latency histograms count each public call under the spec's names, and
// the flat map holds exactly the client series the spec lists (all present
// from Connect(), before any call).

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace {

using ::kvstore::testing::KvServerProcess;
using ::kvstore::testing::RequestsOn;
using ::kvstore::testing::SeriesValue;

// Series keys as metrics() prints them (labels sorted by name).
std::string Requests(const std::string& op, const std::string& transport) {
  return absl::StrCat("kvstore_client_requests_total{op=\"", op, "\",transport=\"", transport,
                      "\"}");
}
std::string DurationCount(const std::string& op, const std::string& transport) {
  return absl::StrCat("kvstore_client_request_duration_seconds_count{op=\"", op, "\",transport=\"",
                      transport, "\"}");
}

// Every key the spec's client names give in the flat map: the two labelled
// families for both transports (histograms as four entries each) and the
// unlabelled counters.
std::set<std::string> SpecKeys() {
  std::set<std::string> keys;
  for (const char* t : {"tcp", "rdma"}) {
    for (const char* op : {"get", "put", "delete", "exists"}) keys.insert(Requests(op, t));
    for (const char* op : {"get", "put", "delete", "multi_get", "multi_put"}) {
      const std::string labels = absl::StrCat("{op=\"", op, "\",transport=\"", t, "\"}");
      keys.insert(DurationCount(op, t));
      for (const char* suffix : {"_sum_micros", "_p50_micros", "_p99_micros"}) {
        keys.insert(absl::StrCat("kvstore_client_request_duration", suffix, labels));
      }
    }
  }
  for (const char* name :
       {"tcp_fallbacks", "checksum_retries", "span_retries", "server_fallback_gets",
        "leases_granted", "leases_released", "leases_renewed", "lease_aborts", "reconnects",
        "cluster_map_refreshes", "cluster_redirects", "cluster_retries", "cluster_asks",
        "cluster_tryagains"}) {
    keys.insert(absl::StrCat("kvstore_client_", name, "_total"));
  }
  // A gauge, 0 for a single-node client.
  keys.insert("kvstore_client_cluster_map_epoch");
  return keys;
}

// One kvserver (TCP only) and one client that asks for TCP, so every
// operation lands on the tcp series and no RDMA path is ever built.
class ClientMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = KvServerProcess::Start({"--pool_size=64M", "--transport=tcp"});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::make_unique<KvServerProcess>(std::move(*s));
    client::Options o;
    o.servers = {server_->control_address()};
    o.transport = client::TransportMode::kTcp;
    auto c = client::KvClient::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }

  std::unique_ptr<KvServerProcess> server_;
  std::unique_ptr<client::KvClient> client_;
};

// The RDMA parts register their counters only when an RDMA path is built;
// over TCP they are absent, which SeriesValue reads as 0. Everything else is
// registered at Connect() and reads 0 before the first call.
TEST_F(ClientMetrics, KeysMatchTheSpec) {
  // Nothing has run yet: every key present must be spec'd and read 0.
  const std::map<std::string, uint64_t> m = client_->metrics();
  const std::set<std::string> spec = SpecKeys();
  for (const auto& [key, value] : m) {
    EXPECT_TRUE(spec.count(key)) << "not a spec'd client series: " << key;
    EXPECT_EQ(value, 0u) << key;
  }
  // Registered at Connect() for both transports, before any operation.
  for (const char* op : {"get", "put", "delete", "exists"}) {
    EXPECT_TRUE(m.count(Requests(op, "tcp"))) << op;
    EXPECT_TRUE(m.count(Requests(op, "rdma"))) << op;
  }
  // Exists has no latency series (the spec times Get, Put, Delete, batches).
  for (const char* op : {"get", "put", "delete", "multi_get", "multi_put"}) {
    EXPECT_TRUE(m.count(DurationCount(op, "tcp"))) << op;
  }
  EXPECT_FALSE(m.count(DurationCount("exists", "tcp")));
  EXPECT_TRUE(m.count("kvstore_client_tcp_fallbacks_total"));
  EXPECT_TRUE(m.count("kvstore_client_reconnects_total"));
}

TEST_F(ClientMetrics, GetsAndPutsAreCountedAndTimed) {
  constexpr uint64_t kPuts = 7;  // M
  constexpr uint64_t kGets = 5;  // N (one of them absent: errors count too)
  for (uint64_t i = 0; i < kPuts; ++i) {
    ASSERT_TRUE(client_->Put(absl::StrCat("k", i), "v").ok());
  }
  for (uint64_t i = 0; i + 1 < kGets; ++i) ASSERT_TRUE(client_->Get(absl::StrCat("k", i)).ok());
  EXPECT_EQ(client_->Get("absent").status().code(), absl::StatusCode::kNotFound);

  // One request and one observation per call: nothing was retried.
  std::map<std::string, uint64_t> m = client_->metrics();
  EXPECT_EQ(SeriesValue(m, Requests("get", "tcp")), kGets);
  EXPECT_EQ(SeriesValue(m, Requests("put", "tcp")), kPuts);
  EXPECT_EQ(SeriesValue(m, DurationCount("get", "tcp")), kGets);
  EXPECT_EQ(SeriesValue(m, DurationCount("put", "tcp")), kPuts);
  EXPECT_EQ(SeriesValue(m, Requests("delete", "tcp")), 0u);
  EXPECT_EQ(RequestsOn(m, "rdma"), 0u);
  EXPECT_EQ(RequestsOn(m, "tcp"), kGets + kPuts);
  // A round trip to a local server takes some time, and p50 <= p99.
  const std::string get_labels = "{op=\"get\",transport=\"tcp\"}";
  EXPECT_GT(SeriesValue(m, "kvstore_client_request_duration_p50_micros" + get_labels), 0u);
  EXPECT_LE(SeriesValue(m, "kvstore_client_request_duration_p50_micros" + get_labels),
            SeriesValue(m, "kvstore_client_request_duration_p99_micros" + get_labels));

  // Batches count per key in requests_total and once per call in latency;
  // GetInto/PutFrom count as get/put.
  std::vector<std::string> keys = {"k0", "k1", "k2"};
  ASSERT_TRUE(client_->MultiGet(keys).ok());
  ASSERT_TRUE(client_->MultiPut({{"a", "1"}, {"b", "2"}}).ok());
  char mem[16] = "hello";
  auto buf = client_->Register(mem, sizeof(mem));
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE(client_->PutFrom("z", *buf, 0, 5).ok());
  ASSERT_TRUE(client_->GetInto("z", *buf, 8, 8).ok());
  ASSERT_TRUE(client_->Delete("z").ok());
  ASSERT_TRUE(client_->Exists("a").ok());
  // requests: +3 MultiGet keys and +1 GetInto; +2 MultiPut pairs and +1
  // PutFrom. Latency: +1 GetInto under get, +1 PutFrom under put, and the
  // batches once each under their own op.
  m = client_->metrics();
  EXPECT_EQ(SeriesValue(m, Requests("get", "tcp")), kGets + 3 + 1);
  EXPECT_EQ(SeriesValue(m, Requests("put", "tcp")), kPuts + 2 + 1);
  EXPECT_EQ(SeriesValue(m, Requests("delete", "tcp")), 1u);
  EXPECT_EQ(SeriesValue(m, Requests("exists", "tcp")), 1u);
  EXPECT_EQ(SeriesValue(m, DurationCount("get", "tcp")), kGets + 1);
  EXPECT_EQ(SeriesValue(m, DurationCount("put", "tcp")), kPuts + 1);
  EXPECT_EQ(SeriesValue(m, DurationCount("delete", "tcp")), 1u);
  EXPECT_EQ(SeriesValue(m, DurationCount("multi_get", "tcp")), 1u);
  EXPECT_EQ(SeriesValue(m, DurationCount("multi_put", "tcp")), 1u);
  EXPECT_EQ(SeriesValue(m, "kvstore_client_tcp_fallbacks_total"), 0u);  // asked for TCP
}

}  // namespace
}  // namespace kvstore
