// Copyright 2026 The kvstore Authors.
//
// The command table and dispatch, without sockets: each test runs commands
// against a small store and reads the bytes queued on a Connection.

#include "server/resp/commands.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/metrics/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryPoolOptions po;
    po.data_bytes = 16 << 20;
    po.index_bytes = 1 << 20;
    pool_ = *MemoryPool::Create(po);
    KvStoreOptions so;
    so.segment_bytes = 1 << 20;
    so.grace_period = absl::Milliseconds(10);
    store_ = *KvStore::Create(pool_.get(), so);
    writer_ = store_->NewWriter();
  }

  // Runs one command and returns the bytes it queued.
  std::string Run(std::vector<absl::string_view> args) {
    Connection conn(/*fd_in=*/7);
    const CommandContext ctx{store_.get(), writer_.get(), &options_, &counters_, &conn};
    DispatchCommand(ctx, args);
    std::string out;
    for (const OutChunk& chunk : conn.out) out.append(chunk.data().data(), chunk.data().size());
    return out;
  }

  std::unique_ptr<MemoryPool> pool_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<KvStore::Writer> writer_;
  RespServerOptions options_;
  metrics::Registry registry_;
  Counters counters_{&registry_};
};

TEST_F(CommandsTest, LookupIgnoresCase) {
  ASSERT_NE(FindCommand("get"), nullptr);
  EXPECT_EQ(FindCommand("get"), FindCommand("GeT"));
  EXPECT_EQ(FindCommand("get")->name, "GET");
  EXPECT_EQ(FindCommand("NOSUCH"), nullptr);
  EXPECT_EQ(FindCommand(""), nullptr);
  EXPECT_EQ(FindCommand("GETX"), nullptr);
}

TEST_F(CommandsTest, ArityRules) {
  const CommandSpec& mset = *FindCommand("MSET");
  EXPECT_FALSE(ArityOk(mset, 1));
  EXPECT_FALSE(ArityOk(mset, 2));
  EXPECT_TRUE(ArityOk(mset, 3));
  EXPECT_FALSE(ArityOk(mset, 4));
  EXPECT_TRUE(ArityOk(mset, 5));
  const CommandSpec& scan = *FindCommand("SCAN");
  EXPECT_TRUE(ArityOk(scan, 2));
  EXPECT_FALSE(ArityOk(scan, 3));
  EXPECT_TRUE(ArityOk(scan, 4));
  const CommandSpec& ping = *FindCommand("PING");
  EXPECT_TRUE(ArityOk(ping, 1));
  EXPECT_TRUE(ArityOk(ping, 2));
  EXPECT_FALSE(ArityOk(ping, 3));
}

TEST_F(CommandsTest, UnknownCommandErrorIsRedisText) {
  EXPECT_EQ(Run({"NOSUCH", "a"}), "-ERR unknown command 'NOSUCH'\r\n");
  // Non-printable bytes (CR/LF included) are shown as '?'; long names cut.
  EXPECT_EQ(Run({"a\r\nb\x01"}), "-ERR unknown command 'a??b?'\r\n");
  EXPECT_EQ(Run({std::string(100, 'x')}),
            "-ERR unknown command '" + std::string(64, 'x') + "'\r\n");
}

