// Copyright 2026 The kvstore Authors.
//
// kvserver and an RDMA client on two machines, so RoCE packets cross a real
// (virtual) wire. Tagged "rdma-two-vm": tests/rxe/run-rdma-tests.sh --two-vm
// runs this binary in VM A with KV_RDMA_ROLE=server and in VM B with
// KV_RDMA_ROLE=client (tests/rxe/README.md).
//
//   server  starts kvserver --listen=0.0.0.0 --insecure --control_port=7300
//           --resp_port=6380 --transport=rdma --rdma_ip=$KV_RDMA_IP and keeps
//           it running until the client has stored the key "two-vm:done"
//           (at most ~4 min), then checks the server saw RDMA commits from a
//           remote queue pair and stops it cleanly.
//   client  retries $KV_RDMA_PEER_IP:7300 until it answers (90 s), then over
//           RDMA: round trips incl. a 1 MiB value, MultiPut/MultiGet of 100
//           keys, zero-copy PutFrom/GetInto, and a TCP client to the same
//           server seeing the RDMA writes (and the other way round).
//   (unset) both in this process against $KV_RDMA_IP, on free ports: the
//           same checks on one machine, for running it by hand.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

constexpr char kDoneKey[] = "two-vm:done";

std::string Env(const char* name, const char* def = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? v : def;
}

