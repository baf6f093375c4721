// Copyright 2026 The kvstore Authors.
//
// Session ownership over real queue pairs and lease write keys
// (requires-rdma): one session cannot end another's queue pair or lease,
// a lease needs a queue pair of the caller's session, every queue pair has
// a probe word, the per-session queue-pair quota holds, and a dead client's
// session expires and gives its leases back.

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

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

// A test-only TLS file: from the runfiles under bazel test, else from the
// source tree (the VM runs the binaries from the workspace root).
std::string TlsFile(const std::string& name) {
  const std::string rel = "tests/testdata/tls/" + name;
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr) {
    const std::string p = absl::StrCat(srcdir, "/", ws ? ws : "kvstore", "/", rel);
    if (access(p.c_str(), R_OK) == 0) return p;
  }
  return rel;
}

class RdmaAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dev = std::getenv("KV_RDMA_DEVICE");
    auto s = KvServerProcess::Start({"--pool_size=64M", "--segment_size=1M", "--transport=rdma",
                                     "--lease_ttl=2s", "--rdma_idle_probe=1s", "--session_ttl=1s",
                                     "--session_max_qps=2",
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

  std::unique_ptr<KvServerProcess> server_;
  std::unique_ptr<client::KvClient> tcp_;
};

// Finding 5: DisconnectQp names a connection id, a small counter anyone can
// guess; only the session that made the queue pair may end it.
TEST_F(RdmaAuth, AnotherSessionCannotDisconnectAQueuePair) {
  auto a = Raw();
  auto b = Raw();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  absl::Status s = b->DisconnectQp(a->connection_id());
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  // A's queue pair still works: a lease is bound on it and written through.
  auto lease = a->Grant(64 << 10);
  ASSERT_TRUE(lease.ok()) << lease.status();
  const std::string entry = Entry("a-key", "a-value");
  ASSERT_TRUE(a->Write(lease->write_addr(), lease->write_rkey(), entry).ok());
  ASSERT_TRUE(a->Commit(lease->lease_id(), lease->arena_offset(), entry.size()).ok());
  EXPECT_EQ(*tcp_->Get("a-key"), "a-value");
  EXPECT_TRUE(a->DisconnectQp(a->connection_id()).ok());
}

// Finding 2 with real write keys: another session can neither release nor
// renew a lease, whichever connection it names; the chunk stays A's.
TEST_F(RdmaAuth, AnotherSessionCannotReleaseOrRenewALease) {
  auto a = Raw();
  auto b = Raw();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto lease = a->Grant(64 << 10);
  ASSERT_TRUE(lease.ok()) << lease.status();
  for (uint64_t conn : {b->connection_id(), a->connection_id(), uint64_t{0}}) {
    EXPECT_EQ(b->ReleaseAs(lease->lease_id(), conn).code(), absl::StatusCode::kPermissionDenied)
        << conn;
    EXPECT_EQ(b->RenewAs(lease->lease_id(), conn).code(), absl::StatusCode::kPermissionDenied)
        << conn;
  }
  const std::string entry = Entry("still-a", "yes");
  ASSERT_TRUE(a->Write(lease->write_addr(), lease->write_rkey(), entry).ok());
  ASSERT_TRUE(a->Commit(lease->lease_id(), lease->arena_offset(), entry.size()).ok());
  EXPECT_EQ(*tcp_->Get("still-a"), "yes");
  EXPECT_TRUE(a->Release(lease->lease_id()).ok());
}

// Finding 3: no lease without a queue pair of the caller's session; a dozen
// tries pin nothing.
TEST_F(RdmaAuth, NoLeaseWithoutAQueuePairOfTheSession) {
  auto a = Raw();
  auto b = Raw();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  for (int i = 0; i < 12; ++i) {
    for (uint64_t conn : {uint64_t{0}, a->connection_id()}) {
      v1::GrantLeaseRequest req;
      req.set_epoch(b->handshake().epoch());
      req.set_session_id(b->session_id());
      req.set_connection_id(conn);
      req.set_bytes(48 << 20);
      v1::GrantLeaseResponse resp;
      grpc::ClientContext ctx;
      grpc::Status s = b->stub()->GrantLease(&ctx, req, &resp);
      EXPECT_EQ(s.error_code(), conn == 0 ? grpc::StatusCode::FAILED_PRECONDITION
                                          : grpc::StatusCode::PERMISSION_DENIED)
          << s.error_message();
    }
  }
  EXPECT_EQ(Counter("kvstore_leases_granted_total"), 0u);
}

// Finding 5: a queue pair without a probe word would never be probed or
// reaped; ConnectQp refuses it. And a session holds at most
// --session_max_qps queue pairs.
TEST_F(RdmaAuth, ConnectQpNeedsAProbeWordAndRespectsTheQuota) {
  auto a = Raw();
  ASSERT_NE(a, nullptr);
  v1::ConnectQpRequest req;
  req.set_epoch(a->handshake().epoch());
  req.set_session_id(a->session_id());
  req.mutable_client()->set_qpn(1234);
  req.mutable_client()->set_gid(std::string(16, '\1'));
  v1::ConnectQpResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = a->stub()->ConnectQp(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("probe"));
  }
  // One queue pair so far; a second is allowed, a third is not.
  ASSERT_TRUE(a->Reconnect().ok());
  absl::Status third = a->Reconnect();
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted) << third;
}

