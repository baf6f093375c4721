// Copyright 2026 The kvstore Authors.
//
// AUTH on the RESP port with a password set (RespServerOptions::password,
// the server's shared token): raw sockets for the exact Redis error texts
// and the order of replies, then the real redis-cli -a and redis-benchmark
// -a binaries (Debian redis-tools) against the same server.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metrics/testing.h"
#include "common/protocol/resp.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/resp/resp_server.h"
#include "server/storage/fake_clock.h"

namespace kvstore {
namespace {

struct ProcessResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs a command line (arguments are shell-quoted here) under timeout(1)
// and collects its output.
ProcessResult RunProcess(const std::vector<std::string>& argv, int timeout_s) {
  std::vector<std::string> quoted;
  for (const std::string& a : argv) quoted.push_back("'" + a + "'");
  const std::string cmd =
      absl::StrCat("timeout ", timeout_s, " ", absl::StrJoin(quoted, " "), " 2>&1 </dev/null");
  ProcessResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

using ::kvstore::metrics::testing::Value;
using ::kvstore::server::FakeClock;
using ::kvstore::server::KvStore;
using ::kvstore::server::KvStoreOptions;
using ::kvstore::server::MemoryPool;
using ::kvstore::server::MemoryPoolOptions;
using ::kvstore::server::RespServer;
using ::kvstore::server::RespServerOptions;
using ::kvstore::testing::Eventually;
using ::testing::HasSubstr;

constexpr char kPassword[] = "s3cret-token-for-tests";
constexpr char kNoAuth[] = "-NOAUTH Authentication required.\r\n";
constexpr char kWrongPass[] = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";

class RespAuthTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(kPassword); }
  // The store (and with it the loops' timeouts) runs on clock_, which moves
  // only when a test advances it; the loops look for expired connections
  // every few milliseconds of real time.
  void Start(const std::string& password, RespServerOptions o = RespServerOptions()) {
    server_.reset();
    store_.reset();
    MemoryPoolOptions po;
    po.data_bytes = 64 << 20;
    po.index_bytes = 1 << 20;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.grace_period = absl::Milliseconds(10);
    so.limits.max_value_bytes = 8 << 20;
    so.clock = &clock_;
    store_ = *KvStore::Create(pool_.get(), so);
    o.port = 0;
    o.timeout_check_interval = absl::Milliseconds(5);
    // o.threads as the test asks (the default is 2): a test of one loop's
    // caps sets 1 and must get it.
    o.credentials.data_token = password;
    auto s = RespServer::Start(store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  int Connect() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server_->port());
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
  }
  static void Send(int fd, absl::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      ASSERT_GT(n, 0);
      data.remove_prefix(n);
    }
  }
  // The raw bytes of the next `n` replies (or what came before EOF).
  static std::string ReadRaw(int fd, size_t n) {
    std::string buf;
    size_t done = 0, at = 0;
    char tmp[4096];
    while (done < n) {
      auto r = resp::ParseReply(absl::string_view(buf).substr(at), resp::ReplyLimits());
      if (r.ok() && r->complete) {
        at += r->consumed;
        ++done;
        continue;
      }
      ssize_t got = recv(fd, tmp, sizeof(tmp), 0);
      if (got <= 0) break;
      buf.append(tmp, got);
    }
    return buf;
  }
  static std::string Cmd(std::vector<absl::string_view> args) {
    std::string out;
    resp::AppendCommand(&out, args);
    return out;
  }
  static bool ClosedByPeer(int fd) {
    char c;
    return recv(fd, &c, 1, 0) == 0;
  }
  ProcessResult RedisCli(std::vector<std::string> args) {
    std::vector<std::string> argv = {"redis-cli", "-p", std::to_string(server_->port())};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, 30);
  }

  FakeClock clock_;  // outlives the store, which reads it
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<RespServer> server_;
};

