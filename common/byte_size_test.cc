// Copyright 2026 The kvstore Authors.

#include "common/byte_size.h"

#include "gtest/gtest.h"

namespace kvstore {
namespace {

TEST(ByteSize, Parses) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("64K"), 64u << 10);
  EXPECT_EQ(*ParseByteSize("512m"), 512u << 20);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*ParseByteSize(" 1 G "), 1ull << 30);
  for (const char* bad : {"", "M", "-1", "1.5G", "12X", "99999999999999999999", "20000000T"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
}

TEST(ByteSize, Formats) {
  EXPECT_EQ(FormatByteSize(100), "100 B");
  EXPECT_EQ(FormatByteSize(512u << 20), "512 MiB");
  EXPECT_EQ(FormatByteSize(3ull << 29), "1.5 GiB");
}

}  // namespace
}  // namespace kvstore