// A dead client: its lease expires, its idle queue pair fails a probe and
// is reaped, and then its session expires.
TEST_F(RdmaAuth, DeadClientsSessionExpires) {
  auto a = Raw();
  auto b = Raw();  // stays alive: its session must survive
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->Grant(64 << 10).ok());
  const uint64_t dead_session = a->session_id();
  const uint64_t epoch = a->handshake().epoch();
  a.reset();  // its queue pair is destroyed without DisconnectQp
  // Any RPC naming a session keeps it alive, so it is asked only once,
  // after the queue pair was reaped and the TTL (1 s) and a sweep passed.
  const absl::Time end = absl::Now() + absl::Seconds(20);
  while (Counter("kvstore_rdma_connections_reaped_total") < 1 && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_GE(Counter("kvstore_rdma_connections_reaped_total"), 1u);
  absl::SleepFor(absl::Milliseconds(2500));
  v1::RenewLeaseRequest req;
  req.set_epoch(epoch);
  req.set_session_id(dead_session);
  v1::RenewLeaseResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = b->stub()->RenewLease(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("handshake again"));
  EXPECT_EQ(Counter("kvstore_leases_active"), 0u);
  // B's queue pair is live: its session is too, and it can still lease.
  auto lease = b->Grant(64 << 10);
  EXPECT_TRUE(lease.ok()) << lease.status();
}

// The must-show of the security issue over RDMA: a server with a token and
// TLS serves a KvClient that has both over one-sided GETs and WRITE+commit
// PUTs; without the token the client gets UNAUTHENTICATED and no keys.
TEST(RdmaAuthToken, TokenAndTlsWorkOverRdmaAndNothingWithoutThem) {
  const std::string token = "rdma-auth-test-token-0123456789abcdef";
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string token_file = absl::StrCat(tmp ? tmp : "/tmp", "/rdma_auth_token");
  std::ofstream(token_file) << token << "\n";
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  auto s = KvServerProcess::Start({"--pool_size=64M", "--segment_size=1M", "--transport=rdma",
                                   absl::StrCat("--auth_token_file=", token_file),
                                   absl::StrCat("--tls_cert=", TlsFile("server.pem")),
                                   absl::StrCat("--tls_key=", TlsFile("server.key")),
                                   absl::StrCat("--rdma_device=", dev ? dev : "")});
  ASSERT_TRUE(s.ok()) << s.status();
  client::Options o;
  o.servers = {s->control_address()};
  o.transport = client::TransportMode::kRdma;
  o.tls_ca_file = TlsFile("ca.pem");
  o.auth_token = token;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status() << "\n" << s->Log();
  EXPECT_EQ((*c)->transport_name(), "rdma");
  const std::string big(200 << 10, 'b');
  ASSERT_TRUE((*c)->Put("small", "v").ok());
  ASSERT_TRUE((*c)->Put("big", big).ok());
  EXPECT_EQ(*(*c)->Get("small"), "v");
  EXPECT_EQ(*(*c)->Get("big"), big);
  auto stats = (*c)->metrics();
  EXPECT_GT(::kvstore::testing::RequestsOn(stats, "rdma"), 0u);

  o.auth_token.clear();
  auto anon = client::KvClient::Connect(o);
  ASSERT_FALSE(anon.ok());
  EXPECT_EQ(anon.status().code(), absl::StatusCode::kUnauthenticated) << anon.status();
  o.auth_token = "wrong-token-0123456789abcdef";
  auto wrong = client::KvClient::Connect(o);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated) << wrong.status();
}

}  // namespace
}  // namespace kvstore
