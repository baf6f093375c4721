// Copyright 2026 The kvstore Authors.
//
// Server-side security of a whole KvServer (in process, TCP only): TLS and
// mutual TLS on the control port, the bearer token wired from
// KvServerOptions, protected mode, and the gRPC message cap. The TLS
// material is tests/testdata/tls (server certificate for 127.0.0.1).

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/auth/token.h"
#include "common/metrics/exposition.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "proto/kv_control.grpc.pb.h"
#include "server/kv_server.h"
#include "tests/test_cluster.h"
#include "tests/testing/counting_relay.h"

namespace kvstore {
namespace server {
namespace {

namespace pb = ::kvstore::v1;
using ::testing::HasSubstr;

constexpr char kTls[] = "tests/testdata/tls/";
const char kToken[] = "auth-test-token-0123456789";

std::string Tls(const char* name) { return absl::StrCat(kTls, name); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << path;
  return s.str();
}

KvServerOptions SmallServer() {
  KvServerOptions o;
  o.control_port = 0;
  o.resp_port = 0;
  o.pool_bytes = 16ull << 20;
  o.segment_bytes = 1ull << 20;
  o.transport = ServerTransport::kTcp;
  return o;
}

// Handshake over `creds`; the status (with a deadline, so a channel that
// cannot connect fails instead of waiting).
grpc::Status Handshake(int port, std::shared_ptr<grpc::ChannelCredentials> creds,
                       const std::string& token = "", pb::HandshakeResponse* out = nullptr) {
  auto stub = pb::KvControl::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (!token.empty()) ctx.AddMetadata("authorization", auth::BearerHeader(token));
  pb::HandshakeResponse resp;
  grpc::Status s = stub->Handshake(&ctx, pb::HandshakeRequest(), &resp);
  if (out != nullptr) *out = resp;
  return s;
}

std::shared_ptr<grpc::ChannelCredentials> SslCreds(const char* ca, const char* cert = nullptr,
                                                   const char* key = nullptr) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ReadFile(Tls(ca));
  if (cert != nullptr) {
    o.pem_cert_chain = ReadFile(Tls(cert));
    o.pem_private_key = ReadFile(Tls(key));
  }
  return grpc::SslCredentials(o);
}

TEST(AuthTest, ControlPortServesTls) {
  KvServerOptions o = SmallServer();
  o.tls_cert_file = Tls("server.pem");
  o.tls_key_file = Tls("server.key");
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->control_port();
  EXPECT_TRUE(Handshake(port, SslCreds("ca.pem")).ok());
  // Plaintext gets nowhere, and neither does a client that trusts another CA.
  EXPECT_FALSE(Handshake(port, grpc::InsecureChannelCredentials()).ok());
  EXPECT_FALSE(Handshake(port, SslCreds("other-ca.pem")).ok());
}

TEST(AuthTest, MutualTlsNeedsAClientCertificateFromTheClientCa) {
  KvServerOptions o = SmallServer();
  o.tls_cert_file = Tls("server.pem");
  o.tls_key_file = Tls("server.key");
  o.tls_client_ca_file = Tls("ca.pem");
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->control_port();
  EXPECT_FALSE(Handshake(port, SslCreds("ca.pem")).ok()) << "no client certificate";
  EXPECT_FALSE(Handshake(port, grpc::InsecureChannelCredentials()).ok());
  grpc::Status s = Handshake(port, SslCreds("ca.pem", "client.pem", "client.key"));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST(AuthTest, BadTlsConfigurationStopsStartUp) {
  KvServerOptions o = SmallServer();
  o.tls_cert_file = Tls("server.pem");
  auto server = KvServer::Start(o);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("--tls_cert and --tls_key go together"));

  o.tls_key_file = Tls("no-such.key");
  server = KvServer::Start(o);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("no-such.key"));

  o = SmallServer();
  o.tls_client_ca_file = Tls("ca.pem");
  server = KvServer::Start(o);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("--tls_client_ca needs --tls_cert"));
}

