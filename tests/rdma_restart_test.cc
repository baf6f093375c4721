// Copyright 2026 The kvstore Authors.
//
// An RDMA client across server restarts on the same ports: after the server
// is SIGKILLed and started again (new epoch, so new rkeys and a new index
// seed, and an empty store) the same KvClient object must never return the
// old values or wrong data for the old keys -- NOT_FOUND or an error only --
// and must reconnect over RDMA within a bounded time, after which Put/Get
// work again. The same after a clean stop and start while the client is idle.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace {

using ::kvstore::testing::KvServerProcess;
using ::kvstore::testing::RequestsOn;
using ::kvstore::testing::SeriesValue;

// kvstore_client_<name>_total in a client's metrics() (0 when absent).
uint64_t ClientTotal(const std::map<std::string, uint64_t>& m, const std::string& name) {
  return SeriesValue(m, "kvstore_client_" + name + "_total");
}

// The client's reconnects so far.
uint64_t Reconnects(const client::KvClient* c) { return ClientTotal(c->metrics(), "reconnects"); }

std::string DeviceFlag() {
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  return absl::StrCat("--rdma_device=", dev ? dev : "");
}

// A TCP port that was free a moment ago on 127.0.0.1.
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

class RdmaRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    std::printf("seed %u\n", seed_);
    control_port_ = FreePort();
    do resp_port_ = FreePort();
    while (resp_port_ == control_port_);
    ASSERT_NE(control_port_, 0);
    ASSERT_NE(resp_port_, 0);
    std::printf("ports: control %d, resp %d\n", control_port_, resp_port_);
  }

  // Starts kvserver on the fixed ports. KvServerProcess::Start puts
  // --control_port=0 --resp_port=0 first; later flags win, which the ready
  // file confirms.
  void StartServer() {
    const std::vector<std::string> flags = {absl::StrCat("--control_port=", control_port_),
                                            absl::StrCat("--resp_port=", resp_port_),
                                            "--pool_size=64M", "--transport=rdma", DeviceFlag()};
    const absl::Time t0 = absl::Now();
    auto s = KvServerProcess::Start(flags);
    ASSERT_TRUE(s.ok()) << s.status();
    server_.reset(new KvServerProcess(std::move(*s)));
    ASSERT_EQ(server_->control_port(), control_port_) << "a later --control_port did not win";
    ASSERT_EQ(server_->resp_port(), resp_port_) << "a later --resp_port did not win";
    std::printf("kvserver started on the same ports in %.2f s\n",
                absl::ToDoubleSeconds(absl::Now() - t0));
  }

  std::string Value(int i, int round) {
    std::mt19937_64 rng(seed_ ^ (static_cast<uint64_t>(round) << 32) ^ i);
    std::string v(100 + (rng() % 5000), '\0');
    for (auto& c : v) c = static_cast<char>(rng());
    return v;
  }

  std::string ServerEpoch(client::KvClient* c) {
    auto st = c->Stats();
    return st.ok() ? st->info["epoch"] : "?";
  }

  // Writes kKeys keys of round `round` over RDMA and reads them back.
  void WriteRound(client::KvClient* c, int round) {
    for (int i = 0; i < kKeys; ++i) {
      const std::string k = absl::StrCat("r", round, ":", i);
      absl::Status s = c->Put(k, Value(i, round));
      ASSERT_TRUE(s.ok()) << k << ": " << s;
    }
    for (int i = 0; i < kKeys; ++i) {
      const std::string k = absl::StrCat("r", round, ":", i);
      auto v = c->Get(k);
      ASSERT_TRUE(v.ok()) << k << ": " << v.status();
      ASSERT_TRUE(*v == Value(i, round)) << k;
    }
  }

  // After a restart: GETs of round `round`'s keys never return a value;
  // within `bound` the client has reconnected and answers NOT_FOUND for all
  // of them over RDMA. Returns the time that took.
  absl::Duration ExpectOldKeysGone(client::KvClient* c, int round, uint64_t reconnects_before,
                                   absl::Duration bound) {
    const absl::Time t0 = absl::Now();
    const absl::Time deadline = t0 + bound;
    int errors = 0;
    std::string first_error;
    for (int pass = 0;; ++pass) {
      int not_found = 0;
      for (int i = 0; i < kKeys; ++i) {
        const std::string k = absl::StrCat("r", round, ":", i);
        auto v = c->Get(k);
        if (v.ok()) {
          ADD_FAILURE() << k << " returned a " << v->size() << "-byte value after the restart"
                        << (*v == Value(i, round) ? " (the OLD value)" : " (wrong data)");
        } else if (v.status().code() == absl::StatusCode::kNotFound) {
          not_found++;
        } else {
          if (errors++ == 0) first_error = v.status().ToString();
        }
      }
      if (not_found == kKeys && Reconnects(c) > reconnects_before) break;
      if (absl::Now() > deadline) {
        ADD_FAILURE() << "no reconnect within " << bound << " (pass " << pass << ", reconnects "
                      << Reconnects(c) << ", errors " << errors << ", first " << first_error << ")";
        break;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    const absl::Duration took = absl::Now() - t0;
    std::printf("old keys: all NOT_FOUND after %.2f s; %d errors on the way%s%s\n",
                absl::ToDoubleSeconds(took), errors, errors ? ", first: " : "",
                first_error.c_str());
    // Batch and existence checks on the new path too.
    std::vector<std::string> keys;
    for (int i = 0; i < kKeys; ++i) keys.push_back(absl::StrCat("r", round, ":", i));
    auto many = c->MultiGet(keys);
    EXPECT_TRUE(many.ok()) << many.status();
    if (many.ok()) {
      for (const auto& r : *many) EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
    }
    auto e = c->Exists(keys[0]);
    EXPECT_TRUE(e.ok() && !*e);
    return took;
  }

  void PrintCounters(client::KvClient* c, const char* when) {
    const std::map<std::string, uint64_t> k = c->metrics();
    std::printf(
        "%s: transport %s, reconnects %lu, rdma requests %lu, tcp requests %lu, checksum_retries "
        "%lu, span_retries %lu, server_fallback_gets %lu, leases granted %lu released %lu renewed "
        "%lu aborts %lu\n",
        when, c->transport_name().c_str(), ClientTotal(k, "reconnects"), RequestsOn(k, "rdma"),
        RequestsOn(k, "tcp"), ClientTotal(k, "checksum_retries"), ClientTotal(k, "span_retries"),
        ClientTotal(k, "server_fallback_gets"), ClientTotal(k, "leases_granted"),
        ClientTotal(k, "leases_released"), ClientTotal(k, "leases_renewed"),
        ClientTotal(k, "lease_aborts"));
  }

  static constexpr int kKeys = 40;
  uint32_t seed_ = 0;
  int control_port_ = 0;
  int resp_port_ = 0;
  std::unique_ptr<KvServerProcess> server_;
};

TEST_F(RdmaRestart, SameClientAcrossKillAndCleanRestart) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  client::Options o;
  o.servers = {absl::StrCat("127.0.0.1:", control_port_)};
  o.transport = client::TransportMode::kRdma;
  auto cc = client::KvClient::Connect(o);
  ASSERT_TRUE(cc.ok()) << cc.status();
  client::KvClient* c = cc->get();
  ASSERT_EQ(c->transport_name(), "rdma");
  const std::string epoch1 = ServerEpoch(c);
  ASSERT_NO_FATAL_FAILURE(WriteRound(c, 1));
  PrintCounters(c, "before kill");

  // 1. SIGKILL: no cleanup at all; the client's queue pair now points at a
  // queue pair that no longer exists.
  server_->Kill();
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const absl::Duration t1 = ExpectOldKeysGone(c, 1, 0, absl::Seconds(60));
  const std::string epoch2 = ServerEpoch(c);
  std::printf("epoch %s -> %s\n", epoch1.c_str(), epoch2.c_str());
  EXPECT_NE(epoch1, epoch2);
  EXPECT_GE(Reconnects(c), 1u);
  EXPECT_EQ(c->transport_name(), "rdma");
  const uint64_t rdma_before = RequestsOn(c->metrics(), "rdma");
  ASSERT_NO_FATAL_FAILURE(WriteRound(c, 2));
  EXPECT_GE(RequestsOn(c->metrics(), "rdma"), rdma_before + 2 * kKeys);
  EXPECT_EQ(RequestsOn(c->metrics(), "tcp"), 0u);
  PrintCounters(c, "after kill + restart");

  // 2. A clean stop (SIGTERM: the server tears its queue pairs down) and a
  // start while the client is idle.
  const uint64_t reconnects = Reconnects(c);
  EXPECT_EQ(server_->Stop(), 0) << server_->Log();
  absl::SleepFor(absl::Milliseconds(500));
  ASSERT_NO_FATAL_FAILURE(StartServer());
  absl::SleepFor(absl::Milliseconds(500));
  const absl::Duration t2 = ExpectOldKeysGone(c, 2, reconnects, absl::Seconds(60));
  const std::string epoch3 = ServerEpoch(c);
  std::printf("epoch %s -> %s\n", epoch2.c_str(), epoch3.c_str());
  EXPECT_NE(epoch2, epoch3);
  EXPECT_GT(Reconnects(c), reconnects);
  EXPECT_EQ(c->transport_name(), "rdma");
  ASSERT_NO_FATAL_FAILURE(WriteRound(c, 3));
  EXPECT_EQ(RequestsOn(c->metrics(), "tcp"), 0u);
  PrintCounters(c, "after stop + start");
  std::printf("recovery: %.2f s after SIGKILL, %.2f s after a clean stop\n",
              absl::ToDoubleSeconds(t1), absl::ToDoubleSeconds(t2));
  if (HasFailure()) std::printf("server log:\n%s\n", server_->Log().c_str());
}

// A DELETE that never left the client (its path was already broken) is
// retried on the rebuilt path instead of failing with UNAVAILABLE.
TEST_F(RdmaRestart, DeleteOnABrokenPathIsRetriedAfterReconnect) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  client::Options o;
  o.servers = {absl::StrCat("127.0.0.1:", control_port_)};
  o.transport = client::TransportMode::kRdma;
  o.op_timeout = absl::Seconds(10);
  auto cc = client::KvClient::Connect(o);
  ASSERT_TRUE(cc.ok()) << cc.status();
  client::KvClient* c = cc->get();
  ASSERT_TRUE(c->Put("doomed", "x").ok());
  server_->Kill();
  // With the server down, this GET breaks the path and cannot rebuild it.
  EXPECT_FALSE(c->Get("doomed").ok());
  ASSERT_NO_FATAL_FAILURE(StartServer());
  // The path is broken; the DELETE is refused locally, the client
  // reconnects and sends it to the new server, which does not have the key.
  absl::Status d = c->Delete("doomed");
  EXPECT_EQ(d.code(), absl::StatusCode::kNotFound) << d;
  EXPECT_EQ(c->transport_name(), "rdma");
}

}  // namespace
}  // namespace kvstore