TEST_F(RespAuthTest, EverythingButAuthHelloQuitIsRefusedUntilAuth) {
  int fd = Connect();
  // A streamed SET (its value skipped, the framing kept), an unknown
  // command and reads: all refused with Redis's exact text.
  Send(fd, Cmd({"PING"}) + Cmd({"SET", "k", "v"}) + Cmd({"GET", "k"}) + Cmd({"NOSUCH"}) +
               Cmd({"MSET", "a", "1"}) + Cmd({"HELLO"}) + Cmd({"AUTH", "nope"}) +
               Cmd({"AUTH", "default", "nope"}) + Cmd({"AUTH", "admin", kPassword}) +
               Cmd({"GET", "k"}));
  const std::string hello_noauth =
      "-NOAUTH HELLO must be called with the client already authenticated, otherwise the "
      "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
      "select the RESP protocol version at the same time\r\n";
  EXPECT_EQ(ReadRaw(fd, 10), absl::StrCat(kNoAuth, kNoAuth, kNoAuth, kNoAuth, kNoAuth, hello_noauth,
                                          kWrongPass, kWrongPass, kWrongPass, kNoAuth));
  EXPECT_FALSE(store_->Exists("k"));
  Send(fd, Cmd({"AUTH", kPassword}) + Cmd({"SET", "k", "v"}) + Cmd({"GET", "k"}));
  EXPECT_EQ(ReadRaw(fd, 3), "+OK\r\n+OK\r\n$1\r\nv\r\n");
  close(fd);
  fd = Connect();
  Send(fd, Cmd({"AUTH", "default", kPassword}) + Cmd({"GET", "k"}));
  EXPECT_EQ(ReadRaw(fd, 2), "+OK\r\n$1\r\nv\r\n");
  close(fd);
  EXPECT_EQ(Value(server_->registry(), "kvstore_resp_auth_failures_total"), 3u);
  EXPECT_GE(Value(server_->registry(), "kvstore_resp_noauth_rejections_total"), 7u);
}

TEST_F(RespAuthTest, HelloAuthAuthenticatesAndChecksTheProtocolFirst) {
  int fd = Connect();
  // An unsupported protocol is refused before anything else, as in Redis;
  // it does not log in.
  Send(fd, Cmd({"HELLO", "4", "AUTH", "default", kPassword}) + Cmd({"PING"}));
  EXPECT_EQ(ReadRaw(fd, 2), absl::StrCat("-NOPROTO unsupported protocol version\r\n", kNoAuth));
  Send(fd, Cmd({"HELLO", "2", "AUTH", "default", "wrong"}) + Cmd({"PING"}));
  EXPECT_EQ(ReadRaw(fd, 2), absl::StrCat(kWrongPass, kNoAuth));
  Send(fd, Cmd({"HELLO", "2", "AUTH", "default", kPassword, "SETNAME", "me"}) + Cmd({"PING"}) +
               Cmd({"HELLO"}));
  const std::string r = ReadRaw(fd, 3);
  EXPECT_THAT(r, ::testing::StartsWith("*14\r\n$6\r\nserver\r\n$7\r\nkvstore\r\n"));
  EXPECT_THAT(r, HasSubstr("+PONG\r\n*14\r\n"));
  close(fd);
}

// HELLO 3 AUTH logs in and switches to RESP3 in one go (redis-cli -3 -a,
// RESP3 client libraries); a wrong password changes neither.
TEST_F(RespAuthTest, HelloThreeAuthLogsInAndSwitchesToResp3) {
  int fd = Connect();
  Send(fd, Cmd({"HELLO", "3", "AUTH", "default", "wrong"}) + Cmd({"GET", "nokey"}));
  EXPECT_EQ(ReadRaw(fd, 2), absl::StrCat(kWrongPass, kNoAuth));
  Send(fd, Cmd({"HELLO", "3", "AUTH", "default", kPassword, "SETNAME", "r3"}) +
               Cmd({"GET", "nokey"}) + Cmd({"CLIENT", "GETNAME"}));
  const std::string r = ReadRaw(fd, 3);
  EXPECT_THAT(r, ::testing::StartsWith("%7\r\n$6\r\nserver\r\n$7\r\nkvstore\r\n"));
  EXPECT_THAT(r, HasSubstr("$5\r\nproto\r\n:3\r\n"));
  EXPECT_THAT(r, ::testing::EndsWith("*0\r\n_\r\n$2\r\nr3\r\n"));
  close(fd);
}

