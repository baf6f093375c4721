// Copyright 2026 The kvstore Authors.

#include "server/resp/glob.h"

#include <string>

#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

TEST(Glob, MatchesAsRedisKeysDoes) {
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("*", "anything"));
  EXPECT_TRUE(GlobMatch("h?llo", "hello"));
  EXPECT_FALSE(GlobMatch("h?llo", "hllo"));
  EXPECT_TRUE(GlobMatch("h*llo", "heeeello"));
  EXPECT_TRUE(GlobMatch("h[ae]llo", "hallo"));
  EXPECT_FALSE(GlobMatch("h[ae]llo", "hillo"));
  EXPECT_TRUE(GlobMatch("h[^e]llo", "hallo"));
  EXPECT_FALSE(GlobMatch("h[^e]llo", "hello"));
  EXPECT_TRUE(GlobMatch("h[a-b]llo", "hbllo"));
  EXPECT_FALSE(GlobMatch("h[a-b]llo", "hcllo"));
  EXPECT_TRUE(GlobMatch("a\\*b", "a*b"));
  EXPECT_FALSE(GlobMatch("a\\*b", "axb"));
  EXPECT_TRUE(GlobMatch("user:*:name", "user:42:name"));
  EXPECT_FALSE(GlobMatch("user:*:name", "user:42:names"));
  EXPECT_TRUE(GlobMatch("*a*b*c*", "xxaxxbxxcxx"));
  EXPECT_FALSE(GlobMatch("*a*b*c*", "xxaxxcxxbxx"));
  EXPECT_FALSE(GlobMatch("abc", "abcd"));
}

TEST(Glob, ManyStarsStayLinear) {
  // A pattern that makes a naive backtracking matcher exponential.
  const std::string text(4000, 'a');
  const std::string pattern = std::string(50, '*') + "a*a*a*a*a*a*a*a*a*b";
  EXPECT_FALSE(GlobMatch(pattern, text));
}

TEST(Glob, LiteralPrefixStopsAtTheFirstSpecialByte) {
  EXPECT_EQ(GlobLiteralPrefix("user:*"), "user:");
  EXPECT_EQ(GlobLiteralPrefix("a\\*b*"), "a*b");
  EXPECT_EQ(GlobLiteralPrefix("?x"), "");
  EXPECT_EQ(GlobLiteralPrefix("plain"), "plain");
}

}  // namespace
}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
