// Copyright 2026 The kvstore Authors.
//
// The RESP port over TLS (--resp_tls_port) against a real kvserver, with
// real third-party and own clients: `redis-cli --tls`, kvctl and the client
// library over the TCP data path. Plaintext clients, clients without the CA
// and (with --tls_client_ca) clients without a certificate are refused;
// the plaintext port is off. Renewed certificate files are picked up by
// both ports without a restart.
//
// Test certificates: tests/testdata/tls; the renewal makes a fresh CA and
// certificate with the openssl CLI.

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "resp-tls-test-token-0123456789";

std::string TlsFile(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kvstore", "/tests/testdata/tls/",
                      name);
}

class RespTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(TempDir(), "/resp_tls");
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    token_file_ = dir_ + "/token";
    std::ofstream(token_file_) << kToken << "\n";
  }

  void StartServer(std::vector<std::string> flags) {
    flags.push_back("--auth_token_file=" + token_file_);
    flags.push_back("--resp_tls_port=0");
    flags.push_back("--transport=tcp");
    flags.push_back("--pool_size=64M");
    auto s = KvServerProcess::Start(flags);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::make_unique<KvServerProcess>(std::move(*s));
  }

  // redis-cli on the TLS port; `tls_args` e.g. {"--tls", "--cacert", CA}.
  ProcessResult RedisCli(std::vector<std::string> tls_args, std::vector<std::string> command) {
    std::vector<std::string> argv = {
        "redis-cli", "-h",   "127.0.0.1",        "-p", absl::StrCat(server_->resp_tls_port()),
        "-a",        kToken, "--no-auth-warning"};
    argv.insert(argv.end(), tls_args.begin(), tls_args.end());
    argv.insert(argv.end(), command.begin(), command.end());
    return RunProcess(argv, "", 20);
  }

  ProcessResult Kvctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {BinaryPath("client/kvctl/kvctl"),
                                     "--server=" + server_->control_address(), "--timeout=5s",
                                     "--token_file=" + token_file_, "--transport=tcp"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, "", 20);
  }

  std::string dir_;
  std::string token_file_;
  std::unique_ptr<KvServerProcess> server_;
};

TEST_F(RespTlsTest, RedisCliKvctlAndTheClientLibraryWorkOverTls) {
  StartServer({"--tls_cert=" + TlsFile("server.pem"), "--tls_key=" + TlsFile("server.key")});
  ASSERT_GT(server_->resp_tls_port(), 0);
  // TLS asked for: no plaintext RESP port.
  EXPECT_EQ(server_->resp_port(), -1);

  ProcessResult r = RedisCli({"--tls", "--cacert", TlsFile("ca.pem")}, {"set", "k", "v1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("OK"));
  r = RedisCli({"--tls", "--cacert", TlsFile("ca.pem")}, {"get", "k"});
  EXPECT_EQ(r.out, "v1\n") << r.err;
  // CLIENT INFO shows the TLS client's addresses, not the socketpair's the
  // loops serve it on.
  r = RedisCli({"--tls", "--cacert", TlsFile("ca.pem")}, {"client", "info"});
  EXPECT_THAT(r.out, HasSubstr(" addr=127.0.0.1:")) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(" laddr=127.0.0.1:", server_->resp_tls_port(), " ")));

  // kvctl: the handshake says the RESP port is TLS; --tls_ca verifies it.
  r = Kvctl({"--tls_ca=" + TlsFile("ca.pem"), "get", "k"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "v1");
  r = Kvctl({"--tls_ca=" + TlsFile("ca.pem"), "put", "k2", "v2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // The library, with several pipelined connections and a value larger
  // than the bridge's buffers.
  client::Options o;
  o.servers = {server_->control_address()};
  o.transport = client::TransportMode::kTcp;
  o.auth_token = kToken;
  o.tls_ca_file = TlsFile("ca.pem");
  o.connections_per_server = 3;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string big(1 << 20, 'x');
  ASSERT_TRUE((*c)->Put("big", big).ok());
  auto got = (*c)->Get("big");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, big);
  got = (*c)->Get("k2");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v2");
}

TEST_F(RespTlsTest, PlaintextOrUntrustingClientsAreRefused) {
  StartServer({"--tls_cert=" + TlsFile("server.pem"), "--tls_key=" + TlsFile("server.key")});
  // Plaintext RESP to the TLS port: no reply is ever a RESP reply.
  ProcessResult r = RedisCli({}, {"ping"});
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("PONG")));
  // TLS, but trusting another CA.
  r = RedisCli({"--tls", "--cacert", TlsFile("other-ca.pem")}, {"ping"});
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("PONG")));
  EXPECT_NE(r.exit_code, 0);
  // kvctl without --tls_ca is told what is missing.
  r = Kvctl({"get", "k"});
  EXPECT_NE(r.exit_code, 0);
  // The library: with the wrong CA, no data path.
  client::Options o;
  o.servers = {server_->control_address()};
  o.transport = client::TransportMode::kTcp;
  o.auth_token = kToken;
  o.tls_ca_file = TlsFile("other-ca.pem");
  o.connect_timeout = absl::Seconds(2);
  auto c = client::KvClient::Connect(o);
  EXPECT_FALSE(c.ok() && (*c)->Put("k", "v").ok());
}