// The real redis-cli -3 -a: HELLO 3 AUTH on connect, then RESP3 replies.
TEST_F(RespAuthTest, RedisCliResp3WithPassword) {
  const std::string out =
      RunProcess({"redis-cli", "-3", "-p", std::to_string(server_->port()), "-a", kPassword,
                  "--no-auth-warning", "--no-raw", "GET", "nokey"},
                 30)
          .out;
  EXPECT_EQ(out, "(nil)\n");
}

TEST_F(RespAuthTest, QuitWorksBeforeAuth) {
  int fd = Connect();
  Send(fd, Cmd({"QUIT"}));
  EXPECT_EQ(ReadRaw(fd, 1), "+OK\r\n");
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
}

// The value of a SET sent before AUTH is never given pool memory: a large
// one closes the connection at its header, before any byte of it is read.
TEST_F(RespAuthTest, LargeStreamedSetBeforeAuthReservesNothingAndCloses) {
  // A 4 MiB value needs a dedicated run of segments: reserving it would
  // show in the free count.
  const uint64_t free_before = Value(store_->registry(), "kvstore_pool_segments_free");
  int fd = Connect();
  Send(fd,
       absl::StrCat("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$", 4 << 20, "\r\n", std::string(1000, 'x')));
  EXPECT_EQ(ReadRaw(fd, 1), kNoAuth);
  EXPECT_EQ(Value(store_->registry(), "kvstore_pool_segments_free"), free_before);
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  EXPECT_FALSE(store_->Exists("k"));
}

// A connection that has not authenticated within auth_timeout of the store's
// clock is closed, whether it stays silent or keeps guessing; one that did
// authenticate is not. Idle and request timeouts are off, so only the
// auth deadline can close anything here.
TEST_F(RespAuthTest, ConnectionsThatDoNotAuthenticateInTimeAreClosed) {
  RespServerOptions o;
  o.idle_timeout = absl::ZeroDuration();
  o.request_timeout = absl::Hours(1);
  o.limits.auth_timeout = absl::Seconds(5);
  Start(kPassword, o);
  const int silent = Connect();
  const int guesser = Connect();
  const int good = Connect();
  Send(good, Cmd({"AUTH", kPassword}));
  EXPECT_EQ(ReadRaw(good, 1), "+OK\r\n");
  // The fake clock moves in small steps (the loop stamps each connection's
  // accept time on it) until both unauthenticated sockets are gone.
  ASSERT_TRUE(Eventually([&] {
    // Not Send(): the server may close the guesser before the silent one,
    // and a send to a closed socket is expected then, not a failure.
    const std::string guess = Cmd({"AUTH", "wrong-guess"});
    (void)!send(guesser, guess.data(), guess.size(), MSG_NOSIGNAL);
    clock_.Advance(absl::Milliseconds(100));
    // Both figures: the sweep counts every expired connection first and
    // closes them after, so a read between the two sees the count at 2
    // with a socket still open (it failed that way under ASan on a busy
    // machine).
    return Value(server_->registry(),
                 "kvstore_resp_limit_rejections_total{limit=\"auth_timeout\"}") == 2 &&
           Value(server_->registry(), "kvstore_resp_connections") == 1;
  }));
  EXPECT_EQ(
      Value(server_->registry(), "kvstore_resp_limit_rejections_total{limit=\"auth_timeout\"}"),
      2u);
  EXPECT_THAT(ReadRaw(silent, 1), HasSubstr("resp_auth_timeout"));
  EXPECT_TRUE(ClosedByPeer(silent));
  // The guesser got its WRONGPASS replies, then the notice, then EOF.
  char buf[65536];
  while (recv(guesser, buf, sizeof(buf), 0) > 0) {
  }
  EXPECT_TRUE(ClosedByPeer(guesser));
  Send(good, Cmd({"PING"}));
  EXPECT_EQ(ReadRaw(good, 1), "+PONG\r\n");
  close(silent);
  close(guesser);
  close(good);
}