TEST(AuthTest, TokenFromOptionsGuardsTheControlPort) {
  KvServerOptions o = SmallServer();
  o.auth_token = kToken;
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->control_port();
  auto insecure = grpc::InsecureChannelCredentials();
  pb::HandshakeResponse resp;
  grpc::Status s = Handshake(port, insecure, "", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(resp.index().seed(), 0u);
  s = Handshake(port, insecure, "auth-test-token-wrong-token", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  s = Handshake(port, insecure, kToken, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(resp.session_id(), 0u);
  EXPECT_EQ(resp.epoch(), (*server)->epoch());
  const auto flat = metrics::FlattenSnapshot((*server)->registry().TakeSnapshot());
  EXPECT_EQ(flat.at("kvstore_grpc_auth_failures_total"), 2u);
  EXPECT_EQ(flat.at("kvstore_sessions_opened_total"), 1u);

  // A token that could never be a token file's is refused at start.
  o.auth_token = "short";
  EXPECT_EQ(KvServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AuthTest, ProtectedModeRefusesAnUnguardedPublicListener) {
  for (const char* address : {"0.0.0.0", "::"}) {
    KvServerOptions o = SmallServer();
    o.listen_address = address;
    auto server = KvServer::Start(o);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition) << address;
    for (const char* hint : {"--auth_token_file", "--tls_client_ca", "--insecure"}) {
      EXPECT_THAT(server.status().message(), HasSubstr(hint)) << address;
    }
    // TLS without client certificates authenticates the server only.
    o.tls_cert_file = Tls("server.pem");
    o.tls_key_file = Tls("server.key");
    EXPECT_EQ(KvServer::Start(o).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  // Each guard, or --insecure, lets it start (bound to all interfaces: the
  // test connects over loopback).
  KvServerOptions o = SmallServer();
  o.listen_address = "0.0.0.0";
  o.auth_token = kToken;
  EXPECT_TRUE(KvServer::Start(o).ok());
  // Mutual TLS guards only the control port; the RESP port would stay open,
  // so without the token it is still refused.
  o = SmallServer();
  o.listen_address = "0.0.0.0";
  o.tls_cert_file = Tls("server.pem");
  o.tls_key_file = Tls("server.key");
  o.tls_client_ca_file = Tls("ca.pem");
  EXPECT_EQ(KvServer::Start(o).status().code(), absl::StatusCode::kFailedPrecondition);
  o.auth_token = kToken;
  EXPECT_TRUE(KvServer::Start(o).ok());
  o = SmallServer();
  o.listen_address = "0.0.0.0";
  o.insecure = true;
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(Handshake((*server)->control_port(), grpc::InsecureChannelCredentials()).ok());
}

TEST(AuthTest, LoopbackAddresses) {
  for (const char* a : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a :
       {"0.0.0.0", "::", "10.0.0.1", "192.168.1.5", "::ffff:10.0.0.1", "example.com", ""}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

// Finding 6: the largest message the control port accepts follows the value
// limit (plus the key limit and headroom), not a blanket size.
TEST(AuthTest, ReceiveCapFollowsTheValueLimit) {
  KvServerOptions o = SmallServer();
  o.limits.max_value_bytes = 64 << 10;
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::KvControl::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->control_port()), grpc::InsecureChannelCredentials()));
  auto put = [&stub](size_t bytes) {
    grpc::ClientContext ctx;
    pb::PutRequest req;
    req.set_key("k");
    req.set_value(std::string(bytes, 'v'));
    pb::PutResponse resp;
    return stub->Put(&ctx, req, &resp);
  };
  EXPECT_TRUE(put(64 << 10).ok());
  // Over the limit but inside the cap: the store's own answer.
  EXPECT_EQ(put((64 << 10) + 1).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Far over: gRPC refuses the message before the handler sees it.
  grpc::Status s = put(1 << 20);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
}

// The memory quota must hold the largest messages: with 1 MiB a 3 MiB Put
// had its stream reset (measured), so such a configuration does not start.
TEST(AuthTest, GrpcMemoryQuotaMustHoldTheLargestMessages) {
  KvServerOptions o = SmallServer();
  o.limits.max_value_bytes = 4 << 20;
  o.grpc_memory_bytes = 1 << 20;
  auto server = KvServer::Start(o);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("--grpc_memory"));
  // Enough for two: a largest Put goes through, with two handler threads.
  o.grpc_memory_bytes = 9 << 20;
  o.grpc_max_threads = 2;
  server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::KvControl::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->control_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  pb::PutRequest req;
  req.set_key("k");
  req.set_value(std::string(4 << 20, 'v'));
  pb::PutResponse resp;
  grpc::Status s = stub->Put(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// The token is checked on a call's metadata, before its body is read: an
// unauthenticated 32 MiB Put is refused after the server let in no more
// than a flow-control window of it. The same Put with the token is read
// whole through the same relay, which shows the relay counts what the
// server reads. Over plaintext and over TLS (the two credential paths).
TEST(AuthTest, UnauthenticatedUploadIsRefusedBeforeItsBodyIsRead) {
  for (bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "tls" : "plaintext");
    KvServerOptions o = SmallServer();
    o.pool_bytes = 128ull << 20;
    o.auth_token = kToken;
    if (tls) {
      o.tls_cert_file = Tls("server.pem");
      o.tls_key_file = Tls("server.key");
    }
    auto server = KvServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    testing::CountingRelay relay((*server)->control_port());
    auto creds = tls ? SslCreds("ca.pem") : grpc::InsecureChannelCredentials();
    auto stub = pb::KvControl::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", relay.port()), creds));
    constexpr uint64_t kValue = 32ull << 20;
    auto put = [&stub](const std::string& token) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      if (!token.empty()) ctx.AddMetadata("authorization", auth::BearerHeader(token));
      pb::PutRequest req;
      req.set_key("big");
      req.set_value(std::string(kValue, 'v'));
      pb::PutResponse resp;
      return stub->Put(&ctx, req, &resp);
    };
    grpc::Status s = put("");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("missing bearer token"));
    s = put("auth-test-token-wrong-token");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    // Each refused call may have let in one stream window (gRPC's BDP probe
    // grows it to a few MiB on loopback), far less than its 32 MiB body.
    const uint64_t refused_bytes = relay.client_bytes();
    std::printf("%s: the server let in %lu bytes of two refused 32 MiB uploads\n",
                tls ? "tls" : "plaintext", static_cast<unsigned long>(refused_bytes));
    EXPECT_LT(refused_bytes, kValue) << "the server read the unauthenticated bodies";
    const auto flat = metrics::FlattenSnapshot((*server)->registry().TakeSnapshot());
    EXPECT_EQ(flat.at("kvstore_grpc_auth_failures_total"), 2u);

    s = put(kToken);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_GE(relay.client_bytes() - refused_bytes, kValue);
  }
}

// What a refused call costs the server is one HTTP/2 stream window of its
// body, and that window is fixed (16 KiB by default): gRPC's BDP probe
// would grow it, on loopback to megabytes, after a few bulk calls on the
// same connection. Twenty refused 8 MiB uploads in a row on one connection
// let in at most twenty windows (plus headers); an admitted 16 MiB Put on
// that connection still goes through whole.
TEST(AuthTest, EachRefusedUploadLetsInAtMostOneFixedStreamWindow) {
  constexpr uint64_t kDefaultWindow = 16 << 10;  // KvServerOptions' default
  constexpr uint64_t kHeaderSlack = 4 << 10;     // HEADERS and frame headers of one call
  constexpr int kCalls = 20;
  KvServerOptions o = SmallServer();
  o.pool_bytes = 64ull << 20;
  o.auth_token = kToken;
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  testing::CountingRelay relay((*server)->control_port());
  auto stub = pb::KvControl::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", relay.port()),
                                                         grpc::InsecureChannelCredentials()));
  auto put = [&stub](const std::string& token, uint64_t bytes) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    if (!token.empty()) ctx.AddMetadata("authorization", auth::BearerHeader(token));
    pb::PutRequest req;
    req.set_key("big");
    req.set_value(std::string(bytes, 'v'));
    pb::PutResponse resp;
    return stub->Put(&ctx, req, &resp);
  };
  ASSERT_TRUE(put(kToken, 1).ok());  // connected: the count below is the uploads'
  const uint64_t before = relay.client_bytes();
  for (int i = 0; i < kCalls; ++i) {
    grpc::Status s = put("", 8ull << 20);
    ASSERT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  }
  const uint64_t refused = relay.client_bytes() - before;
  std::printf("the server let in %lu bytes of %d refused 8 MiB uploads (%lu per call)\n",
              static_cast<unsigned long>(refused), kCalls,
              static_cast<unsigned long>(refused / kCalls));
  EXPECT_LE(refused, kCalls * (kDefaultWindow + kHeaderSlack));

  const uint64_t admitted_before = relay.client_bytes();
  grpc::Status s = put(kToken, 16ull << 20);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(relay.client_bytes() - admitted_before, 16ull << 20);
}

