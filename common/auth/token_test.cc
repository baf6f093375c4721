// Copyright 2026 The kvstore Authors.

#include "common/auth/token.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace kvstore {
namespace auth {
namespace {

std::string WriteTemp(const std::string& name, const std::string& content) {
  const std::string path = std::string(::testing::TempDir()) + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(TokenTest, ReadsTokenWithoutTrailingNewline) {
  auto token = ReadTokenFile(WriteTemp("t1", "0123456789abcdef0123\n"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "0123456789abcdef0123");
  token = ReadTokenFile(WriteTemp("t2", "0123456789abcdef0123\r\n"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "0123456789abcdef0123");
}

TEST(TokenTest, RefusesShortLongSpacedAndMissing) {
  EXPECT_EQ(ReadTokenFile(WriteTemp("short", "secret\n")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenFile(WriteTemp("long", std::string(5000, 'a'))).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenFile(WriteTemp("space", "0123456789 abcdef0123")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenFile(WriteTemp("empty", "")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenFile("/nonexistent/token").status().code(), absl::StatusCode::kNotFound);
}

TEST(TokenTest, EqualsOnlyForTheSameBytes) {
  EXPECT_TRUE(TokenEquals("0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(TokenEquals("0123456789abcdef", "0123456789abcdeX"));
  EXPECT_FALSE(TokenEquals("0123456789abcdef", "0123456789abcde"));
  EXPECT_FALSE(TokenEquals("0123456789abcdef", "0123456789abcdef0"));
  EXPECT_FALSE(TokenEquals("0123456789abcdef", ""));
  // No token configured never matches, not even the empty string.
  EXPECT_FALSE(TokenEquals("", ""));
}

TEST(TokenTest, BearerRoundTrip) {
  EXPECT_EQ(BearerHeader("abc"), "Bearer abc");
  EXPECT_EQ(TokenFromBearer("Bearer abc"), "abc");
  EXPECT_EQ(TokenFromBearer("bearer abc"), "abc");
  EXPECT_EQ(TokenFromBearer("Basic abc"), "");
  EXPECT_EQ(TokenFromBearer("Bearer "), "");
  EXPECT_EQ(TokenFromBearer(""), "");
}

}  // namespace
}  // namespace auth
}  // namespace kvstore