// Sockets that never authenticate count against their own small cap, not
// max_clients, and at that cap the oldest of them makes room for a new
// connection: however many strangers there are, clients with the password
// still log in and get every one of the max_clients slots.
TEST_F(RespAuthTest, UnauthenticatedClientsCannotHoldTheSlots) {
  RespServerOptions o;
  // One loop, so that every connection meets the same cap (the caps are
  // split among the loops, and which loop takes a connection is up to the
  // kernel). A cap of one stranger at a time.
  o.threads = 1;
  o.limits.max_clients = 4;
  o.limits.max_unauthenticated_clients = 1;
  Start(kPassword, o);
  std::vector<int> strangers;
  // The second stranger pushes the first out.
  for (int i = 0; i < 2; ++i) {
    strangers.push_back(Connect());
    Send(strangers.back(), Cmd({"AUTH", "wrong-guess"}));
    EXPECT_EQ(ReadRaw(strangers.back(), 1), kWrongPass);
  }
  // Four clients log in while a stranger holds the cap: the first pushes it
  // out, and none needs a slot a stranger holds.
  std::vector<int> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(Connect());
    Send(clients.back(), Cmd({"AUTH", kPassword}) + Cmd({"PING"}));
    EXPECT_EQ(ReadRaw(clients.back(), 2), "+OK\r\n+PONG\r\n") << "client " << i;
  }
  for (int fd : strangers) {
    EXPECT_THAT(ReadRaw(fd, 1), HasSubstr("resp_max_unauthenticated_clients"));
    EXPECT_TRUE(ClosedByPeer(fd));
    close(fd);
  }
  strangers.clear();
  EXPECT_EQ(Value(server_->registry(),
                  "kvstore_resp_limit_rejections_total{limit=\"max_unauthenticated_clients\"}"),
            2u);
  // With all four logged in, a stranger still fits its own cap...
  for (int i = 0; i < 1; ++i) {
    strangers.push_back(Connect());
    Send(strangers.back(), Cmd({"PING"}));
    EXPECT_EQ(ReadRaw(strangers.back(), 1), kNoAuth);
  }
  // ...and a fifth client with the password is refused at AUTH: max_clients.
  const int fifth = Connect();
  Send(fifth, Cmd({"AUTH", kPassword}));
  EXPECT_THAT(ReadRaw(fifth, 1), HasSubstr("max number of clients reached"));
  EXPECT_TRUE(ClosedByPeer(fifth));
  close(fifth);
  for (int fd : clients) {
    Send(fd, Cmd({"PING"}));
    EXPECT_EQ(ReadRaw(fd, 1), "+PONG\r\n");
    close(fd);
  }
  for (int fd : strangers) close(fd);
}

TEST_F(RespAuthTest, NoPasswordConfiguredAnswersAsRedis) {
  Start("");
  int fd = Connect();
  Send(fd, Cmd({"AUTH", "x"}) + Cmd({"AUTH", "default", "x"}) + Cmd({"PING"}));
  EXPECT_EQ(ReadRaw(fd, 3),
            "-ERR AUTH <password> called without any password configured for the default user. "
            "Are you sure your configuration is correct?\r\n+OK\r\n+PONG\r\n");
  close(fd);
}

TEST_F(RespAuthTest, RedisCliWithPassword) {
  ProcessResult r = RedisCli({"-a", kPassword, "--no-auth-warning", "SET", "cli", "v1"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "OK\n");
  r = RedisCli({"-a", kPassword, "--no-auth-warning", "GET", "cli"});
  EXPECT_EQ(r.out, "v1\n");
  r = RedisCli({"GET", "cli"});
  EXPECT_THAT(r.out, HasSubstr("NOAUTH Authentication required."));
  r = RedisCli({"-a", "wrong", "--no-auth-warning", "GET", "cli"});
  EXPECT_THAT(r.out, HasSubstr("WRONGPASS"));
}

TEST_F(RespAuthTest, RedisBenchmarkWithPassword) {
  ProcessResult r = RunProcess({"redis-benchmark", "-p", std::to_string(server_->port()), "-a",
                                kPassword, "-t", "set,get", "-n", "2000", "-c", "4", "-q"},
                               60);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("SET:"));
  EXPECT_THAT(r.out, HasSubstr("GET:"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("NOAUTH")));
  EXPECT_EQ(Value(server_->registry(), "kvstore_resp_auth_failures_total"), 0u);
}

}  // namespace
}  // namespace kvstore
