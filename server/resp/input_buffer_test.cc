// Copyright 2026 The kvstore Authors.

#include "server/resp/input_buffer.h"

#include <cstring>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

TEST(InputBuffer, StartsEmptyWithoutMemory) {
  InputBuffer b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.view(), "");
}

TEST(InputBuffer, PrepareThenCommitCountsOnlyWhatWasWritten) {
  InputBuffer b;
  char* room = b.Prepare(64);
  ASSERT_NE(room, nullptr);
  EXPECT_GE(b.capacity(), 64u);
  EXPECT_EQ(b.size(), 0u);  // room is not content
  std::memcpy(room, "PING\r\n", 6);
  b.Commit(6);
  EXPECT_EQ(b.view(), "PING\r\n");
  // A second Prepare() that fits reuses the room right after the content.
  char* more = b.Prepare(8);
  EXPECT_EQ(more, b.data() + 6);
}

TEST(InputBuffer, GrowthKeepsTheBytesAndAtLeastDoubles) {
  InputBuffer b;
  b.Append("abc");
  const size_t cap = b.capacity();
  b.Prepare(cap * 3);
  EXPECT_GE(b.capacity(), 3 + cap * 3);
  EXPECT_EQ(b.view(), "abc");
  b.Prepare(b.capacity() - b.size() + 1);  // one byte more than fits
  EXPECT_GE(b.capacity(), 2 * (3 + cap * 3));
  EXPECT_EQ(b.view(), "abc");
}

TEST(InputBuffer, EraseFrontMovesTheRest) {
  InputBuffer b;
  b.Append("*1\r\n$4\r\nPING\r\n*1\r\n");
  b.EraseFront(14);
  EXPECT_EQ(b.view(), "*1\r\n");
  EXPECT_EQ(b.view(2), "\r\n");
  b.EraseFront(4);
  EXPECT_TRUE(b.empty());
  b.EraseFront(0);
  EXPECT_TRUE(b.empty());
}

TEST(InputBuffer, ClearKeepsCapacityReleaseFreesIt) {
  InputBuffer b;
  b.Append(std::string(1000, 'x'));
  const size_t cap = b.capacity();
  b.clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.capacity(), cap);
  b.Release();
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(InputBuffer, SwapAndMoveExchangeEverything) {
  InputBuffer a, b;
  a.Append("first");
  b.Append(std::string(300, 'y'));
  const size_t cap_b = b.capacity();
  a.swap(b);
  EXPECT_EQ(a.view(), std::string(300, 'y'));
  EXPECT_EQ(a.capacity(), cap_b);
  EXPECT_EQ(b.view(), "first");
  InputBuffer c(std::move(b));
  EXPECT_EQ(c.view(), "first");
  EXPECT_EQ(b.capacity(), 0u);  // NOLINT: moved-from is empty by contract
  c = std::move(a);
  EXPECT_EQ(c.view(), std::string(300, 'y'));
}

// Against std::string as the model: random appends, partial commits and
// front erasures keep the same content.
TEST(InputBuffer, MatchesAStringUnderRandomOperations) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  InputBuffer b;
  std::string model;
  for (int step = 0; step < 5000; ++step) {
    switch (rng() % 3) {
      case 0: {
        const size_t room = rng() % 5000;
        const size_t used = room == 0 ? 0 : rng() % (room + 1);
        char* p = b.Prepare(room);
        for (size_t i = 0; i < used; ++i) p[i] = static_cast<char>('a' + (step + i) % 26);
        b.Commit(used);
        for (size_t i = 0; i < used; ++i) model.push_back(static_cast<char>('a' + (step + i) % 26));
        break;
      }
      case 1: {
        const size_t n = model.empty() ? 0 : rng() % (model.size() + 1);
        b.EraseFront(n);
        model.erase(0, n);
        break;
      }
      case 2:
        if (rng() % 50 == 0) {
          b.clear();
          model.clear();
        }
        break;
    }
    ASSERT_EQ(b.view(), model) << "step " << step << " seed " << seed;
  }
}

}  // namespace
}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
