// Copyright 2026 The kvstore Authors.
//
// ControlClient against an in-process gRPC server that plays KvControl: it
// records the metadata and requests each call brings and answers with a
// status the test chooses. Proves, without the real kvserver, what the client
// puts on the wire (bearer token, session id), how it reports a refusal, that
// its option checks fail early, and that TLS and mutual TLS really run with
// the test certificates of tests/testdata/tls.

#include "common/control/control_client.h"

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/cluster/refusal.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace control {
namespace {

constexpr char kToken[] = "0123456789abcdef-test-token";

// The path of a test file shipped as a data dependency.
std::string TestFile(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kvstore", "/tests/testdata/tls/",
                      name);
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What one call brought: its method, the authorization metadata (empty when
// absent) and, for scoped calls, the epoch and session of the request.
struct Seen {
  std::string method;
  std::string authorization;
  uint64_t epoch = 0;
  uint64_t session_id = 0;
};

// KvControl that records every call and answers `reply` (OK by default).
class RecordingControl final : public v1::KvControl::Service {
 public:
  std::vector<Seen> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  void set_reply(grpc::Status s) {
    absl::MutexLock lock(&mu_);
    reply_ = std::move(s);
  }

  grpc::Status Handshake(grpc::ServerContext* c, const v1::HandshakeRequest*,
                         v1::HandshakeResponse* resp) override {
    resp->set_session_id(42);
    return Record(c, "Handshake", 0, 0);
  }
  grpc::Status Scan(grpc::ServerContext* c, const v1::ScanRequest*, v1::ScanResponse*) override {
    return Record(c, "Scan", 0, 0);
  }
  grpc::Status Stats(grpc::ServerContext* c, const v1::StatsRequest*, v1::StatsResponse*) override {
    return Record(c, "Stats", 0, 0);
  }
  grpc::Status Get(grpc::ServerContext* c, const v1::GetRequest*, v1::GetResponse*) override {
    return Record(c, "Get", 0, 0);
  }
  grpc::Status ConnectQp(grpc::ServerContext* c, const v1::ConnectQpRequest* r,
                         v1::ConnectQpResponse*) override {
    return Record(c, "ConnectQp", r->epoch(), r->session_id());
  }
  grpc::Status DisconnectQp(grpc::ServerContext* c, const v1::DisconnectQpRequest* r,
                            v1::DisconnectQpResponse*) override {
    return Record(c, "DisconnectQp", r->epoch(), r->session_id());
  }
  grpc::Status GrantLease(grpc::ServerContext* c, const v1::GrantLeaseRequest* r,
                          v1::GrantLeaseResponse*) override {
    return Record(c, "GrantLease", r->epoch(), r->session_id());
  }
  grpc::Status RenewLease(grpc::ServerContext* c, const v1::RenewLeaseRequest* r,
                          v1::RenewLeaseResponse*) override {
    return Record(c, "RenewLease", r->epoch(), r->session_id());
  }
  grpc::Status ReleaseLease(grpc::ServerContext* c, const v1::ReleaseLeaseRequest* r,
                            v1::ReleaseLeaseResponse*) override {
    return Record(c, "ReleaseLease", r->epoch(), r->session_id());
  }

 private:
  grpc::Status Record(grpc::ServerContext* c, const char* method, uint64_t epoch,
                      uint64_t session) {
    Seen s{method, "", epoch, session};
    auto it = c->client_metadata().find("authorization");
    if (it != c->client_metadata().end())
      s.authorization.assign(it->second.data(), it->second.size());
    absl::MutexLock lock(&mu_);
    seen_.push_back(s);
    return reply_;
  }

  absl::Mutex mu_;
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
  grpc::Status reply_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
};

// A RecordingControl served on 127.0.0.1 with `creds` (plaintext when null).
class FakeServer {
 public:
  explicit FakeServer(std::shared_ptr<grpc::ServerCredentials> creds = nullptr) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", creds ? creds : grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    EXPECT_NE(server_, nullptr);
    EXPECT_GT(port_, 0);
  }
  ~FakeServer() { server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1))); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  RecordingControl& service() { return service_; }

 private:
  RecordingControl service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// TLS server credentials with the test server certificate; when
// `require_client_cert`, clients must present one signed by the test CA.
std::shared_ptr<grpc::ServerCredentials> TlsServerCreds(bool require_client_cert) {
  grpc::SslServerCredentialsOptions opts(
      require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  opts.pem_key_cert_pairs.push_back(
      {ReadFileOrDie(TestFile("server.key")), ReadFileOrDie(TestFile("server.pem"))});
  if (require_client_cert) opts.pem_root_certs = ReadFileOrDie(TestFile("ca.pem"));
  return grpc::SslServerCredentials(opts);
}

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

std::unique_ptr<ControlClient> DialOrDie(const std::string& address, const ControlSecurity& sec) {
  auto c = ControlClient::Dial(address, sec);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// Every kind of call the client makes, once.
void CallEverything(ControlClient& c, const SessionScope& scope) {
  (void)c.Handshake("test", false, Soon());
  (void)c.Scan(0, 10, "", Soon());
  (void)c.Stats(Soon());
  (void)c.Get("k", Soon());
  (void)c.ConnectQp(scope, v1::ConnectQpRequest(), Soon());
  (void)c.DisconnectQp(scope, 1, Soon());
  (void)c.GrantLease(scope, 4096, "test", 1, Soon());
  (void)c.RenewLease(scope, 2, 1, Soon());
  (void)c.ReleaseLease(scope, 2, 1, Soon());
}

TEST(ControlClient, EveryCallCarriesTheBearerToken) {
  FakeServer server;
  ControlSecurity sec;
  sec.auth_token = kToken;
  auto c = DialOrDie(server.address(), sec);
  ASSERT_NE(c, nullptr);
  CallEverything(*c, {7, 42});
  const std::vector<Seen> seen = server.service().seen();
  ASSERT_EQ(seen.size(), 9u);
  for (const Seen& s : seen) {
    EXPECT_EQ(s.authorization, absl::StrCat("Bearer ", kToken)) << s.method;
  }
}

TEST(ControlClient, NoTokenNoAuthorizationMetadata) {
  FakeServer server;
  auto c = DialOrDie(server.address(), {});
  ASSERT_NE(c, nullptr);
  CallEverything(*c, {7, 42});
  const std::vector<Seen> seen = server.service().seen();
  ASSERT_EQ(seen.size(), 9u);
  for (const Seen& s : seen) EXPECT_EQ(s.authorization, "") << s.method;
}

TEST(ControlClient, ScopedCallsCarryEpochAndSession) {
  FakeServer server;
  auto c = DialOrDie(server.address(), {});
  ASSERT_NE(c, nullptr);
  CallEverything(*c, {7, 0xfeedface12345678});
  int scoped = 0;
  for (const Seen& s : server.service().seen()) {
    if (s.method == "Handshake" || s.method == "Scan" || s.method == "Stats" || s.method == "Get") {
      continue;
    }
    ++scoped;
    EXPECT_EQ(s.epoch, 7u) << s.method;
    EXPECT_EQ(s.session_id, 0xfeedface12345678u) << s.method;
  }
  EXPECT_EQ(scoped, 5);
}

TEST(ControlClient, UnauthenticatedKeepsTheServersMessage) {
  FakeServer server;
  server.service().set_reply(
      grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong bearer token"));
  auto c = DialOrDie(server.address(), {});
  ASSERT_NE(c, nullptr);
  auto hs = c->Handshake("test", false, Soon());
  EXPECT_EQ(hs.status(), absl::UnauthenticatedError("missing or wrong bearer token"));
  EXPECT_TRUE(IsSessionLost(c->RenewLease({1, 2}, 3, 4, Soon())));
}

TEST(ControlClient, IsSessionLostClassifies) {
  EXPECT_TRUE(IsSessionLost(absl::UnauthenticatedError("anything")));
  // The server's refusal (server/control), typed, and as it crosses gRPC.
  const absl::Status lost = cluster::ToStatus(cluster::Refusal::SessionLost(
      "no live session 77 (expired or never opened): handshake again"));
  EXPECT_TRUE(IsSessionLost(lost));
  EXPECT_TRUE(IsSessionLost(FromGrpcStatus(ToGrpcStatus(lost))));
  // Words alone are not read any more.
  EXPECT_FALSE(IsSessionLost(absl::FailedPreconditionError(
      "no live session 77 (expired or never opened): handshake again")));
  // A restarted server is not a lost session: UNAVAILABLE breaks the path.
  EXPECT_FALSE(IsSessionLost(cluster::ToStatus(cluster::Refusal::StaleServerEpoch("x"))));
  // Refusals another handshake would not cure.
  EXPECT_FALSE(IsSessionLost(absl::FailedPreconditionError(
      "a lease needs an RDMA connection of this session: ConnectQp first")));
  EXPECT_FALSE(IsSessionLost(absl::FailedPreconditionError("lease has no write key")));
  EXPECT_FALSE(IsSessionLost(
      absl::PermissionDeniedError("RDMA connection 3 does not belong to this session")));
  EXPECT_FALSE(IsSessionLost(absl::UnavailableError("stale epoch")));
  EXPECT_FALSE(IsSessionLost(absl::AbortedError("lease expired")));
  EXPECT_FALSE(IsSessionLost(absl::OkStatus()));
}

// --- Option checks: all before any connection ----------------------------------

absl::Status DialStatus(const ControlSecurity& sec) {
  return ControlClient::Dial("127.0.0.1:1", sec).status();
}

TEST(ControlClientOptions, CertificateAndKeyGoTogether) {
  ControlSecurity sec;
  sec.tls_ca_file = TestFile("ca.pem");
  sec.tls_cert_file = TestFile("client.pem");
  absl::Status s = DialStatus(sec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "tls_key_file")) << s;
  sec.tls_cert_file.clear();
  sec.tls_key_file = TestFile("client.key");
  EXPECT_EQ(DialStatus(sec).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ControlClientOptions, ClientCertificateAndServerNameNeedACa) {
  ControlSecurity sec;
  sec.tls_cert_file = TestFile("client.pem");
  sec.tls_key_file = TestFile("client.key");
  EXPECT_EQ(DialStatus(sec).code(), absl::StatusCode::kInvalidArgument);
  ControlSecurity name_only;
  name_only.tls_server_name = "localhost";
  EXPECT_EQ(DialStatus(name_only).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ControlClientOptions, UnreadableOrNonPemFilesAreNamed) {
  ControlSecurity sec;
  sec.tls_ca_file = TestFile("no-such-ca.pem");
  absl::Status s = DialStatus(sec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "no-such-ca.pem")) << s;

  // A file that exists but is not PEM.
  const char* tmp = std::getenv("TEST_TMPDIR");
  sec.tls_ca_file = absl::StrCat(tmp ? tmp : "/tmp", "/not-a-cert.txt");
  std::ofstream(sec.tls_ca_file) << "just text\n";
  s = DialStatus(sec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "not-a-cert.txt holds no PEM")) << s;

  sec.tls_ca_file = TestFile("ca.pem");
  sec.tls_cert_file = TestFile("client.pem");
  sec.tls_key_file = TestFile("missing.key");
  s = DialStatus(sec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "missing.key")) << s;
}

TEST(ControlClientOptions, BadTokenIsRefusedWithoutEchoingIt) {
  ControlSecurity sec;
  sec.auth_token = "short-secret";
  absl::Status s = DialStatus(sec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_FALSE(absl::StrContains(s.message(), "short-secret")) << s;
  sec.auth_token = "0123456789abcdef 0123456789";  // whitespace cannot travel
  EXPECT_EQ(DialStatus(sec).code(), absl::StatusCode::kInvalidArgument);
}

// --- TLS with the test certificates -------------------------------------------

TEST(ControlClientTls, TrustedServerCertificateWorks) {
  FakeServer server(TlsServerCreds(false));
  ControlSecurity sec;
  sec.tls_ca_file = TestFile("ca.pem");
  sec.auth_token = kToken;
  auto c = DialOrDie(server.address(), sec);
  ASSERT_NE(c, nullptr);
  auto hs = c->Handshake("test", false, Soon());
  ASSERT_TRUE(hs.ok()) << hs.status();
  EXPECT_EQ(hs->session_id(), 42u);
  ASSERT_EQ(server.service().seen().size(), 1u);
  EXPECT_EQ(server.service().seen()[0].authorization, absl::StrCat("Bearer ", kToken));
}

TEST(ControlClientTls, UntrustedServerCertificateIsRefused) {
  FakeServer server(TlsServerCreds(false));
  ControlSecurity sec;
  sec.tls_ca_file = TestFile("other-ca.pem");
  auto c = DialOrDie(server.address(), sec);
  ASSERT_NE(c, nullptr);
  auto hs = c->Handshake("test", false, absl::Now() + absl::Seconds(2));
  EXPECT_FALSE(hs.ok());
  EXPECT_TRUE(server.service().seen().empty());
}

TEST(ControlClientTls, ServerNameOverrideIsWhatTheCertificateIsCheckedAgainst) {
  FakeServer server(TlsServerCreds(false));
  ControlSecurity sec;
  sec.tls_ca_file = TestFile("ca.pem");
  sec.tls_server_name = "localhost";  // in the certificate
  auto good = DialOrDie(server.address(), sec);
  ASSERT_NE(good, nullptr);
  EXPECT_TRUE(good->Handshake("test", false, Soon()).ok());
  sec.tls_server_name = "not-this-server.example";  // not in it
  auto bad = DialOrDie(server.address(), sec);
  ASSERT_NE(bad, nullptr);
  EXPECT_FALSE(bad->Handshake("test", false, absl::Now() + absl::Seconds(2)).ok());
}

TEST(ControlClientTls, MutualTlsNeedsTheClientCertificate) {
  FakeServer server(TlsServerCreds(true));
  ControlSecurity sec;
  sec.tls_ca_file = TestFile("ca.pem");
  auto anonymous = DialOrDie(server.address(), sec);
  ASSERT_NE(anonymous, nullptr);
  EXPECT_FALSE(anonymous->Handshake("test", false, absl::Now() + absl::Seconds(2)).ok());
  EXPECT_TRUE(server.service().seen().empty());

  sec.tls_cert_file = TestFile("client.pem");
  sec.tls_key_file = TestFile("client.key");
  auto known = DialOrDie(server.address(), sec);
  ASSERT_NE(known, nullptr);
  auto hs = known->Handshake("test", false, Soon());
  EXPECT_TRUE(hs.ok()) << hs.status();
}

}  // namespace
}  // namespace control
}  // namespace kvstore
