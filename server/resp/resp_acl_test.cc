// Copyright 2026 The kvstore Authors.
//
// RESP users and their roles (common/auth/credentials.h): AUTH user pass,
// AUTH pass as the default user, -NOPERM for what a role does not allow
// (the streamed SET path included), over real sockets and with the real
// redis-cli --user/--pass (Debian redis-tools).

#include <memory>
#include <string>
#include <vector>

#include "common/auth/credentials.h"
#include "common/metrics/testing.h"
#include "common/protocol/resp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/resp/resp_server.h"
#include "server/resp/resp_test_util.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::metrics::testing::Value;
using ::kvstore::resp_test::Cmd;
using ::kvstore::resp_test::Connect;
using ::kvstore::resp_test::Read;
using ::kvstore::resp_test::RedisCli;
using ::kvstore::resp_test::Send;
using ::testing::HasSubstr;

constexpr char kDataToken[] = "data-token-0123456789";
constexpr char kAdminToken[] = "admin-token-0123456789";
constexpr char kReaderSecret[] = "reader-secret-0123456789";
constexpr char kPeerSecret[] = "peer-secret-0123456789";

class RespAclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryPoolOptions po;
    po.data_bytes = 64 << 20;
    po.index_bytes = 1 << 20;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.grace_period = absl::Milliseconds(10);
    store_ = *KvStore::Create(pool_.get(), so);
    RespServerOptions o;
    o.port = 0;
    o.threads = 2;
    o.credentials.data_token = kDataToken;
    o.credentials.admin_token = kAdminToken;
    o.credentials.peer_secret = kPeerSecret;
    o.credentials.users.push_back(auth::User{"reader", auth::Role::kRead, kReaderSecret});
    auto s = RespServer::Start(store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  // A connection authenticated with `args` (AUTH ...).
  int LoggedIn(std::vector<absl::string_view> auth) {
    const int fd = Connect(server_->port());
    Send(fd, Cmd(auth));
    std::vector<resp::Reply> r = Read(fd, 1);
    EXPECT_EQ(r.size(), 1u);
    if (!r.empty()) EXPECT_EQ(r[0].str, "OK") << r[0].str;
    return fd;
  }
  std::string One(int fd, std::vector<absl::string_view> cmd) {
    Send(fd, Cmd(cmd));
    std::vector<resp::Reply> r = Read(fd, 1);
    if (r.empty()) return "<none>";
    if (r[0].type == resp::Reply::Type::kInteger) return std::to_string(r[0].integer);
    if (r[0].type == resp::Reply::Type::kNull) return "<nil>";
    return r[0].str;
  }
  std::string Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {"-p", std::to_string(server_->port()), "--no-auth-warning"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RedisCli(argv, "");
  }

  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<RespServer> server_;
};

TEST_F(RespAclTest, AReadOnlyUserReadsButEveryWriteIsNoPerm) {
  const int writer = LoggedIn({"AUTH", kDataToken});  // the default user
  EXPECT_EQ(One(writer, {"SET", "k", "v"}), "OK");
  const int reader = LoggedIn({"AUTH", "reader", kReaderSecret});
  EXPECT_EQ(One(reader, {"GET", "k"}), "v");
  EXPECT_EQ(One(reader, {"EXISTS", "k"}), "1");
  // The plain SET is streamed into the pool before the command table sees
  // it: refused there too, its value skipped, the connection still usable.
  EXPECT_EQ(One(reader, {"SET", "k", "overwritten"}),
            "NOPERM User reader has no permissions to run the 'set' command");
  EXPECT_EQ(One(reader, {"SET", "k", "x", "NX"}),
            "NOPERM User reader has no permissions to run the 'set' command");
  EXPECT_EQ(One(reader, {"DEL", "k"}),
            "NOPERM User reader has no permissions to run the 'del' command");
  EXPECT_EQ(One(reader, {"UNLINK", "k"}),
            "NOPERM User reader has no permissions to run the 'unlink' command");
  EXPECT_EQ(One(reader, {"MSET", "k", "a", "k2", "b"}),
            "NOPERM User reader has no permissions to run the 'mset' command");
  EXPECT_EQ(One(reader, {"GET", "k"}), "v");
  EXPECT_EQ(One(reader, {"GET", "k2"}), "<nil>");
  EXPECT_EQ(Value(server_->registry(), "kvstore_resp_noperm_rejections_total"), 5u);
  close(reader);
  close(writer);
}

