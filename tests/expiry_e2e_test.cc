// Copyright 2026 The kvstore Authors.
//
// Expiry end to end against a real kvserver: kvctl's put --ttl, ttl,
// expire and persist (over the TCP data path, i.e. RESP), the gRPC calls
// the RDMA data path uses (Put with ttl_ms, Expire, Ttl), INFO's counts,
// and a key that really expires and is deleted by the server's expiry
// cycle, waited for with a generous bound.

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/control/control_client.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace {

using ::kvstore::testing::BinaryPath;
using ::kvstore::testing::Eventually;
using ::kvstore::testing::KvServerProcess;
using ::kvstore::testing::ProcessResult;
using ::kvstore::testing::RunProcess;
using ::testing::HasSubstr;

class ExpiryEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = KvServerProcess::Start({"--pool_size=64M", "--transport=tcp"});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::make_unique<KvServerProcess>(std::move(*s));
  }
  void TearDown() override {
    if (HasFailure() && server_) std::printf("server log:\n%s\n", server_->Log().c_str());
  }
  ProcessResult Kvctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {BinaryPath("client/kvctl/kvctl"),
                                     "--server=" + server_->control_address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }
  int64_t TtlMs(const std::string& key) {
    int64_t ms = -100;
    ProcessResult r = Kvctl({"ttl", key});
    EXPECT_TRUE(absl::SimpleAtoi(r.out, &ms)) << r.out << r.err;
    return ms;
  }
  std::unique_ptr<KvServerProcess> server_;
};

TEST_F(ExpiryEndToEnd, KvctlSetsReadsAndRemovesExpiries) {
  ASSERT_EQ(Kvctl({"put", "k", "v", "--ttl=1h"}).exit_code, 0);
  EXPECT_GT(TtlMs("k"), 3590 * 1000);
  EXPECT_LE(TtlMs("k"), 3600 * 1000);
  ProcessResult persist = Kvctl({"persist", "k"});
  EXPECT_EQ(persist.out, "1\n");
  EXPECT_EQ(TtlMs("k"), -1);
  EXPECT_EQ(Kvctl({"persist", "k"}).out, "0\n");
  EXPECT_EQ(Kvctl({"expire", "k", "30s"}).out, "1\n");
  EXPECT_GT(TtlMs("k"), 25 * 1000);
  EXPECT_LE(TtlMs("k"), 30 * 1000);
  EXPECT_EQ(Kvctl({"get", "k"}).out, "v");
  ProcessResult missing = Kvctl({"ttl", "missing"});
  EXPECT_EQ(missing.out, "-2\n");
  EXPECT_EQ(missing.exit_code, 1);
  ProcessResult expire_missing = Kvctl({"expire", "missing", "10s"});
  EXPECT_EQ(expire_missing.out, "0\n");
  EXPECT_EQ(expire_missing.exit_code, 1);
  ProcessResult bad = Kvctl({"expire", "k", "0s"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("not a positive duration"));
  EXPECT_EQ(Kvctl({"put", "k", "v", "--ttl=-5s"}).exit_code, 2);
  // INFO counts keys with an expiry.
  ProcessResult info =
      RunProcess({"redis-cli", "-p", std::to_string(server_->resp_port()), "INFO"});
  EXPECT_THAT(info.out, HasSubstr("expires=1"));
}

TEST_F(ExpiryEndToEnd, TheControlPlaneCallsOfTheRdmaPath) {
  auto c = control::ControlClient::Dial(server_->control_address());
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  ASSERT_TRUE((*c)->PutWithTtl("g", "value", absl::Minutes(10), deadline).ok());
  auto ttl = (*c)->Ttl("g", deadline);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_GT(*ttl, absl::Minutes(9));
  EXPECT_LE(*ttl, absl::Minutes(10));
  EXPECT_EQ(*(*c)->Expire("g", absl::InfiniteDuration(), deadline), true);
  EXPECT_EQ(*(*c)->Ttl("g", deadline), absl::InfiniteDuration());
  EXPECT_EQ(*(*c)->Expire("g", absl::Seconds(5), deadline), true);
  EXPECT_LE(*(*c)->Ttl("g", deadline), absl::Seconds(5));
  EXPECT_EQ(*(*c)->Expire("absent", absl::Seconds(5), deadline), false);
  EXPECT_TRUE(absl::IsNotFound((*c)->Ttl("absent", deadline).status()));
  EXPECT_EQ(*(*c)->Get("g", deadline), "value");
}

TEST_F(ExpiryEndToEnd, AKeyExpiresAndTheServerDeletesIt) {
  ASSERT_EQ(Kvctl({"put", "short", "v", "--ttl=300ms"}).exit_code, 0);
  ASSERT_EQ(Kvctl({"put", "long", "v", "--ttl=1h"}).exit_code, 0);
  // Real time has to pass here; the bound is generous for a loaded machine.
  EXPECT_TRUE(Eventually(
      [&] {
        return Kvctl({"get", "short"}).exit_code == 1;
      },
      absl::Minutes(2), absl::Milliseconds(50)));
  // The expiry cycle deletes it (DBSIZE counts undeleted expired keys).
  EXPECT_TRUE(Eventually(
      [&] {
        return RunProcess({"redis-cli", "-p", std::to_string(server_->resp_port()), "DBSIZE"})
                   .out == "1\n";
      },
      absl::Minutes(2), absl::Milliseconds(50)));
  EXPECT_EQ(Kvctl({"get", "long"}).out, "v");
}

}  // namespace
}  // namespace kvstore