std::string Random(size_t n, uint64_t salt) {
  std::mt19937_64 rng(salt * 0x9e3779b97f4a7c15ull + 1);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// kvserver on every interface, its RDMA queue pairs on $KV_RDMA_IP's GID.
// The grace period is generous: a 1 MiB one-sided READ between two TCG VMs
// takes ~0.1 s, more than the default read span (250 ms) allows under load.
// --insecure: protected mode refuses 0.0.0.0 without a token or mutual TLS;
// the two VMs share a private link, and this test is about RoCE, not auth.
absl::StatusOr<KvServerProcess> StartServer(int control_port, int resp_port) {
  return KvServerProcess::Start(
      {"--listen=0.0.0.0", "--insecure", absl::StrCat("--control_port=", control_port),
       absl::StrCat("--resp_port=", resp_port), "--transport=rdma",
       "--rdma_ip=" + Env("KV_RDMA_IP"), "--rdma_device=" + Env("KV_RDMA_DEVICE"),
       "--pool_size=128M", "--grace_period=4s"});
}

std::unique_ptr<client::KvClient> ConnectWithRetry(const std::string& address,
                                                   client::TransportMode mode,
                                                   absl::Duration bound) {
  client::Options o;
  o.servers = {address};
  o.transport = mode;
  const absl::Time t0 = absl::Now();
  absl::Status last;
  for (int attempt = 1;; ++attempt) {
    auto c = client::KvClient::Connect(o);
    if (c.ok()) {
      std::printf("connected to %s (%s) after %.1f s, attempt %d\n", address.c_str(),
                  (*c)->transport_name().c_str(), absl::ToDoubleSeconds(absl::Now() - t0), attempt);
      return std::move(*c);
    }
    last = c.status();
    if (absl::Now() - t0 > bound) break;
    absl::SleepFor(absl::Seconds(1));
  }
  ADD_FAILURE() << "could not connect to " << address << " within " << bound << ": " << last;
  return nullptr;
}

// A Soft-RoCE/NIC port counter of $KV_RDMA_DEVICE (-1 if unreadable).
int64_t PortCounter(const std::string& name) {
  std::ifstream f(
      absl::StrCat("/sys/class/infiniband/", Env("KV_RDMA_DEVICE"), "/ports/1/hw_counters/", name));
  int64_t v = -1;
  if (!(f >> v)) return -1;
  return v;
}

// The client's checks against the server at `address` (host:control port).
void RunClient(const std::string& address) {
  const absl::Time t_start = absl::Now();
  const int64_t sent0 = PortCounter("sent_pkts"), rcvd0 = PortCounter("rcvd_pkts");
  auto rdma = ConnectWithRetry(address, client::TransportMode::kRdma, absl::Seconds(90));
  ASSERT_NE(rdma, nullptr);
  ASSERT_EQ(rdma->transport_name(), "rdma");
  auto tcp = ConnectWithRetry(address, client::TransportMode::kTcp, absl::Seconds(10));
  ASSERT_NE(tcp, nullptr);
  ASSERT_EQ(tcp->transport_name(), "tcp");
  // Whatever happens below, tell the server role it may stop.
  struct Done {
    client::KvClient* c;
    ~Done() { (void)c->Put(kDoneKey, ::testing::Test::HasFailure() ? "failed" : "passed"); }
  } done{tcp.get()};
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);

  // 1. Round trips.
  absl::Time t = absl::Now();
  const std::string bin_key("two\0vm", 6);
  const std::string small = Random(3000, seed + 1);
  ASSERT_TRUE(rdma->Put(bin_key, small).ok());
  auto got = rdma->Get(bin_key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == small);
  EXPECT_EQ(rdma->Get("two-vm:never").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(rdma->Put("two-vm:empty", "").ok());
  EXPECT_EQ(*rdma->Get("two-vm:empty"), "");
  ASSERT_TRUE(rdma->Delete("two-vm:empty").ok());
  EXPECT_FALSE(*rdma->Exists("two-vm:empty"));
  for (int i = 0; i < 20; ++i) {
    const std::string k = absl::StrCat("two-vm:rt:", i);
    const std::string v = Random(1 + i * 97, seed + 100 + i);
    ASSERT_TRUE(rdma->Put(k, v).ok()) << k;
    auto r = rdma->Get(k);
    ASSERT_TRUE(r.ok()) << k << " " << r.status();
    EXPECT_TRUE(*r == v) << k;
  }
  const std::string big = Random(1 << 20, seed + 2);
  ASSERT_TRUE(rdma->Put("two-vm:big", big).ok());
  auto big_got = rdma->Get("two-vm:big");
  ASSERT_TRUE(big_got.ok()) << big_got.status();
  EXPECT_EQ(big_got->size(), big.size());
  EXPECT_TRUE(*big_got == big);
  std::printf("round trips incl. 1 MiB: %.2f s\n", absl::ToDoubleSeconds(absl::Now() - t));

  // 2. MultiPut / MultiGet of 100 keys (plus one absent).
  t = absl::Now();
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> keys;
  for (int i = 0; i < 100; ++i) {
    pairs.emplace_back(absl::StrCat("two-vm:m:", i), Random(i * 41, seed + 1000 + i));
    keys.push_back(pairs.back().first);
  }
  keys.push_back("two-vm:m:absent");
  ASSERT_TRUE(rdma->MultiPut(pairs).ok());
  auto many = rdma->MultiGet(keys);
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_EQ(many->size(), 101u);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE((*many)[i].ok()) << i << " " << (*many)[i].status();
    EXPECT_TRUE(*(*many)[i] == pairs[i].second) << i;
  }
  EXPECT_EQ((*many)[100].status().code(), absl::StatusCode::kNotFound);
  std::printf("MultiPut + MultiGet of 100 keys: %.2f s\n", absl::ToDoubleSeconds(absl::Now() - t));

  // 3. Zero copy: PutFrom a registered buffer, GetInto another.
  t = absl::Now();
  const size_t n = 256 << 10;
  std::vector<char> src(n), dst(n + 4096, '#');
  const std::string pattern = Random(n, seed + 3);
  std::memcpy(src.data(), pattern.data(), n);
  auto rsrc = rdma->Register(src.data(), src.size());
  auto rdst = rdma->Register(dst.data(), dst.size());
  ASSERT_TRUE(rsrc.ok()) << rsrc.status();
  ASSERT_TRUE(rdst.ok()) << rdst.status();
  ASSERT_TRUE(rdma->PutFrom("two-vm:zc", *rsrc, 0, n).ok());
  auto len = rdma->GetInto("two-vm:zc", *rdst, 64, n + 100);
  ASSERT_TRUE(len.ok()) << len.status();
  EXPECT_EQ(*len, n);
  EXPECT_EQ(std::memcmp(dst.data() + 64, src.data(), n), 0);
  auto len2 = rdma->GetInto(bin_key, *rdst, 0, n);  // written by the copying Put
  ASSERT_TRUE(len2.ok()) << len2.status();
  EXPECT_EQ(std::string(dst.data(), *len2), small);
  std::printf("zero copy 256 KiB: %.2f s\n", absl::ToDoubleSeconds(absl::Now() - t));

  // 4. A TCP client on the same server sees the RDMA writes, and the other
  // way round.
  EXPECT_TRUE(*tcp->Get("two-vm:big") == big);
  EXPECT_TRUE(*tcp->Get(bin_key) == small);
  EXPECT_TRUE(*tcp->Get("two-vm:zc") == pattern);
  auto tmany = tcp->MultiGet(keys);
  ASSERT_TRUE(tmany.ok()) << tmany.status();
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(*(*tmany)[i] == pairs[i].second) << i;
  ASSERT_TRUE(tcp->Put("two-vm:from-tcp", "written over TCP").ok());
  EXPECT_EQ(*rdma->Get("two-vm:from-tcp"), "written over TCP");
  ASSERT_TRUE(tcp->Delete("two-vm:rt:0").ok());
  EXPECT_EQ(rdma->Get("two-vm:rt:0").status().code(), absl::StatusCode::kNotFound);

  const std::map<std::string, uint64_t> k = rdma->metrics();
  std::printf(
      "rdma client: rdma requests %lu tcp requests %lu checksum_retries %lu span_retries %lu "
      "server_fallback_gets %lu leases granted %lu released %lu renewed %lu reconnects %lu\n",
      RequestsOn(k, "rdma"), RequestsOn(k, "tcp"), ClientTotal(k, "checksum_retries"),
      ClientTotal(k, "span_retries"), ClientTotal(k, "server_fallback_gets"),
      ClientTotal(k, "leases_granted"), ClientTotal(k, "leases_released"),
      ClientTotal(k, "leases_renewed"), ClientTotal(k, "reconnects"));
  EXPECT_EQ(rdma->transport_name(), "rdma");
  EXPECT_EQ(RequestsOn(k, "tcp"), 0u);
  EXPECT_GT(RequestsOn(k, "rdma"), 250u);
  EXPECT_GT(ClientTotal(k, "leases_granted"), 0u);
  EXPECT_EQ(ClientTotal(k, "reconnects"), 0u);
  // Most GETs were one-sided: only a slow large read may go to the server.
  EXPECT_LE(ClientTotal(k, "server_fallback_gets"), 2u);
  auto stats = tcp->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::printf("server: rdma_connections_total %lu rdma_commits %lu rpc_gets %lu epoch %s\n",
              stats->counters["kvstore_rdma_connections_accepted_total"],
              stats->counters[R"(kvstore_server_requests_total{op="put",transport="rdma"})"],
              stats->counters[R"(kvstore_grpc_requests_total{method="Get"})"],
              stats->info["epoch"].c_str());
  EXPECT_GE(stats->counters[R"(kvstore_server_requests_total{op="put",transport="rdma"})"], 120u);
  // The data really went through this machine's RDMA port: a 1 MiB value
  // alone is ~1000 packets at Soft-RoCE's 1 KiB MTU, each way.
  const int64_t sent1 = PortCounter("sent_pkts"), rcvd1 = PortCounter("rcvd_pkts");
  if (sent0 >= 0 && rcvd0 >= 0 && sent1 >= 0 && rcvd1 >= 0) {
    std::printf("RoCE packets on %s port 1: sent %ld, received %ld\n",
                Env("KV_RDMA_DEVICE").c_str(), static_cast<long>(sent1 - sent0),
                static_cast<long>(rcvd1 - rcvd0));
    EXPECT_GT(sent1 - sent0, 1000);
    EXPECT_GT(rcvd1 - rcvd0, 1000);
  } else {
    std::printf("RoCE packet counters of %s not readable\n", Env("KV_RDMA_DEVICE").c_str());
  }
  std::printf("client checks took %.1f s\n", absl::ToDoubleSeconds(absl::Now() - t_start));
}

