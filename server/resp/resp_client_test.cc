// Copyright 2026 The kvstore Authors.
//
// CLIENT over real sockets on a server of three loops: ids, names, the
// CLIENT INFO / LIST lines and what they say, CLIENT KILL closing a
// connection whichever loop holds it, Redis's error texts, the admin
// permission, and redis-py (Debian python3-redis) using them as it does on
// connect. The store runs on a fake clock, so age and idle are exact.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/protocol/resp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/resp/resp_server.h"
#include "server/resp/resp_test_util.h"
#include "server/storage/fake_clock.h"

namespace kvstore {
namespace server {
namespace {

using ::kvstore::resp_test::Cmd;
using ::kvstore::resp_test::Read;
using ::kvstore::resp_test::ReadRaw;
using ::kvstore::resp_test::ReadsToEof;
using ::kvstore::resp_test::Send;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Fields = std::map<std::string, std::string>;

// One CLIENT LIST line as key -> value.
Fields Parse(absl::string_view line) {
  Fields f;
  for (absl::string_view kv : absl::StrSplit(absl::StripSuffix(line, "\n"), ' ')) {
    const size_t eq = kv.find('=');
    f[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  return f;
}

// "127.0.0.1:<port>" of a socket's own end.
std::string LocalAddress(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
}

class RespClientTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(auth::Credentials()); }
  void Start(const auth::Credentials& credentials) {
    server_.reset();
    store_.reset();
    MemoryPoolOptions po;
    po.data_bytes = 32 << 20;
    po.index_bytes = 1 << 20;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.grace_period = absl::Milliseconds(10);
    so.clock = &clock_;
    store_ = *KvStore::Create(pool_.get(), so);
    RespServerOptions o;
    o.port = 0;
    o.threads = 3;
    o.timeout_check_interval = absl::Milliseconds(5);
    o.credentials = credentials;
    auto s = RespServer::Start(store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  // A connection its loop has taken (the PING came back), so it is listed.
  int Connect() {
    const int fd = resp_test::Connect(server_->port());
    resp_test::SetReceiveTimeout(fd, 60);
    fds_.push_back(fd);
    EXPECT_EQ(One(fd, {"PING"}).str, "PONG");
    return fd;
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
  }
  resp::Reply One(int fd, std::vector<absl::string_view> args) {
    Send(fd, Cmd(args));
    std::vector<resp::Reply> r = Read(fd, 1);
    return r.empty() ? resp::Reply{resp::Reply::Type::kError, "<no reply>"} : r[0];
  }
  int64_t Id(int fd) { return One(fd, {"CLIENT", "ID"}).integer; }
  // CLIENT LIST from `fd`, keyed by id.
  std::map<int64_t, Fields> List(int fd, std::vector<absl::string_view> extra = {}) {
    std::vector<absl::string_view> args = {"CLIENT", "LIST"};
    args.insert(args.end(), extra.begin(), extra.end());
    const resp::Reply r = One(fd, args);
    EXPECT_EQ(r.type, resp::Reply::Type::kBulk) << r.str;
    std::map<int64_t, Fields> out;
    for (absl::string_view line : absl::StrSplit(r.str, '\n', absl::SkipEmpty())) {
      Fields f = Parse(line);
      int64_t id = 0;
      EXPECT_TRUE(absl::SimpleAtoi(f["id"], &id)) << line;
      out[id] = std::move(f);
    }
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<RespServer> server_;
  std::vector<int> fds_;
};

TEST_F(RespClientTest, IdNameAndInfo) {
  const int a = Connect();
  const int b = Connect();
  const int64_t id_a = Id(a);
  EXPECT_GT(Id(b), id_a);
  EXPECT_EQ(Id(a), id_a);
  // HELLO's id is CLIENT ID's.
  const resp::Reply hello = One(a, {"HELLO"});
  ASSERT_EQ(hello.elements.size(), 14u);
  EXPECT_EQ(hello.elements[7].integer, id_a);

  EXPECT_EQ(One(a, {"CLIENT", "GETNAME"}).type, resp::Reply::Type::kNull);
  EXPECT_EQ(One(a, {"CLIENT", "SETNAME", "worker-1"}).str, "OK");
  EXPECT_EQ(One(a, {"client", "getname"}).str, "worker-1");
  EXPECT_EQ(One(a, {"CLIENT", "SETNAME", "a b"}).str,
            "ERR Client names cannot contain spaces, newlines or special characters.");
  EXPECT_EQ(One(a, {"CLIENT", "SETNAME", "a\nb"}).str,
            "ERR Client names cannot contain spaces, newlines or special characters.");
  EXPECT_EQ(One(a, {"CLIENT", "GETNAME"}).str, "worker-1");
  EXPECT_EQ(One(a, {"CLIENT", "SETINFO", "LIB-NAME", "go-redis(kv,go1.22)"}).str, "OK");
  EXPECT_EQ(One(a, {"CLIENT", "SETINFO", "lib-ver", "9.5.1"}).str, "OK");
  EXPECT_EQ(One(a, {"CLIENT", "NO-EVICT", "on"}).str, "OK");
  EXPECT_EQ(One(a, {"CLIENT", "NO-TOUCH", "ON"}).str, "OK");

  clock_.Advance(absl::Seconds(7));
  const resp::Reply info = One(a, {"CLIENT", "INFO"});
  ASSERT_EQ(info.type, resp::Reply::Type::kBulk) << info.str;
  EXPECT_THAT(info.str, StartsWith(absl::StrCat("id=", id_a, " addr=")));
  EXPECT_EQ(info.str.back(), '\n');
  Fields f = Parse(info.str);
  EXPECT_EQ(f["addr"], LocalAddress(a));
  EXPECT_EQ(f["laddr"], absl::StrCat("127.0.0.1:", server_->port()));
  EXPECT_EQ(f["name"], "worker-1");
  EXPECT_EQ(f["age"], "7");
  EXPECT_EQ(f["idle"], "0");  // this request is an interaction
  EXPECT_EQ(f["flags"], "eT");
  EXPECT_EQ(f["cmd"], "client|info");
  EXPECT_EQ(f["user"], "default");
  EXPECT_EQ(f["resp"], "2");
  EXPECT_EQ(f["lib-name"], "go-redis(kv,go1.22)");
  EXPECT_EQ(f["lib-ver"], "9.5.1");
  EXPECT_EQ(f["argv-mem"], "10");  // CLIENT INFO
  EXPECT_EQ(f["qbuf"], "26");      // the request itself, still in the buffer
  EXPECT_EQ(f["events"], "r");
  EXPECT_EQ(f["multi"], "-1");
  // An empty name removes it.
  EXPECT_EQ(One(a, {"CLIENT", "SETNAME", ""}).str, "OK");
  EXPECT_EQ(One(a, {"CLIENT", "GETNAME"}).type, resp::Reply::Type::kNull);
}

// Every connection of the port, whichever of the three loops took it, with
// the names and last commands the others set; age and idle on the clock.
TEST_F(RespClientTest, ListShowsEveryConnectionOfThePort) {
  std::vector<int> fds;
  std::vector<int64_t> ids;
  for (int i = 0; i < 9; ++i) {
    fds.push_back(Connect());
    ids.push_back(Id(fds.back()));
    const std::string name = absl::StrCat("c", i);
    EXPECT_EQ(One(fds.back(), {"CLIENT", "SETNAME", name}).str, "OK");
  }
  EXPECT_EQ(One(fds[3], {"SET", "k", "v"}).str, "OK");
  EXPECT_EQ(One(fds[4], {"GET", "k"}).str, "v");
  clock_.Advance(absl::Seconds(30));
  EXPECT_EQ(One(fds[5], {"EXISTS", "k"}).integer, 1);
  std::map<int64_t, Fields> all = List(fds[0]);
  ASSERT_EQ(all.size(), 9u);
  for (int i = 0; i < 9; ++i) {
    Fields& f = all[ids[i]];
    EXPECT_EQ(f["name"], absl::StrCat("c", i));
    EXPECT_EQ(f["addr"], LocalAddress(fds[i]));
    EXPECT_EQ(f["age"], "30");
    EXPECT_EQ(f["idle"], i == 0 || i == 5 ? "0" : "30") << i;
  }
  EXPECT_EQ(all[ids[0]]["cmd"], "client|list");
  EXPECT_EQ(all[ids[1]]["cmd"], "client|setname");
  EXPECT_EQ(all[ids[3]]["cmd"], "set");
  EXPECT_EQ(all[ids[4]]["cmd"], "get");
  EXPECT_EQ(all[ids[5]]["cmd"], "exists");
  EXPECT_EQ(List(fds[0], {"TYPE", "normal"}).size(), 9u);
  EXPECT_EQ(List(fds[0], {"TYPE", "pubsub"}).size(), 0u);
  const std::string id2 = absl::StrCat(ids[2]), id7 = absl::StrCat(ids[7]);
  std::map<int64_t, Fields> some = List(fds[0], {"ID", id7, id2, "999999"});
  EXPECT_EQ(some.size(), 2u);
  EXPECT_EQ(some.count(ids[2]) + some.count(ids[7]), 2u);
  // A connection that is gone is no longer listed.
  close(fds[8]);
  fds_.erase(std::find(fds_.begin(), fds_.end(), fds[8]));
  // The close reaches its loop in that loop's own time: ask again (each
  // List is a round trip, no sleeping) until it has.
  size_t listed = 9;
  for (int tries = 0; tries < 10000 && listed != 8; ++tries) listed = List(fds[0]).size();
  EXPECT_EQ(listed, 8u);
  EXPECT_EQ(One(fds[0], {"CLIENT", "LIST", "TYPE", "bogus"}).str,
            "ERR Unknown client type 'bogus'");
  EXPECT_EQ(One(fds[0], {"CLIENT", "LIST", "ID", "abc"}).str, "ERR Invalid client ID");
  EXPECT_EQ(One(fds[0], {"CLIENT", "LIST", "foo"}).str, "ERR syntax error");
}

// CLIENT KILL closes the connection on whichever loop holds it: the victim
// reads EOF. The caller is spared unless SKIPME no (or the old form).
TEST_F(RespClientTest, KillClosesConnectionsOfAnyLoop) {
  const int killer = Connect();
  std::vector<int> victims;
  for (int i = 0; i < 6; ++i) victims.push_back(Connect());
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "ID", absl::StrCat(Id(victims[0]))}).integer, 1);
  EXPECT_TRUE(ReadsToEof(victims[0]));
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "ADDR", LocalAddress(victims[1])}).integer, 1);
  EXPECT_TRUE(ReadsToEof(victims[1]));
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", LocalAddress(victims[2])}).str, "OK");
  EXPECT_TRUE(ReadsToEof(victims[2]));
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", LocalAddress(victims[2])}).str, "ERR No such client");
  // Every connection of the user default but the caller.
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "USER", "default", "TYPE", "normal"}).integer, 3);
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(ReadsToEof(victims[i])) << i;
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "ID", absl::StrCat(Id(killer))}).integer, 0);
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "TYPE", "master"}).integer, 0);
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "ID", "abc"}).str,
            "ERR client-id should be greater than 0");
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "ID", "0"}).str,
            "ERR client-id should be greater than 0");
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "FOO", "bar"}).str, "ERR syntax error");
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "ID", "1", "SKIPME"}).str, "ERR syntax error");
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "SKIPME", "maybe"}).str, "ERR syntax error");
  EXPECT_EQ(One(killer, {"CLIENT", "KILL", "TYPE", "x"}).str, "ERR Unknown client type 'x'");
  // Not spared: the reply, then the close.
  Send(killer,
       Cmd({"CLIENT", "KILL", "ID", absl::StrCat(Id(killer)), "SKIPME", "no"}) + Cmd({"PING"}));
  EXPECT_EQ(ReadRaw(killer, 2), ":1\r\n");
  EXPECT_TRUE(ReadsToEof(killer));
}

