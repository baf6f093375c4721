// Copyright 2026 The kvstore Authors.

#include "common/cluster/slots.h"

#include <string>

#include "gtest/gtest.h"

namespace kvstore {
namespace cluster {
namespace {

TEST(Crc16, MatchesTheXmodemCheckValue) { EXPECT_EQ(Crc16("123456789"), 0x31C3); }

// Expected slots were printed by Debian's redis-server 7.0 (CLUSTER KEYSLOT,
// cluster-enabled), so a cluster-aware Redis client routes as we do.
TEST(KeySlot, AgreesWithRedisCluster) {
  EXPECT_EQ(KeySlot("foo"), 12182u);
  EXPECT_EQ(KeySlot("bar"), 5061u);
  EXPECT_EQ(KeySlot("hello"), 866u);
  EXPECT_EQ(KeySlot("123456789"), 12739u);
  EXPECT_EQ(KeySlot(""), 0u);
}

TEST(KeySlot, HonoursHashTagsAsRedisDoes) {
  EXPECT_EQ(KeySlot("{user1000}.following"), 3443u);
  EXPECT_EQ(KeySlot("user1000"), 3443u);
  EXPECT_EQ(KeySlot("foo{}{bar}"), 8363u);     // empty first tag: whole key
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), 4015u);  // tag is "{bar"
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), 5061u);  // first tag only: "bar"
  EXPECT_EQ(KeySlot("{}x"), 10595u);
  EXPECT_EQ(KeySlot("a{b"), 13340u);  // no closing brace
  EXPECT_EQ(HashTag("x{tag}y"), "tag");
}

TEST(KeySlot, IsBinarySafe) {
  const std::string key("a\0{b}", 5);
  EXPECT_EQ(KeySlot(key), KeySlot("b"));
  EXPECT_LT(KeySlot(std::string("\xff\xfe", 2)), kSlotCount);
}

}  // namespace
}  // namespace cluster
}  // namespace kvstore
