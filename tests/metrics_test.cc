// Copyright 2026 The kvstore Authors.
//
// Cross-process metrics test: a real kvserver with --metrics_port=0 serves
// RESP traffic from redis-cli; then GET /metrics (over a socket, checked by
// promtool), gRPC Stats (through KvClient::Stats()) and RESP INFO's
// # Metrics section must show the same figures for the series that do not
// move at rest.

#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics_scrape.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace {

using ::kvstore::testing::HttpGet;
using ::kvstore::testing::KvServerProcess;
using ::kvstore::testing::ParseInfoMetrics;
using ::kvstore::testing::ParsePrometheusText;
using ::kvstore::testing::ProcessResult;
using ::kvstore::testing::PromtoolCheck;
using ::kvstore::testing::RunProcess;
using ::testing::HasSubstr;

constexpr char kTcpGets[] = R"(kvstore_server_requests_total{op="get",transport="tcp"})";
constexpr char kTcpPuts[] = R"(kvstore_server_requests_total{op="put",transport="tcp"})";
constexpr char kTcpDeletes[] = R"(kvstore_server_requests_total{op="delete",transport="tcp"})";
constexpr char kTcpGetLatencyCount[] =
    R"(kvstore_server_request_duration_seconds_count{op="get",transport="tcp"})";

// One kvserver per test (TCP only, metrics on a free port), so that the
// figures each test checks start from zero.
class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = KvServerProcess::Start({"--pool_size=64M", "--transport=tcp", "--metrics_port=0"});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::make_unique<KvServerProcess>(std::move(*s));
    ASSERT_GT(server_->metrics_port(), 0) << "the ready file has no metrics_port";
  }
  void TearDown() override {
    if (HasFailure() && server_ != nullptr) std::cout << "server log:\n" << server_->Log();
  }
  // redis-cli against the server's RESP port: the same client operators use.
  ProcessResult RedisCli(std::vector<std::string> args) {
    std::vector<std::string> argv = {"redis-cli", "-p", std::to_string(server_->resp_port())};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }

  std::unique_ptr<KvServerProcess> server_;
};

TEST_F(MetricsTest, ScrapeStatsAndInfoAgreeAfterRespTraffic) {
  // Three SETs, three GETs (one a miss), one DEL: the figures below.
  for (const char* k : {"a", "b", "c"}) ASSERT_EQ(RedisCli({"SET", k, "value"}).out, "OK\n");
  ASSERT_EQ(RedisCli({"GET", "a"}).out, "value\n");
  ASSERT_EQ(RedisCli({"GET", "b"}).out, "value\n");
  ASSERT_EQ(RedisCli({"GET", "nope"}).out, "\n");
  ASSERT_EQ(RedisCli({"DEL", "a"}).out, "1\n");

  auto body = HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_THAT(*body, HasSubstr("# TYPE kvstore_server_request_duration_seconds histogram"));
  if (absl::Status s = PromtoolCheck(*body); absl::IsUnimplemented(s)) {
    std::cout << "SKIPPED promtool: " << s.message() << " (apt-get install prometheus)\n";
  } else {
    EXPECT_TRUE(s.ok()) << s << "\nbody:\n" << *body;
  }
  const std::map<std::string, std::string> scraped = ParsePrometheusText(*body);

  // gRPC Stats through the public client: its counters map is the server's
  // flat snapshot. A tcp client adds no get/put/delete of its own here.
  client::Options o;
  o.servers = {server_->control_address()};
  o.transport = client::TransportMode::kTcp;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto stats = (*c)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();

  const ProcessResult info = RedisCli({"INFO"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  // The Redis-style fields stay for the tools that read them.
  EXPECT_THAT(info.out, HasSubstr("redis_version:"));
  EXPECT_THAT(info.out, HasSubstr("db0:keys=2,expires=0"));
  // The index's load (2 keys in the default index: 0.000) and refusals.
  EXPECT_THAT(info.out, HasSubstr("index_load_factor:0.000\r\n"));
  EXPECT_THAT(info.out, HasSubstr("index_full_errors:0\r\n"));
  const std::map<std::string, std::string> info_metrics = ParseInfoMetrics(info.out);

  // Stable at rest: nothing but this test touches them between the reads.
  const std::map<std::string, uint64_t> expected = {
      {kTcpGets, 3},
      {kTcpPuts, 3},
      {kTcpDeletes, 1},
      {kTcpGetLatencyCount, 3},
      {"kvstore_commits_total", 3},
      {"kvstore_deletes_total", 1},
      {"kvstore_keys", 2},
      {"kvstore_index_load_permille", 0},
      {"kvstore_index_full_errors_total", 0},
  };
  for (const auto& [series, want] : expected) {
    // The same key finds the series in all three readers.
    SCOPED_TRACE(series);
    ASSERT_EQ(scraped.count(series), 1u);
    uint64_t from_scrape = 0;
    ASSERT_TRUE(absl::SimpleAtoi(scraped.at(series), &from_scrape));
    EXPECT_EQ(from_scrape, want);
    ASSERT_EQ(stats->counters.count(series), 1u);
    EXPECT_EQ(stats->counters.at(series), want);
    ASSERT_EQ(info_metrics.count(series), 1u);
    EXPECT_EQ(info_metrics.at(series), absl::StrCat(want));
  }
  // Every flat Stats key is an INFO line too: one snapshot, two renderings.
  for (const auto& [series, value] : stats->counters) EXPECT_EQ(info_metrics.count(series), 1u);
}

// The endpoint serves /metrics only, and --metrics_port is a real bind: a
// taken port is a start-up error, not a silently shared one.
TEST_F(MetricsTest, UnknownPathIs404AndPortInUseStopsStartup) {
  auto missing = HttpGet(server_->metrics_port(), "/nope");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("404"));
  // A second server on the first one's metrics port must refuse to start.
  auto second = KvServerProcess::Start({"--pool_size=64M", "--transport=tcp",
                                        absl::StrCat("--metrics_port=", server_->metrics_port())});
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("cannot serve metrics"));
}

}  // namespace
}  // namespace kvstore