// Redis's texts for what CLIENT does not know or did not get.
TEST_F(RespClientTest, ErrorsAreRedisTexts) {
  const int fd = Connect();
  EXPECT_EQ(One(fd, {"CLIENT"}).str, "ERR wrong number of arguments for 'client' command");
  EXPECT_EQ(One(fd, {"CLIENT", "foo"}).str, "ERR unknown subcommand 'foo'. Try CLIENT HELP.");
  EXPECT_EQ(One(fd, {"CLIENT", "TRACKING", "on"}).str,
            "ERR unknown subcommand 'TRACKING'. Try CLIENT HELP.");
  EXPECT_EQ(One(fd, {"CLIENT", "SETNAME"}).str,
            "ERR wrong number of arguments for 'client|setname' command");
  EXPECT_EQ(One(fd, {"CLIENT", "ID", "x"}).str,
            "ERR wrong number of arguments for 'client|id' command");
  EXPECT_EQ(One(fd, {"CLIENT", "SETINFO", "LIB-NAME"}).str,
            "ERR wrong number of arguments for 'client|setinfo' command");
  EXPECT_EQ(One(fd, {"CLIENT", "SETINFO", "color", "red"}).str, "ERR Unrecognized option 'color'");
  EXPECT_EQ(One(fd, {"CLIENT", "SETINFO", "LIB-NAME", "a b"}).str,
            "ERR LIB-NAME cannot contain spaces, newlines or special characters.");
  EXPECT_EQ(One(fd, {"CLIENT", "NO-EVICT", "maybe"}).str, "ERR syntax error");
  EXPECT_EQ(One(fd, {"CLIENT", "NO-TOUCH", "1"}).str, "ERR syntax error");
  const resp::Reply help = One(fd, {"CLIENT", "HELP"});
  ASSERT_EQ(help.type, resp::Reply::Type::kArray);
  EXPECT_EQ(help.elements[0].str,
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
  EXPECT_EQ(help.elements.back().str, "    Print this help.");
  // The connection is still fine.
  EXPECT_EQ(One(fd, {"PING"}).str, "PONG");
}

// LIST, KILL and NO-EVICT are the operator's (Redis's @admin); the rest is
// any client's. The user shows in the listing.
TEST_F(RespClientTest, ListAndKillNeedAdmin) {
  auth::Credentials c;
  c.data_token = "data-token-0123456789";
  c.admin_token = "admin-token-0123456789";
  Start(c);
  const int data = resp_test::Connect(server_->port());
  fds_.push_back(data);
  EXPECT_EQ(One(data, {"CLIENT", "ID"}).str, "NOAUTH Authentication required.");
  EXPECT_EQ(One(data, {"AUTH", c.data_token}).str, "OK");
  EXPECT_EQ(One(data, {"CLIENT", "LIST"}).str,
            "NOPERM User default has no permissions to run the 'client|list' command");
  EXPECT_EQ(One(data, {"CLIENT", "KILL", "ID", "1"}).str,
            "NOPERM User default has no permissions to run the 'client|kill' command");
  EXPECT_EQ(One(data, {"CLIENT", "NO-EVICT", "on"}).str,
            "NOPERM User default has no permissions to run the 'client|no-evict' command");
  EXPECT_EQ(One(data, {"CLIENT", "SETNAME", "app"}).str, "OK");
  EXPECT_EQ(One(data, {"CLIENT", "NO-TOUCH", "on"}).str, "OK");
  const int admin = resp_test::Connect(server_->port());
  fds_.push_back(admin);
  EXPECT_EQ(One(admin, {"AUTH", "admin", c.admin_token}).str, "OK");
  std::map<int64_t, Fields> all = List(admin);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[Id(data)]["user"], "default");
  EXPECT_EQ(all[Id(data)]["name"], "app");
  EXPECT_EQ(all[Id(admin)]["user"], "admin");
  EXPECT_EQ(One(admin, {"CLIENT", "KILL", "USER", "default"}).integer, 1);
  EXPECT_TRUE(ReadsToEof(data));
}

// redis-py as an application uses it: client_name= on connect, the
// client_* helpers, CLIENT SETINFO, and a reconnect after CLIENT KILL.
TEST_F(RespClientTest, RedisPy) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  ASSERT_NE(srcdir, nullptr);
  ASSERT_NE(workspace, nullptr);
  const std::string script =
      absl::StrCat(srcdir, "/", workspace, "/server/resp/redis_py_client_test.py");
  const std::string cmd =
      absl::StrCat("timeout 60 /usr/bin/python3 '", script, "' ", server_->port(), " 2>&1");
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  std::printf("%s", out.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_THAT(out, HasSubstr("PASS"));
  EXPECT_EQ(store_->Get("py:k")->value(), "v");
}

}  // namespace
}  // namespace server
}  // namespace kvstore