TEST(RdmaTwoVm, RdmaClientAndServerOnTwoMachines) {
  const std::string role = Env("KV_RDMA_ROLE");
  std::printf("role '%s', KV_RDMA_IP %s, KV_RDMA_PEER_IP %s, KV_RDMA_DEVICE %s\n", role.c_str(),
              Env("KV_RDMA_IP").c_str(), Env("KV_RDMA_PEER_IP").c_str(),
              Env("KV_RDMA_DEVICE").c_str());
  if (role == "client") {
    const std::string peer = Env("KV_RDMA_PEER_IP");
    ASSERT_FALSE(peer.empty()) << "KV_RDMA_PEER_IP is not set";
    RunClient(absl::StrCat(peer, ":7300"));
    return;
  }
  if (role == "server") {
    auto s = StartServer(7300, 6380);
    ASSERT_TRUE(s.ok()) << s.status();
    std::printf("kvserver up on 0.0.0.0:7300 (resp 6380), waiting for the client\n");
    std::fflush(stdout);
    auto local = ConnectWithRetry("127.0.0.1:7300", client::TransportMode::kTcp, absl::Seconds(10));
    ASSERT_NE(local, nullptr);
    const absl::Time deadline = absl::Now() + absl::Minutes(4);
    absl::StatusOr<std::string> done = absl::NotFoundError("");
    while (absl::Now() < deadline) {
      done = local->Get(kDoneKey);
      if (done.ok()) break;
      absl::SleepFor(absl::Milliseconds(500));
    }
    ASSERT_TRUE(done.ok()) << "the client never finished: " << done.status() << "\n" << s->Log();
    std::printf("client reports: %s\n", done->c_str());
    auto stats = local->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    std::printf("server: rdma_connections_total %lu rdma_commits %lu commits %lu rpc_gets %lu\n",
                stats->counters["kvstore_rdma_connections_accepted_total"],
                stats->counters[R"(kvstore_server_requests_total{op="put",transport="rdma"})"],
                stats->counters["kvstore_commits_total"],
                stats->counters[R"(kvstore_grpc_requests_total{method="Get"})"]);
    EXPECT_GE(stats->counters["kvstore_rdma_connections_accepted_total"], 1u);
    EXPECT_GT(stats->counters[R"(kvstore_server_requests_total{op="put",transport="rdma"})"], 0u);
    local.reset();
    EXPECT_EQ(s->Stop(), 0) << s->Log();
    return;
  }
  ASSERT_TRUE(role.empty()) << "KV_RDMA_ROLE must be server, client or unset, not " << role;
  // One machine: the server on free ports, the client through $KV_RDMA_IP.
  const std::string ip = Env("KV_RDMA_IP");
  ASSERT_FALSE(ip.empty()) << "KV_RDMA_IP is not set";
  auto s = StartServer(0, 0);
  ASSERT_TRUE(s.ok()) << s.status();
  RunClient(absl::StrCat(ip, ":", s->control_port()));
  if (::testing::Test::HasFailure()) std::printf("server log:\n%s\n", s->Log().c_str());
}

}  // namespace
}  // namespace kvstore
