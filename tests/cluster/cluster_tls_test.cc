// Copyright 2026 The kvstore Authors.
//
// Cluster mode over TLS (docs/security.md): three real kvservers (R=2) on a
// real etcd that serves TLS only, requires client certificates and has
// authentication on; every control port serving mutual TLS, every node dialling its
// peers over TLS with its own certificate; a client with the CA and a
// client certificate writes, the primary of its keys is killed, and the
// keys read back from the new primary. Clients without the CA, with another
// CA or speaking plaintext get nothing.
//
// Test certificates: tests/testdata/tls (node.pem: 127.0.0.1, server and
// client use).

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/kv_client.h"
#include "common/tls/grpc_tls.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace testing {
namespace {

constexpr char kToken[] = "cluster-tls-test-token-0123456789";

std::string TlsFile(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kvstore", "/tests/testdata/tls/",
                      name);
}

class ClusterTlsTest : public ::testing::Test {
 protected:
  // etcd serves TLS only, requires client certificates and has
  // authentication on: the nodes log in as "kv", whose role reaches the
  // /kvstore/ keys only.
  void SetUp() override {
    EtcdMemberOptions eo;
    eo.tls_cert = TlsFile("node.pem");
    eo.tls_key = TlsFile("node.key");
    eo.tls_ca = TlsFile("ca.pem");
    etcd_ = std::make_unique<EtcdProcess>(eo);
    absl::Status s = etcd_->Start();
    ASSERT_TRUE(s.ok()) << s;
    for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
             {"user", "add", "root:rootpass", "--interactive=false"},
             {"user", "add", "kv:kvpass", "--interactive=false"},
             {"role", "add", "kvrole"},
             {"role", "grant-permission", "kvrole", "--prefix=true", "readwrite", "/kvstore/"},
             {"user", "grant-role", "kv", "kvrole"},
             {"auth", "enable"}}) {
      std::vector<std::string> argv = {
          "etcdctl", "--endpoints=https://" + etcd_->endpoint(), "--cacert=" + TlsFile("ca.pem"),
          "--cert=" + TlsFile("client.pem"), "--key=" + TlsFile("client.key")};
      argv.insert(argv.end(), cmd.begin(), cmd.end());
      ProcessResult r = RunProcess(argv, "", 20);
      ASSERT_EQ(r.exit_code, 0) << cmd[0] << " " << cmd[1] << ": " << r.out << r.err;
    }
    token_file_ = absl::StrCat(TempDir(), "/token");
    std::ofstream(token_file_, std::ios::trunc) << kToken << "\n";
    password_file_ = absl::StrCat(TempDir(), "/etcd-password");
    std::ofstream(password_file_, std::ios::trunc) << "kvpass\n";
  }

  ClusterOptions TlsCluster() {
    ClusterOptions o;
    o.etcd_endpoint = etcd_->endpoint();
    o.nodes = 3;
    o.replicas = 2;
    o.extra_flags.push_back("--tls_cert=" + TlsFile("node.pem"));
    o.extra_flags.push_back("--tls_key=" + TlsFile("node.key"));
    o.extra_flags.push_back("--tls_client_ca=" + TlsFile("ca.pem"));
    o.extra_flags.push_back("--auth_token_file=" + token_file_);
    o.extra_flags.push_back("--etcd_ca=" + TlsFile("ca.pem"));
    o.extra_flags.push_back("--etcd_cert=" + TlsFile("node.pem"));
    o.extra_flags.push_back("--etcd_key=" + TlsFile("node.key"));
    o.extra_flags.push_back("--etcd_user=kv");
    o.extra_flags.push_back("--etcd_password_file=" + password_file_);
    tls::PemFiles files;
    files.ca = TlsFile("ca.pem");
    files.cert = TlsFile("client.pem");
    files.key = TlsFile("client.key");
    auto creds = tls::ReloadingChannelCredentials(files, absl::Seconds(60));
    EXPECT_TRUE(creds.ok()) << creds.status();
    if (creds.ok()) o.control_credentials = *creds;
    o.auth_token = kToken;
    return o;
  }

  client::Options ClientOptions(const std::vector<std::string>& servers) {
    client::Options c;
    c.servers = servers;
    c.transport = client::TransportMode::kTcp;
    c.auth_token = kToken;
    c.tls_ca_file = TlsFile("ca.pem");
    c.tls_cert_file = TlsFile("client.pem");
    c.tls_key_file = TlsFile("client.key");
    c.connect_timeout = absl::Seconds(5);
    c.op_timeout = absl::Seconds(10);
    return c;
  }

  std::unique_ptr<EtcdProcess> etcd_;
  std::string token_file_;
  std::string password_file_;
};

