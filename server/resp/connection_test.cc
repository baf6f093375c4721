// Copyright 2026 The kvstore Authors.
//
// The reply methods of Connection whose bytes depend on the connection's
// protocol (RESP2 until HELLO 3, then RESP3): exact bytes in both.

#include "server/resp/connection.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

std::string Queued(const Connection& c) {
  std::string out;
  for (const OutChunk& chunk : c.out) out.append(chunk.data().data(), chunk.data().size());
  return out;
}

// Every protocol-dependent reply, in the order of the expected strings.
std::string AllShapes(int protocol) {
  Connection c(/*fd_in=*/7);
  c.protocol = protocol;
  c.ReplyNull();
  c.ReplyMapHeader(2);
  c.ReplySetHeader(3);
  c.ReplyDouble(1.5);
  c.ReplyDouble(-HUGE_VAL);
  c.ReplyDouble(std::nan(""));
  c.ReplyBool(true);
  c.ReplyBool(false);
  c.ReplyVerbatim("id=1 name=\n");
  EXPECT_EQ(c.out_bytes, Queued(c).size());
  return Queued(c);
}

TEST(ConnectionTest, Resp2Shapes) {
  EXPECT_EQ(AllShapes(2),
            "$-1\r\n*4\r\n*3\r\n$3\r\n1.5\r\n$4\r\n-inf\r\n$3\r\nnan\r\n:1\r\n:0\r\n"
            "$11\r\nid=1 name=\n\r\n");
}

TEST(ConnectionTest, Resp3Shapes) {
  EXPECT_EQ(AllShapes(3),
            "_\r\n%2\r\n~3\r\n,1.5\r\n,-inf\r\n,nan\r\n#t\r\n#f\r\n=15\r\ntxt:id=1 name=\n\r\n");
}

// What does not differ stays RESP2's bytes on a RESP3 connection.
TEST(ConnectionTest, SharedShapesDoNotChange) {
  Connection c(/*fd_in=*/7);
  c.protocol = 3;
  c.ReplyOk();
  c.ReplyInteger(5);
  c.ReplyBulk("v");
  c.ReplyArrayHeader(1);
  c.ReplyError("ERR x");
  EXPECT_EQ(Queued(c), "+OK\r\n:5\r\n$1\r\nv\r\n*1\r\n-ERR x\r\n");
}

// What Flush() does with a chunk it wrote completely.
void WriteAll(Connection* c) {
  while (!c->out.empty()) {
    c->RecycleOwned(std::move(c->out.front().owned));
    c->out.pop_front();
  }
}

// A reply split around another chunk (a value sent zero-copy, or a parked
// SET's held place) fills two reply strings. Both are kept once written, so
// the next such batch reuses them; with one kept, every pipelined batch of
// 4 KiB GETs that ended in a zero-copy value allocated and freed a 64 KiB
// string.
TEST(ConnectionTest, ABatchSplitInTwoReusesBothReplyStrings) {
  Connection c(/*fd_in=*/7);
  for (int batch = 0; batch < 3; ++batch) {
    c.ReplyOk();
    const uint64_t held = c.Hold();
    c.ReplyOk();
    ASSERT_EQ(c.out.size(), 3u);
    EXPECT_EQ(c.out_spares.size(), 0u) << "batch " << batch << " took both kept strings";
    c.Answer(held, [&c] { c.ReplyInteger(1); });
    EXPECT_EQ(Queued(c), "+OK\r\n:1\r\n+OK\r\n");
    WriteAll(&c);
    ASSERT_EQ(c.out_spares.size(), 2u) << "batch " << batch;  // one per string filled
    for (const std::string& spare : c.out_spares) {
      EXPECT_TRUE(spare.empty());
      EXPECT_GE(spare.capacity(), Connection::kOutChunkBytes);
    }
  }
  // Strings that are not worth keeping are dropped: too small to serve as a
  // reply string, too large to hold on to, or beyond kOutSpares.
  std::string small(10, 'x'), huge;
  huge.reserve(4 * Connection::kOutChunkBytes);
  c.out_spares.clear();
  c.RecycleOwned(std::move(small));
  c.RecycleOwned(std::move(huge));
  EXPECT_EQ(c.out_spares.size(), 0u);
  for (int i = 0; i < 3; ++i) {
    std::string chunk;
    chunk.reserve(Connection::kOutChunkBytes);
    c.RecycleOwned(std::move(chunk));
  }
  EXPECT_EQ(c.out_spares.size(), Connection::kOutSpares);
}

}  // namespace
}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
