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

}  // namespace
}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