TEST_F(ClusterTlsTest, ReplicatesAndFailsOverOverMutualTls) {
  auto started = ClusterHarness::Start(TlsCluster());
  ASSERT_TRUE(started.ok()) << started.status();
  ClusterHarness& cluster = **started;
  // Healthy means every backup was copied in full and reported in sync:
  // SyncShard and ReportInSync went node to node over TLS.
  absl::Status healthy = cluster.WaitHealthy(absl::Seconds(60));
  ASSERT_TRUE(healthy.ok()) << healthy << "\n" << cluster.Logs();

  auto c = client::KvClient::Connect(ClientOptions(cluster.ControlAddresses()));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> keys;
  for (int i = 0; i < 32; ++i) {
    keys.push_back(absl::StrCat("tls-key-", i));
    // Acknowledged only once the backup holds it (Replicate over TLS).
    absl::Status s = (*c)->Put(keys.back(), absl::StrCat("value-", i));
    ASSERT_TRUE(s.ok()) << s << "\n" << cluster.Logs();
  }
  absl::StatusOr<int> victim = cluster.PrimaryIndexOf(keys[0]);
  ASSERT_TRUE(victim.ok()) << victim.status();
  const std::string victim_id = ClusterHarness::NodeId(*victim);
  cluster.KillNode(*victim);
  absl::StatusOr<std::string> successor =
      cluster.WaitNewPrimary(keys[0], victim_id, absl::Seconds(30));
  ASSERT_TRUE(successor.ok()) << successor.status() << "\n" << cluster.Logs();
  for (int i = 0; i < 32; ++i) {
    absl::StatusOr<std::string> v = (*c)->Get(keys[i]);
    ASSERT_TRUE(v.ok()) << keys[i] << ": " << v.status() << "\n" << cluster.Logs();
    EXPECT_EQ(*v, absl::StrCat("value-", i));
  }
}

TEST_F(ClusterTlsTest, ClientsWithoutTheCaOrPlaintextAreRefused) {
  auto started = ClusterHarness::Start(TlsCluster());
  ASSERT_TRUE(started.ok()) << started.status();
  ClusterHarness& cluster = **started;
  absl::Status healthy = cluster.WaitHealthy(absl::Seconds(60));
  ASSERT_TRUE(healthy.ok()) << healthy << "\n" << cluster.Logs();
  const std::vector<std::string> servers = cluster.ControlAddresses();

  client::Options plaintext = ClientOptions(servers);
  plaintext.tls_ca_file.clear();
  plaintext.tls_cert_file.clear();
  plaintext.tls_key_file.clear();
  plaintext.connect_timeout = absl::Seconds(2);
  EXPECT_FALSE(client::KvClient::Connect(plaintext).ok());

  client::Options other_ca = ClientOptions(servers);
  other_ca.tls_ca_file = TlsFile("other-ca.pem");
  other_ca.connect_timeout = absl::Seconds(2);
  EXPECT_FALSE(client::KvClient::Connect(other_ca).ok());

  // The CA but no client certificate: mutual TLS refuses the handshake.
  client::Options no_cert = ClientOptions(servers);
  no_cert.tls_cert_file.clear();
  no_cert.tls_key_file.clear();
  no_cert.connect_timeout = absl::Seconds(2);
  EXPECT_FALSE(client::KvClient::Connect(no_cert).ok());

  // The right CA and certificate still work.
  auto good = client::KvClient::Connect(ClientOptions(servers));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE((*good)->Put("k", "v").ok());
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
