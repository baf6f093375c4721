// Copyright 2026 The kvstore Authors.
//
// Client-side authentication end to end: KvClient and the kvctl binary with
// a token, TLS and mutual TLS.
//
// Two groups:
//   FakeControlAuth.*  kvctl and KvClient against an in-process gRPC server
//     of this test that plays a token-checking KvControl (and a RESP
//     listener that records what comes first). They prove what the client
//     does on its own: KvClient sends the token on both ports; kvctl reads
//     --token_file / $KVSTORE_TOKEN_FILE, sends the token, and exits 4 with
//     a one-line hint when refused.
//   ServerAuth.*  a real kvserver process (tests/test_cluster.h) started
//     with --auth_token_file, --tls_cert/--tls_key and --tls_client_ca:
//     token accepted and refused on both ports, TLS, mutual TLS. They need
//     the server's side of authentication (control plane and RESP AUTH).
//
// Test certificates: tests/testdata/tls (server certificate for 127.0.0.1).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_control.grpc.pb.h"
#include "tests/test_cluster.h"
#include "tests/testing/fake_resp_server.h"

namespace kvstore {
namespace {

using ::kvstore::testing::BinaryPath;
using ::kvstore::testing::FakeRespServer;
using ::kvstore::testing::KvServerProcess;
using ::kvstore::testing::ProcessResult;
using ::kvstore::testing::RunProcess;
using ::kvstore::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kToken[] = "client-auth-test-token-0123456789";
constexpr int kExitAuth = 4;  // kvctl's documented exit code (kvctl_io.h)

std::string TlsFile(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kvstore", "/tests/testdata/tls/",
                      name);
}

// Writes `content` to a file of mode 0600 under the test's temp dir.
std::string WriteSecretFile(const std::string& name, const std::string& content) {
  const std::string path = absl::StrCat(TempDir(), "/", name);
  std::ofstream(path, std::ios::trunc) << content << "\n";
  chmod(path.c_str(), 0600);
  return path;
}

// --- kvctl against a token-checking fake -------------------------------------

// Answers Handshake OK when the bearer token is kToken, UNAUTHENTICATED
// otherwise, and remembers the last authorization metadata it saw.
class TokenCheckingControl final : public v1::KvControl::Service {
 public:
  grpc::Status Handshake(grpc::ServerContext* c, const v1::HandshakeRequest*,
                         v1::HandshakeResponse* resp) override {
    std::string auth;
    auto it = c->client_metadata().find("authorization");
    if (it != c->client_metadata().end()) auth.assign(it->second.data(), it->second.size());
    {
      absl::MutexLock lock(&mu_);
      last_authorization_ = auth;
    }
    if (auth != absl::StrCat("Bearer ", kToken)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or invalid bearer token");
    }
    resp->set_session_id(1);
    absl::MutexLock lock(&mu_);
    if (resp_address_.empty()) {
      // No data endpoint: kvctl fails after the handshake, which is enough.
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake server: no data path");
    }
    resp->mutable_limits()->set_max_key_bytes(256);
    resp->mutable_limits()->set_max_value_bytes(1 << 20);
    resp->mutable_limits()->set_max_batch_keys(64);
    resp->mutable_endpoints()->set_resp_address(resp_address_);
    return grpc::Status::OK;
  }
  // Publishes `address` as the RESP data endpoint from now on.
  void set_resp_address(std::string address) {
    absl::MutexLock lock(&mu_);
    resp_address_ = std::move(address);
  }
  std::string last_authorization() {
    absl::MutexLock lock(&mu_);
    return last_authorization_;
  }