TEST_F(CommandsTest, WrongArityErrorIsRedisText) {
  EXPECT_EQ(Run({"GeT"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(Run({"GET", "a", "b"}), "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(Run({"MSET", "a", "1", "b"}), "-ERR wrong number of arguments for 'mset' command\r\n");
  EXPECT_EQ(Run({"SCAN", "0", "COUNT"}), "-ERR wrong number of arguments for 'scan' command\r\n");
  EXPECT_EQ(Run({"PING", "a", "b"}), "-ERR wrong number of arguments for 'ping' command\r\n");
  EXPECT_EQ(Run({"SET", "k"}), "-ERR wrong number of arguments for 'set' command\r\n");
  EXPECT_EQ(Run({"DEL"}), "-ERR wrong number of arguments for 'del' command\r\n");
}

TEST_F(CommandsTest, RepliesAreTheSameBytesAsBefore) {
  EXPECT_EQ(Run({"PING"}), "+PONG\r\n");
  EXPECT_EQ(Run({"PING", "hi"}), "$2\r\nhi\r\n");
  EXPECT_EQ(Run({"MSET", "a", "1", "b", "22"}), "+OK\r\n");
  EXPECT_EQ(Run({"GET", "b"}), "$2\r\n22\r\n");
  EXPECT_EQ(Run({"GET", "zz"}), "$-1\r\n");
  EXPECT_EQ(Run({"MGET", "a", "zz"}), "*2\r\n$1\r\n1\r\n$-1\r\n");
  EXPECT_EQ(Run({"EXISTS", "a", "b", "zz"}), ":2\r\n");
  EXPECT_EQ(Run({"DBSIZE"}), ":2\r\n");
  EXPECT_EQ(Run({"UNLINK", "a", "zz"}), ":1\r\n");
  EXPECT_EQ(Run({"COMMAND", "COUNT"}), ":53\r\n");
  // Redis 6's entry shape, which cluster clients read keys positions from.
  EXPECT_EQ(Run({"COMMAND", "INFO", "get", "nope"}),
            "*2\r\n*7\r\n$3\r\nget\r\n:2\r\n*1\r\n+readonly\r\n:1\r\n:1\r\n:1\r\n*0\r\n$-1\r\n");
  EXPECT_THAT(Run({"COMMAND", "INFO", "mset"}),
              ::testing::HasSubstr("$4\r\nmset\r\n:-3\r\n*1\r\n+write\r\n:1\r\n:-1\r\n:2\r\n"));
  EXPECT_EQ(Run({"COMMAND", "DOCS"}), "*0\r\n");
  EXPECT_EQ(Run({"CONFIG", "GET", "appendonly"}), "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
  EXPECT_EQ(Run({"SELECT", "0"}), "+OK\r\n");
  EXPECT_EQ(Run({"SELECT", "1"}), "-ERR only database 0 exists\r\n");
  EXPECT_EQ(Run({"HELLO", "4"}), "-NOPROTO unsupported protocol version\r\n");
  EXPECT_EQ(Run({"SET", "k", "v", "NX"}), "+OK\r\n");
  EXPECT_EQ(Run({"SET", "k", "v", "NX"}), "$-1\r\n");  // NX did not hold
  EXPECT_EQ(Run({"SET", "k", "v", "BOGUS"}), "-ERR syntax error\r\n");
  EXPECT_EQ(Run({"GET", ""}), "-ERR key is empty\r\n");
  EXPECT_EQ(Run({"SCAN", "x"}), "-ERR invalid cursor\r\n");
  EXPECT_EQ(Run({"SCAN", "0", "MATCH", "a*b"}),
            "-ERR only prefix MATCH patterns ending in '*' are supported\r\n");
  // 2 GETs + the 2 keys of the MGET (a hit and a miss).
  EXPECT_EQ(metrics::testing::Value(registry_,
                                    R"(kvstore_server_requests_total{op="get",transport="tcp"})"),
            4u);
  // The MSET's two pairs and the two SET NX (each one write, whether or
  // not NX held).
  EXPECT_EQ(metrics::testing::Value(registry_,
                                    R"(kvstore_server_requests_total{op="put",transport="tcp"})"),
            4u);
}

TEST_F(CommandsTest, QuitClosesAfterTheReply) {
  Connection conn(/*fd_in=*/7);
  const CommandContext ctx{store_.get(), writer_.get(), &options_, &counters_, &conn};
  std::vector<absl::string_view> args = {"quit"};
  DispatchCommand(ctx, args);
  EXPECT_TRUE(conn.close_after_flush);
  EXPECT_FALSE(conn.reading);
}

}  // namespace
}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