// A call without a known credential is refused --auth_failure_delay late
// (over plaintext and over TLS, the two credential paths), so a stranger
// calling in a loop gets a few refusals a second instead of thousands; a
// known principal's refusal (PERMISSION_DENIED) is not held back, nor is
// anything with a delay of zero. Only lower bounds on time are checked: a
// loaded machine can make an answer late, never early.
TEST(AuthTest, RefusalsOfUnknownCredentialsAreSentLate) {
  constexpr absl::Duration kDelay = absl::Milliseconds(400);
  for (bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "tls" : "plaintext");
    KvServerOptions o = SmallServer();
    o.auth_token = kToken;
    o.users.push_back(auth::User{"reader", auth::Role::kRead, "auth-test-reader-secret-012345"});
    o.auth_failure_delay = kDelay;
    if (tls) {
      o.tls_cert_file = Tls("server.pem");
      o.tls_key_file = Tls("server.key");
    }
    auto server = KvServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    auto creds = tls ? SslCreds("ca.pem") : grpc::InsecureChannelCredentials();
    auto stub = pb::KvControl::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->control_port()), creds));
    auto put = [&stub](const std::string& token, absl::Duration* took) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      if (!token.empty()) ctx.AddMetadata("authorization", auth::BearerHeader(token));
      pb::PutRequest req;
      req.set_key("k");
      req.set_value("v");
      pb::PutResponse resp;
      const absl::Time start = absl::Now();
      grpc::Status s = stub->Put(&ctx, req, &resp);
      *took = absl::Now() - start;
      return s;
    };
    absl::Duration took;
    ASSERT_TRUE(put(kToken, &took).ok());  // connected: what follows is the check's time
    grpc::Status s = put("", &took);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("missing bearer token"));
    EXPECT_GE(took, kDelay);
    s = put("auth-test-token-wrong-token", &took);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_GE(took, kDelay);
    s = put("auth-test-reader-secret-012345", &took);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
    const auto flat = metrics::FlattenSnapshot((*server)->registry().TakeSnapshot());
    EXPECT_EQ(flat.at("kvstore_grpc_auth_failures_delayed_total"), 2u);
    EXPECT_EQ(flat.at("kvstore_grpc_auth_failures_undelayed_total"), 0u);
    EXPECT_EQ(flat.at("kvstore_grpc_auth_failures_total"), 2u);
  }
  KvServerOptions o = SmallServer();
  o.auth_token = kToken;
  o.auth_failure_delay = absl::ZeroDuration();
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Handshake((*server)->control_port(), grpc::InsecureChannelCredentials()).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  const auto flat = metrics::FlattenSnapshot((*server)->registry().TakeSnapshot());
  EXPECT_EQ(flat.at("kvstore_grpc_auth_failures_total"), 1u);
  EXPECT_EQ(flat.at("kvstore_grpc_auth_failures_delayed_total"), 0u);
}

