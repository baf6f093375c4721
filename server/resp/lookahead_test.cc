// Copyright 2026 The kvstore Authors.

#include "server/resp/lookahead.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

std::string Get(const std::string& k) {
  return "*2\r\n$3\r\nGET\r\n$" + std::to_string(k.size()) + "\r\n" + k + "\r\n";
}
std::string Set(const std::string& k, const std::string& v) {
  return "*3\r\n$3\r\nset\r\n$" + std::to_string(k.size()) + "\r\n" + k + "\r\n$" +
         std::to_string(v.size()) + "\r\n" + v + "\r\n";
}

std::vector<std::string> Peek(const std::string& buf, size_t max = 8) {
  absl::string_view keys[8];
  const size_t n = PeekKeys(buf, keys, max);
  return std::vector<std::string>(keys, keys + n);
}

TEST(PeekKeys, FindsPipelinedGetAndSetKeysInOrder) {
  EXPECT_THAT(Peek(Get("a") + Set("bb", "value\r\nwith crlf") + Get("ccc")),
              testing::ElementsAre("a", "bb", "ccc"));
}

TEST(PeekKeys, StopsAtMax) {
  EXPECT_THAT(Peek(Get("a") + Get("b") + Get("c"), 2), testing::ElementsAre("a", "b"));
  EXPECT_THAT(Peek(Get("a"), 0), testing::ElementsAre());
}

TEST(PeekKeys, StopsAtOtherCommands) {
  EXPECT_THAT(Peek(Get("a") + "*1\r\n$4\r\nPING\r\n" + Get("b")), testing::ElementsAre("a"));
  // GET with the wrong arity, SET with options, inline commands.
  EXPECT_THAT(Peek("*3\r\n$3\r\nGET\r\n$1\r\na\r\n$1\r\nb\r\n"), testing::ElementsAre());
  EXPECT_THAT(Peek("*4\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb\r\n$2\r\nNX\r\n"),
              testing::ElementsAre());
  EXPECT_THAT(Peek("GET a\r\n"), testing::ElementsAre());
}

TEST(PeekKeys, IncompleteInputEndsThePeek) {
  const std::string full = Get("key1") + Set("key2", std::string(100, 'v')) + Get("key3");
  // Every prefix yields a prefix of the keys and never reads past the end.
  for (size_t len = 0; len <= full.size(); ++len) {
    const std::vector<std::string> keys = Peek(full.substr(0, len));
    const std::vector<std::string> all = {"key1", "key2", "key3"};
    ASSERT_LE(keys.size(), all.size());
    for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(keys[i], all[i]) << len;
  }
  // A SET whose value is still arriving gives its key, then stops.
  EXPECT_THAT(Peek(Get("a") + "*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$5\r\nab"),
              testing::ElementsAre("a", "b"));
}

TEST(PeekKeys, MalformedFramingFindsNothing) {
  EXPECT_THAT(Peek("*2\r\n$3\r\nGET\r\n$5\r\nab\r\n"), testing::ElementsAre());
  EXPECT_THAT(Peek("*2\r\n$x\r\nGET\r\n"), testing::ElementsAre());
  EXPECT_THAT(Peek("*2\r\n$99999999999999999999\r\n"), testing::ElementsAre());
  EXPECT_THAT(Peek("*2\r\n$3\r\nGETxx$1\r\na\r\n"), testing::ElementsAre());
}

}  // namespace
}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