TEST_F(RespTlsTest, MutualTlsNeedsAClientCertificate) {
  StartServer({"--tls_cert=" + TlsFile("server.pem"), "--tls_key=" + TlsFile("server.key"),
               "--tls_client_ca=" + TlsFile("ca.pem")});
  ProcessResult r = RedisCli({"--tls", "--cacert", TlsFile("ca.pem")}, {"ping"});
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("PONG")));
  r = RedisCli({"--tls", "--cacert", TlsFile("ca.pem"), "--cert", TlsFile("client.pem"), "--key",
                TlsFile("client.key")},
               {"ping"});
  EXPECT_EQ(r.out, "PONG\n") << r.err;
  r = Kvctl({"--tls_ca=" + TlsFile("ca.pem"), "--tls_cert=" + TlsFile("client.pem"),
             "--tls_key=" + TlsFile("client.key"), "put", "k", "v"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A renewed certificate (here from a new CA, so that which one is served
// is visible) is used by new connections on both ports, without a restart.
TEST_F(RespTlsTest, RenewedCertificateFilesArePickedUp) {
  const std::string cert = dir_ + "/cert.pem";
  const std::string key = dir_ + "/key.pem";
  std::filesystem::copy_file(TlsFile("server.pem"), cert);
  std::filesystem::copy_file(TlsFile("server.key"), key);
  StartServer({"--tls_cert=" + cert, "--tls_key=" + key, "--tls_reload_interval=1s"});
  ProcessResult r = RedisCli({"--tls", "--cacert", TlsFile("ca.pem")}, {"ping"});
  ASSERT_EQ(r.out, "PONG\n") << r.err;

  // A new CA and a certificate it signed, written next to the old files
  // and renamed over them (the key first: a pair that does not match is
  // not loaded, and the next change is tried again).
  const std::string sh = absl::StrCat(
      "set -e; cd ", dir_,
      "; openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=renewed CA' "
      "-keyout new-ca.key -out new-ca.pem 2>/dev/null; "
      "openssl req -newkey rsa:2048 -nodes -subj '/CN=localhost' -keyout new.key -out new.csr "
      "2>/dev/null; printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext; "
      "openssl x509 -req -in new.csr -CA new-ca.pem -CAkey new-ca.key -CAcreateserial -days 2 "
      "-extfile ext -out new.pem 2>/dev/null; mv new.key key.pem; mv new.pem cert.pem");
  r = RunProcess({"/bin/sh", "-c", sh}, "", 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string new_ca = dir_ + "/new-ca.pem";

  // RESP: the files are looked at on every accepted connection.
  EXPECT_TRUE(Eventually(
      [&] {
        return RedisCli({"--tls", "--cacert", new_ca}, {"ping"}).out == "PONG\n";
      },
      absl::Seconds(60), absl::Milliseconds(200)));
  r = RedisCli({"--tls", "--cacert", TlsFile("ca.pem")}, {"ping"});
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("PONG")));
  // gRPC: within --tls_reload_interval.
  EXPECT_TRUE(Eventually(
      [&] {
        return Kvctl({"--tls_ca=" + new_ca, "put", "k", "v"}).exit_code == 0;
      },
      absl::Seconds(60), absl::Milliseconds(200)))
      << Kvctl({"--tls_ca=" + new_ca, "put", "k", "v"}).err;
  // SIGHUP re-reads them too (and the server keeps serving).
  server_->Signal(SIGHUP);
  EXPECT_TRUE(Eventually(
      [&] {
        return RedisCli({"--tls", "--cacert", new_ca}, {"ping"}).out == "PONG\n";
      },
      absl::Seconds(60), absl::Milliseconds(200)));
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