// A server that stops sends the refusals it holds at once: a client waiting
// for one is told UNAUTHENTICATED, and the server's shutdown (which waits
// for the calls) does not wait out the delay.
TEST(AuthTest, StoppingTheServerSendsHeldRefusalsAtOnce) {
  KvServerOptions o = SmallServer();
  o.auth_token = kToken;
  o.auth_failure_delay = absl::Hours(1);
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->control_port();
  grpc::Status refused;
  std::thread client([&] {
    auto stub = pb::KvControl::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;  // a deadline far beyond any wait below
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    pb::HandshakeResponse resp;
    refused = stub->Handshake(&ctx, pb::HandshakeRequest(), &resp);
  });
  ASSERT_TRUE(testing::Eventually([&] {
    const auto flat = metrics::FlattenSnapshot((*server)->registry().TakeSnapshot());
    return flat.at("kvstore_grpc_auth_failures_delayed_total") == 1;
  }));
  server->reset();
  client.join();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
}

// The early check applies the services' own rule, not only "some known
// secret": a read-only user's 32 MiB Put is refused (PERMISSION_DENIED)
// before its body is read, and the admin token, which the services accept,
// passes it as well as the data token does.
TEST(AuthTest, TheEarlyCheckRefusesWhatTheRoleMayNotCallAndAdmitsEveryPrincipal) {
  KvServerOptions o = SmallServer();
  o.pool_bytes = 128ull << 20;
  o.auth_token = kToken;
  o.admin_token = "auth-test-admin-token-0123456789";
  o.users.push_back(auth::User{"reader", auth::Role::kRead, "auth-test-reader-secret-012345"});
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  testing::CountingRelay relay((*server)->control_port());
  auto stub = pb::KvControl::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", relay.port()),
                                                         grpc::InsecureChannelCredentials()));
  constexpr uint64_t kValue = 32ull << 20;
  auto put = [&stub](const std::string& token, const std::string& key) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    ctx.AddMetadata("authorization", auth::BearerHeader(token));
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(std::string(kValue, 'v'));
    pb::PutResponse resp;
    return stub->Put(&ctx, req, &resp);
  };
  grpc::Status s = put("auth-test-reader-secret-012345", "r");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("reader"));
  const uint64_t refused_bytes = relay.client_bytes();
  std::printf("the server let in %lu bytes of a read-only user's 32 MiB Put\n",
              static_cast<unsigned long>(refused_bytes));
  EXPECT_LT(refused_bytes, kValue / 2) << "the server read the refused body";

  s = put("auth-test-admin-token-0123456789", "a");
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = put(kToken, "d");
  EXPECT_TRUE(s.ok()) << s.error_message();
  const auto flat = metrics::FlattenSnapshot((*server)->registry().TakeSnapshot());
  EXPECT_EQ(flat.at("kvstore_grpc_permission_denied_total"), 1u);
  EXPECT_EQ(flat.at("kvstore_grpc_auth_failures_total"), 0u);
}

