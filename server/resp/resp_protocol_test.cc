// Copyright 2026 The kvstore Authors.
//
// The two request forms and two reply protocols of the RESP port, over
// real sockets: inline commands as telnet or nc send them (raw bytes on a
// TCP socket, also in random pieces), and RESP3 after HELLO 3, byte for
// byte and through the real redis-cli -3 (Debian redis-tools). The store
// runs on a fake clock; nothing here waits on wall-clock time.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
using ::kvstore::resp_test::ReadRaw;
using ::kvstore::resp_test::ReadsToEof;
using ::kvstore::resp_test::RedisCli;
using ::kvstore::resp_test::Send;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class RespProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(""); }
  void Start(const std::string& password) {
    server_.reset();
    store_.reset();
    MemoryPoolOptions po;
    po.data_bytes = 64 << 20;
    po.index_bytes = 1 << 20;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.grace_period = absl::Milliseconds(10);
    so.clock = &clock_;
    store_ = *KvStore::Create(pool_.get(), so);
    RespServerOptions o;
    o.port = 0;
    o.threads = 2;
    o.timeout_check_interval = absl::Milliseconds(5);
    o.credentials.data_token = password;
    auto s = RespServer::Start(store_.get(), o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  int Connect() {
    const int fd = resp_test::Connect(server_->port());
    resp_test::SetReceiveTimeout(fd, 60);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  std::string Port() const { return std::to_string(server_->port()); }

  FakeClock clock_;
  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<RespServer> server_;
};

// What a telnet user types: CRLF or LF line ends, quotes, escapes, empty
// lines (ignored), and the array form mixed in on the same connection. An
// inline SET goes through the table (it is not streamed) and stores what
// the quotes and escapes spell.
TEST_F(RespProtocolTest, InlineCommandsOverARawSocket) {
  const int fd = Connect();
  Send(fd, "PING\r\nSET k \"hello\\x20world\\n\"\r\n\r\n   \nGET k\nECHO 'it\\'s'\r\n" +
               Cmd({"GET", "k"}) + "set \"a b\" 'c d'\nMGET k \"a b\" nokey\r\nDEL k\n");
  EXPECT_EQ(ReadRaw(fd, 8),
            "+PONG\r\n+OK\r\n$12\r\nhello world\n\r\n$4\r\nit's\r\n$12\r\nhello world\n\r\n"
            "+OK\r\n*3\r\n$12\r\nhello world\n\r\n$3\r\nc d\r\n$-1\r\n:1\r\n");
  EXPECT_FALSE(store_->Exists("k"));
  EXPECT_EQ(store_->Get("a b")->value(), "c d");
  close(fd);
}

// A slow typist: every request arrives in pieces of 1..5 bytes; the
// replies are those of the whole stream.
TEST_F(RespProtocolTest, InlineLinesArrivingInPieces) {
  const std::string stream = "SET piece \"one two\"\r\nGET piece\n\r\nECHO \"\\x41\\x42\" 'x'\r\n" +
                             Cmd({"GET", "piece"}) + "EXISTS piece nope\nPING\r\n";
  const std::string expected =
      "+OK\r\n$7\r\none two\r\n-ERR wrong number of arguments for 'echo' command\r\n"
      "$7\r\none two\r\n:1\r\n+PONG\r\n";
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int round = 0; round < 5; ++round) {
    const int fd = Connect();
    for (size_t at = 0; at < stream.size();) {
      const size_t n = std::min<size_t>(1 + rng() % 5, stream.size() - at);
      Send(fd, stream.substr(at, n));
      at += n;
    }
    EXPECT_EQ(ReadRaw(fd, 6), expected) << "seed " << seed << " round " << round;
    close(fd);
  }
}

// Framing errors of the inline form reply after the earlier replies, then
// close, as every protocol error does; other connections carry on.
TEST_F(RespProtocolTest, InlineProtocolErrorsClose) {
  const int good = Connect();
  Send(good, "SET g 1\r\n");
  EXPECT_EQ(ReadRaw(good, 1), "+OK\r\n");
  const struct {
    std::string in, out;
  } cases[] = {
      {"PING\r\nECHO \"abc\r\nPING\r\n",
       "+PONG\r\n-ERR Protocol error: unbalanced quotes in request\r\n"},
      {"ECHO 'a'b\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
      {std::string(resp::kMaxInlineBytes + 1, 'x'),
       "-ERR Protocol error: too big inline request\r\n"},
      // A browser's request: the GET line is a (wrong) command, the Host:
      // line ends it, before any body could be read as commands.
      {"GET / HTTP/1.1\r\nHost: localhost\r\n\r\nSET evil 1\r\n",
       "-ERR wrong number of arguments for 'get' command\r\n"
       "-ERR Protocol error: HTTP request ('Host:') on the RESP port\r\n"},
      {"POST /x HTTP/1.1\r\n", "-ERR Protocol error: HTTP request ('POST') on the RESP port\r\n"},
      // A TLS client on the plaintext port: refused at its first byte.
      {std::string("\x16\x03\x01\x02\x00", 5),
       "-ERR Protocol error: expected '*' or an inline command, got '\\x16'\r\n"},
  };
  for (const auto& c : cases) {
    const int fd = Connect();
    Send(fd, c.in);
    EXPECT_EQ(ReadRaw(fd, 2), c.out) << c.in.substr(0, 40);
    EXPECT_TRUE(ReadsToEof(fd)) << c.in.substr(0, 40);
    close(fd);
  }
  EXPECT_FALSE(store_->Exists("evil"));
  Send(good, "GET g\r\n");
  EXPECT_EQ(ReadRaw(good, 1), "$1\r\n1\r\n");
  close(good);
}

// Before AUTH the inline form is held to the same small limits and the
// same refusals as the array form; AUTH works inline.
TEST_F(RespProtocolTest, InlineBeforeAuth) {
  Start("inline-secret-0123456789");
  int fd = Connect();
  Send(fd, "GET k\r\nSET k v\r\nAUTH inline-secret-0123456789\r\nSET k v\r\nGET k\r\n");
  EXPECT_EQ(ReadRaw(fd, 5),
            "-NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n"
            "+OK\r\n+OK\r\n$1\r\nv\r\n");
  close(fd);
  fd = Connect();
  Send(fd, "AUTH a b c d e f g h i\r\n");
  EXPECT_EQ(ReadRaw(fd, 1), "-ERR Protocol error: inline request of 10 arguments (limit 8)\r\n");
  EXPECT_TRUE(ReadsToEof(fd));
  close(fd);
}

// HELLO 3 switches this connection's replies to RESP3 (a map, RESP3 nulls,
// verbatim text); HELLO alone keeps it; HELLO 2 switches back; a refused
// HELLO changes nothing. Other connections stay on RESP2.
TEST_F(RespProtocolTest, HelloThreeSwitchesTheConnectionToResp3) {
  const int fd = Connect();
  const int other = Connect();
  Send(fd, Cmd({"CLIENT", "ID"}));
  const std::string id = ReadRaw(fd, 1).substr(1);  // ":<id>\r\n" -> "<id>\r\n"
  Send(fd, Cmd({"HELLO", "3"}) + Cmd({"SET", "a", "1"}) + Cmd({"GET", "nokey"}) +
               Cmd({"MGET", "a", "nokey"}) + Cmd({"CLIENT", "GETNAME"}) + Cmd({"HELLO"}));
  const std::string map =
      "%7\r\n$6\r\nserver\r\n$7\r\nkvstore\r\n$7\r\nversion\r\n$5\r\n0.1.0\r\n$5\r\nproto\r\n"
      ":3\r\n$2\r\nid\r\n:" +
      id +
      "$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n";
  EXPECT_EQ(ReadRaw(fd, 6), absl::StrCat(map, "+OK\r\n_\r\n*2\r\n$1\r\n1\r\n_\r\n_\r\n", map));
  Send(fd, Cmd({"CLIENT", "INFO"}));
  const std::string info = ReadRaw(fd, 1);
  EXPECT_THAT(info, StartsWith("="));
  EXPECT_THAT(info, HasSubstr("\r\ntxt:id="));
  EXPECT_THAT(info, HasSubstr(" cmd=client|info user=default redir=-1 resp=3 "));
  // Refused: unknown version, bad name; the connection stays on RESP3.
  Send(fd, Cmd({"HELLO", "4"}) + Cmd({"HELLO", "x"}) + Cmd({"HELLO", "2", "SETNAME", "a b"}) +
               Cmd({"GET", "nokey"}));
  EXPECT_EQ(ReadRaw(fd, 4),
            "-NOPROTO unsupported protocol version\r\n"
            "-ERR Protocol version is not an integer or out of range\r\n"
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n_\r\n");
  Send(other, Cmd({"GET", "nokey"}));
  EXPECT_EQ(ReadRaw(other, 1), "$-1\r\n");
  Send(fd,
       Cmd({"HELLO", "2", "SETNAME", "back"}) + Cmd({"GET", "nokey"}) + Cmd({"CLIENT", "GETNAME"}));
  const std::string r2 = ReadRaw(fd, 3);
  EXPECT_THAT(r2, StartsWith("*14\r\n$6\r\nserver\r\n"));
  EXPECT_THAT(r2, HasSubstr("$5\r\nproto\r\n:2\r\n"));
  EXPECT_THAT(r2, ::testing::EndsWith("*0\r\n$-1\r\n$4\r\nback\r\n"));
  close(fd);
  close(other);
}

// The real redis-cli -3: it sends HELLO 3 itself and prints what RESP3
// types it got (a map as "1# ...", RESP3's null as (nil)).
TEST_F(RespProtocolTest, RedisCliResp3) {
  const std::string out =
      RedisCli({"-3", "--no-raw", "-p", Port()},
               "HELLO 3\nSET k v\nGET nokey\nMGET k nokey\nCLIENT SETNAME cli3\nCLIENT INFO\n");
  EXPECT_THAT(out, HasSubstr("1# \"server\" => \"kvstore\"\n"));
  EXPECT_THAT(out, HasSubstr("3# \"proto\" => (integer) 3\n"));
  EXPECT_THAT(out, HasSubstr("7# \"modules\" => (empty array)\n"));
  EXPECT_THAT(out, HasSubstr("OK\n(nil)\n1) \"v\"\n2) (nil)\nOK\n"));
  EXPECT_THAT(out, HasSubstr(" name=cli3 "));
  EXPECT_THAT(out, HasSubstr(" resp=3 "));
  EXPECT_THAT(out, Not(HasSubstr("ERR")));
  // The same commands without -3: RESP2, an array for HELLO 2.
  const std::string out2 =
      RedisCli({"--no-raw", "-p", Port()}, "HELLO 2\nGET nokey\nCLIENT INFO\n");
  EXPECT_THAT(out2, HasSubstr(" 1) \"server\"\n 2) \"kvstore\"\n"));
  EXPECT_THAT(out2, HasSubstr("(nil)\n"));
  EXPECT_THAT(out2, HasSubstr(" resp=2 "));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
