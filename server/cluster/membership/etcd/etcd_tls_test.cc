// Copyright 2026 The kvstore Authors.
//
// The gRPC EtcdClient against a real etcd serving TLS with client
// certificates required (--client-cert-auth) and, in the second half,
// etcd authentication on (users, roles, `auth enable`, set up with
// etcdctl). Test certificates: tests/testdata/tls (node.pem names
// 127.0.0.1 and serves as etcd's certificate).

#include <signal.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/membership/etcd/etcd_client.h"
#include "tests/cluster/etcd_process.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace server {
namespace etcd {
namespace {

using ::kvstore::testing::Eventually;
using ::testing::HasSubstr;

std::string TlsFile(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kvstore", "/tests/testdata/tls/",
                      name);
}

class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::EtcdMemberOptions o;
    o.tls_cert = TlsFile("node.pem");
    o.tls_key = TlsFile("node.key");
    o.tls_ca = TlsFile("ca.pem");
    etcd_ = std::make_unique<testing::EtcdProcess>(o);
    absl::Status s = etcd_->Start();
    ASSERT_TRUE(s.ok()) << s;
  }

  EtcdOptions Tls() const {
    EtcdOptions o;
    o.endpoints = {"https://" + etcd_->endpoint()};
    o.ca_file = TlsFile("ca.pem");
    o.cert_file = TlsFile("client.pem");
    o.key_file = TlsFile("client.key");
    return o;
  }

  // etcdctl over TLS with the client certificate (and `user` when set).
  testing::ProcessResult Etcdctl(std::vector<std::string> args, const std::string& user = "") {
    std::vector<std::string> argv = {
        "etcdctl", "--endpoints=https://" + etcd_->endpoint(), "--cacert=" + TlsFile("ca.pem"),
        "--cert=" + TlsFile("client.pem"), "--key=" + TlsFile("client.key")};
    if (!user.empty()) argv.push_back("--user=" + user);
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunProcess(argv, "", 20);
  }

  // Users root and kv (read-write on /kvstore/ only), then auth on.
  void EnableAuth() {
    for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
             {"user", "add", "root:rootpass", "--interactive=false"},
             {"user", "add", "kv:kvpass", "--interactive=false"},
             {"role", "add", "kvrole"},
             {"role", "grant-permission", "kvrole", "--prefix=true", "readwrite", "/kvstore/"},
             {"user", "grant-role", "kv", "kvrole"},
             {"auth", "enable"}}) {
      testing::ProcessResult r = Etcdctl(cmd);
      ASSERT_EQ(r.exit_code, 0) << cmd[0] << " " << cmd[1] << ": " << r.out << r.err;
    }
  }

  std::unique_ptr<testing::EtcdProcess> etcd_;
};

TEST_F(EtcdTlsTest, ClientCertificateAndCaWork) {
  auto c = EtcdClient::Connect(Tls());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Put("/kvstore/t/k", "v").ok());
  auto got = (*c)->Get("/kvstore/t/k");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->value, "v");
  // A watch runs over the same TLS channel.
  int64_t revision = 0;
  ASSERT_TRUE((*c)->GetPrefix("/kvstore/t/", &revision).ok());
  auto w = (*c)->Watch("/kvstore/t/", revision + 1, [](auto) {});
  EXPECT_TRUE(w.ok()) << w.status();
}

TEST_F(EtcdTlsTest, WithoutClientCertificateOrTlsEtcdRefuses) {
  EtcdOptions no_cert = Tls();
  no_cert.cert_file.clear();
  no_cert.key_file.clear();
  EXPECT_TRUE(absl::IsUnavailable(EtcdClient::Connect(no_cert).status()));

  EtcdOptions plaintext;
  plaintext.endpoints = {etcd_->endpoint()};
  EXPECT_TRUE(absl::IsUnavailable(EtcdClient::Connect(plaintext).status()));

  EtcdOptions other_ca = Tls();
  other_ca.ca_file = TlsFile("other-ca.pem");
  EXPECT_TRUE(absl::IsUnavailable(EtcdClient::Connect(other_ca).status()));

  // etcdctl, as a second opinion on what etcd itself refuses.
  testing::ProcessResult r = testing::RunProcess(
      {"etcdctl", "--endpoints=https://" + etcd_->endpoint(), "--cacert=" + TlsFile("ca.pem"),
       "--dial-timeout=2s", "--command-timeout=3s", "get", "x"},
      "", 20);
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(EtcdTlsTest, HalfAKeyPairOrAnHttpsEndpointWithoutCaIsAUsageError) {
  EtcdOptions half = Tls();
  half.key_file.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(EtcdClient::Connect(half).status()));
  EtcdOptions https;
  https.endpoints = {"https://" + etcd_->endpoint()};
  auto s = EtcdClient::Connect(https).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--etcd_ca"));
}

TEST_F(EtcdTlsTest, AuthenticatesAndRefreshesItsToken) {
  EnableAuth();
  EtcdOptions o = Tls();
  o.user = "kv";
  o.password = "kvpass";
  auto c = EtcdClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Put("/kvstore/a/k", "v1").ok());
  auto lease = (*c)->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE((*c)->KeepAliveOnce(*lease).ok());

  // Outside the role's prefix: refused by etcd's permissions.
  EXPECT_FALSE((*c)->Put("/other/k", "v").ok());

  // etcd keeps its (simple) tokens in memory: after a restart every token
  // it issued is unknown ("invalid auth token"). The client authenticates
  // again on its own and the write goes through once etcd answers.
  ASSERT_EQ(etcd_->Stop(), -SIGTERM);
  ASSERT_TRUE(etcd_->Start().ok());
  absl::Status last;
  EXPECT_TRUE(Eventually(
      [&] {
        last = (*c)->Put("/kvstore/a/k", "v2").status();
        return !absl::IsUnavailable(last);
      },
      absl::Seconds(60), absl::Milliseconds(50)));
  EXPECT_TRUE(last.ok()) << last;
  auto got = (*c)->Get("/kvstore/a/k");
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->value, "v2");
}

TEST_F(EtcdTlsTest, WrongPasswordOrNoUserIsRefused) {
  EnableAuth();
  EtcdOptions wrong = Tls();
  wrong.user = "kv";
  wrong.password = "not-the-password";
  absl::Status s = EtcdClient::Connect(wrong).status();
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--etcd_password_file"));

  // TLS alone, no user: etcd takes the certificate's name as the user,
  // which has no permission on the cluster's keys.
  auto anonymous = EtcdClient::Connect(Tls());
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  EXPECT_FALSE((*anonymous)->Put("/kvstore/a/k", "v").ok());
}

}  // namespace
}  // namespace etcd
}  // namespace server
}  // namespace kvstore