// Health checks answer without the token (orchestrators probe with no
// credentials); the early token check lets them through.
TEST(AuthTest, HealthCheckNeedsNoToken) {
  KvServerOptions o = SmallServer();
  o.auth_token = kToken;
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::GenericStub stub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->control_port()),
                                             grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::CompletionQueue cq;
  grpc::ByteBuffer request;  // an empty HealthCheckRequest: the overall status
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_TRUE(status.ok()) << status.error_message();
  // HealthCheckResponse{status: SERVING} is field 1, varint 1.
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& slice : slices)
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

// The kvserver flags: a bad token file stops start-up naming the file;
// protected mode names the flags that fix it; a good token file is used.
TEST(AuthTest, KvserverSecurityFlags) {
  const std::string kvserver = testing::BinaryPath("server/kvserver");
  const std::string dir = testing::TempDir();
  const std::string short_token = dir + "/short-token";
  { std::ofstream(short_token) << "short\n"; }
  testing::ProcessResult r =
      testing::RunProcess({kvserver, "--control_port=0", "--resp_port=0", "--transport=tcp",
                           "--pool_size=16M", "--auth_token_file=" + short_token});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--auth_token_file"));
  EXPECT_THAT(r.err, HasSubstr(short_token));
  r = testing::RunProcess({kvserver, "--control_port=0", "--resp_port=0", "--transport=tcp",
                           "--pool_size=16M", "--auth_token_file=" + dir + "/absent"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(dir + "/absent"));
  r = testing::RunProcess({kvserver, "--control_port=0", "--resp_port=0", "--transport=tcp",
                           "--pool_size=16M", "--listen=0.0.0.0"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("protected mode"));
  EXPECT_THAT(r.err, HasSubstr("--auth_token_file"));

  const std::string token_file = dir + "/token";
  { std::ofstream(token_file) << kToken << "\n"; }
  auto server =
      testing::KvServerProcess::Start({"--transport=tcp", "--pool_size=16M", "--listen=0.0.0.0",
                                       "--auth_token_file=" + token_file});
  ASSERT_TRUE(server.ok()) << server.status();
  auto insecure = grpc::InsecureChannelCredentials();
  EXPECT_EQ(Handshake(server->control_port(), insecure).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Handshake(server->control_port(), insecure, kToken).ok());
}

}  // namespace
}  // namespace server
}  // namespace kvstore