TEST_F(RespAclTest, AdminCommandsNeedTheAdminUser) {
  const int writer = LoggedIn({"AUTH", "default", kDataToken});
  EXPECT_EQ(One(writer, {"CONFIG", "SET", "maxmemory", "1"}),
            "NOPERM User default has no permissions to run the 'config|set' command");
  // CONFIG GET is a read (redis-benchmark asks it).
  Send(writer, Cmd({"CONFIG", "GET", "appendonly"}));
  std::vector<resp::Reply> got = Read(writer, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].type, resp::Reply::Type::kArray);
  const int admin = LoggedIn({"AUTH", "admin", kAdminToken});
  // Past the permission check: the command's own answer.
  EXPECT_EQ(One(admin, {"CONFIG", "SET", "maxmemory", "64M"}), "OK");
  EXPECT_THAT(One(admin, {"CONFIG", "REWRITE"}),
              HasSubstr("only CONFIG GET and CONFIG SET are supported"));
  EXPECT_EQ(One(admin, {"SET", "a", "1"}), "OK");  // an admin also writes
  close(admin);
  close(writer);
}

TEST_F(RespAclTest, UsersAreCheckedByNameAndThePeerSecretIsNoUser) {
  const int fd = Connect(server_->port());
  const std::string wrongpass = "WRONGPASS invalid username-password pair or user is disabled.";
  // Another user's secret, an unknown user, the cluster secret: all refused.
  EXPECT_EQ(One(fd, {"AUTH", "reader", kDataToken}), wrongpass);
  EXPECT_EQ(One(fd, {"AUTH", "nobody", kReaderSecret}), wrongpass);
  EXPECT_EQ(One(fd, {"AUTH", kPeerSecret}), wrongpass);
  EXPECT_EQ(One(fd, {"AUTH", "cluster-peer", kPeerSecret}), wrongpass);
  EXPECT_EQ(One(fd, {"GET", "k"}), "NOAUTH Authentication required.");
  // HELLO AUTH names a user too.
  Send(fd, Cmd({"HELLO", "2", "AUTH", "reader", kReaderSecret}));
  ASSERT_EQ(Read(fd, 1).size(), 1u);
  EXPECT_THAT(One(fd, {"DEL", "k"}), HasSubstr("NOPERM User reader"));
  close(fd);
}

TEST_F(RespAclTest, RedisCliUserAndPass) {
  EXPECT_EQ(Cli({"--user", "default", "--pass", kDataToken, "SET", "cli", "v1"}), "OK\n");
  EXPECT_EQ(Cli({"--user", "reader", "--pass", kReaderSecret, "GET", "cli"}), "v1\n");
  EXPECT_THAT(Cli({"--user", "reader", "--pass", kReaderSecret, "SET", "cli", "v2"}),
              HasSubstr("NOPERM"));
  EXPECT_EQ(Cli({"--user", "admin", "--pass", kAdminToken, "GET", "cli"}), "v1\n");
  EXPECT_THAT(Cli({"--user", "reader", "--pass", kDataToken, "GET", "cli"}),
              HasSubstr("WRONGPASS"));
  // -a alone is the default user, as with Redis's requirepass.
  EXPECT_EQ(Cli({"-a", kDataToken, "GET", "cli"}), "v1\n");
}

}  // namespace
}  // namespace server
}  // namespace kvstore