 private:
  absl::Mutex mu_;
  std::string last_authorization_ ABSL_GUARDED_BY(mu_);
  std::string resp_address_ ABSL_GUARDED_BY(mu_);
};

class FakeControlAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    unsetenv("KVSTORE_TOKEN_FILE");
  }
  void TearDown() override {
    unsetenv("KVSTORE_TOKEN_FILE");
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  ProcessResult Kvctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {BinaryPath("client/kvctl/kvctl"),
                                     absl::StrCat("--server=127.0.0.1:", port_), "--timeout=5s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }

  TokenCheckingControl service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// KvClient itself (no kvctl): Options::auth_token reaches both ports.
TEST_F(FakeControlAuth, KvClientSendsTheTokenOnBothPorts) {
  FakeRespServer resp;  // +OK to everything
  service_.set_resp_address(resp.address());
  client::Options o;
  o.servers = {absl::StrCat("127.0.0.1:", port_)};
  o.transport = client::TransportMode::kTcp;
  o.connections_per_server = 1;
  o.auth_token = kToken;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->Put("k", "v").ok());
  EXPECT_EQ(service_.last_authorization(), absl::StrCat("Bearer ", kToken));
  ASSERT_EQ(resp.first_commands().size(), 1u);
  EXPECT_EQ(resp.first_commands()[0], absl::StrCat("AUTH ", kToken));
}

TEST_F(FakeControlAuth, WithoutTokenExitsWithTheAuthCodeAndSaysHowToFixIt) {
  ProcessResult r = Kvctl({"get", "k"});
  EXPECT_EQ(r.exit_code, kExitAuth) << r.err;
  EXPECT_THAT(r.err, HasSubstr("kvctl: UNAUTHENTICATED: "));
  EXPECT_THAT(r.err, HasSubstr("server requires a token: pass --token_file"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  EXPECT_EQ(service_.last_authorization(), "");
}

TEST_F(FakeControlAuth, TokenFileIsSentAsBearer) {
  const std::string file = WriteSecretFile("kvctl-token", kToken);
  ProcessResult r = Kvctl({"--token_file=" + file, "get", "k"});
  EXPECT_EQ(service_.last_authorization(), absl::StrCat("Bearer ", kToken));
  // Past authentication: the fake then fails as an unreachable server would.
  EXPECT_EQ(r.exit_code, 3) << r.err;
}

TEST_F(FakeControlAuth, EnvironmentNamesTheTokenFile) {
  const std::string file = WriteSecretFile("kvctl-env-token", kToken);
  setenv("KVSTORE_TOKEN_FILE", file.c_str(), 1);
  ProcessResult r = Kvctl({"stat"});
  EXPECT_EQ(service_.last_authorization(), absl::StrCat("Bearer ", kToken));
  EXPECT_NE(r.exit_code, kExitAuth) << r.err;
}

TEST_F(FakeControlAuth, WrongTokenExitsWithTheAuthCode) {
  const std::string file = WriteSecretFile("kvctl-wrong-token", "this-is-not-the-token");
  ProcessResult r = Kvctl({"--token_file=" + file, "get", "k"});
  EXPECT_EQ(r.exit_code, kExitAuth) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the server refused the token"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  EXPECT_EQ(service_.last_authorization(), "Bearer this-is-not-the-token");
}

TEST_F(FakeControlAuth, UnreadableOrInvalidTokenFileIsAUsageErrorNamingIt) {
  ProcessResult r = Kvctl({"--token_file=/nonexistent/kvstore-token", "get", "k"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/kvstore-token"));
  const std::string short_file = WriteSecretFile("kvctl-short-token", "short");
  r = Kvctl({"--token_file=" + short_file, "get", "k"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(short_file));
  EXPECT_EQ(service_.last_authorization(), "") << "nothing may be dialled";
}

TEST_F(FakeControlAuth, TlsFlagCombinationsAreUsageErrors) {
  EXPECT_EQ(Kvctl({"--tls_cert=" + TlsFile("client.pem"), "get", "k"}).exit_code, 2);
  EXPECT_EQ(Kvctl({"--tls_server_name=localhost", "get", "k"}).exit_code, 2);
  ProcessResult r = Kvctl({"--tls_ca=/nonexistent/ca.pem", "get", "k"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/ca.pem"));
}

TEST_F(FakeControlAuth, HelpListsTheSecurityFlagsAndTheExitCode) {
  ProcessResult r = RunProcess({BinaryPath("client/kvctl/kvctl"), "--help"});
  ASSERT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--token-file=PATH", "--tls-ca=PATH", "--tls-cert=PATH", "--tls-key=PATH",
        "--tls-server-name=NAME", "KVSTORE_TOKEN_FILE", "  4  the server refused"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
}

// --- A real kvserver with authentication ----------------------------------------

class ServerAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ = WriteSecretFile("server-token", kToken);
    unsetenv("KVSTORE_TOKEN_FILE");
  }
  void TearDown() override {
    if (HasFailure() && server_) std::printf("server log:\n%s\n", server_->Log().c_str());
  }
  void StartServer(std::vector<std::string> extra) {
    std::vector<std::string> flags = {"--pool_size=64M", "--transport=tcp"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto s = KvServerProcess::Start(flags);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::make_unique<KvServerProcess>(std::move(*s));
  }
  client::Options BaseOptions() const {
    client::Options o;
    o.servers = {server_->control_address()};
    o.transport = client::TransportMode::kTcp;
    o.connect_timeout = absl::Seconds(5);
    o.op_timeout = absl::Seconds(5);
    return o;
  }
  ProcessResult Kvctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {BinaryPath("client/kvctl/kvctl"),
                                     "--server=" + server_->control_address(), "--timeout=5s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }

  std::string token_file_;
  std::unique_ptr<KvServerProcess> server_;
};

TEST_F(ServerAuth, TokenAcceptedOnBothPorts) {
  StartServer({"--auth_token_file=" + token_file_});
  client::Options o = BaseOptions();
  o.auth_token = kToken;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  // Put and Get travel the RESP port (AUTH first); Stats the gRPC port.
  ASSERT_TRUE((*c)->Put("k", "v").ok());
  auto v = (*c)->Get("k");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
  EXPECT_TRUE((*c)->Stats().ok());
}

TEST_F(ServerAuth, MissingOrWrongTokenRefused) {
  StartServer({"--auth_token_file=" + token_file_});
  auto none = client::KvClient::Connect(BaseOptions());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated) << none.status();
  client::Options wrong = BaseOptions();
  wrong.auth_token = "0123456789-not-the-server-token";
  auto refused = client::KvClient::Connect(wrong);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated) << refused.status();
}

TEST_F(ServerAuth, KvctlExitCodes) {
  StartServer({"--auth_token_file=" + token_file_});
  ProcessResult r = Kvctl({"put", "k", "v"});
  EXPECT_EQ(r.exit_code, kExitAuth) << r.err;
  EXPECT_THAT(r.err, HasSubstr("pass --token_file"));
  r = Kvctl({"--token_file=" + token_file_, "--transport=tcp", "put", "k", "v"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Kvctl({"--token_file=" + token_file_, "--transport=tcp", "get", "k"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "v");
}

TEST_F(ServerAuth, TlsWorksAndPlaintextDoesNot) {
  StartServer({"--tls_cert=" + TlsFile("server.pem"), "--tls_key=" + TlsFile("server.key")});
  client::Options o = BaseOptions();
  o.tls_ca_file = TlsFile("ca.pem");
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Put("k", "v").ok());
  EXPECT_TRUE((*c)->Stats().ok());
  // The same server through plaintext, or trusting another CA: no handshake.
  EXPECT_FALSE(client::KvClient::Connect(BaseOptions()).ok());
  client::Options other = BaseOptions();
  other.tls_ca_file = TlsFile("other-ca.pem");
  EXPECT_FALSE(client::KvClient::Connect(other).ok());
  // kvctl with --tls_ca.
  ProcessResult r = Kvctl({"--tls_ca=" + TlsFile("ca.pem"), "--transport=tcp", "get", "k"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(ServerAuth, MutualTlsRefusesAClientWithoutCertificate) {
  StartServer({"--tls_cert=" + TlsFile("server.pem"), "--tls_key=" + TlsFile("server.key"),
               "--tls_client_ca=" + TlsFile("ca.pem")});
  client::Options anonymous = BaseOptions();
  anonymous.tls_ca_file = TlsFile("ca.pem");
  EXPECT_FALSE(client::KvClient::Connect(anonymous).ok());
  client::Options known = anonymous;
  known.tls_cert_file = TlsFile("client.pem");
  known.tls_key_file = TlsFile("client.key");
  auto c = client::KvClient::Connect(known);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->Put("k", "v").ok());
  ProcessResult r = Kvctl({"--tls_ca=" + TlsFile("ca.pem"), "--tls_cert=" + TlsFile("client.pem"),
                           "--tls_key=" + TlsFile("client.key"), "--transport=tcp", "get", "k"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace kvstore
