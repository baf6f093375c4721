// Copyright 2026 The kvstore Authors.

#include "server/resp/ring_queue.h"

#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace resp_internal {
namespace {

// Counts live instances that hold a value, so the test sees when an
// element's destructor ran.
struct Tracked {
  static int live;
  int value = -1;
  Tracked() = default;
  Tracked(Tracked&& o) noexcept : value(o.value) {
    if (value >= 0) ++live;
  }
  Tracked& operator=(Tracked&& o) noexcept {
    if (value >= 0) --live;
    value = o.value;
    if (value >= 0) ++live;
    return *this;
  }
  ~Tracked() {
    if (value >= 0) --live;
  }
  void Set(int v) {
    if (value < 0) ++live;
    value = v;
  }
};
int Tracked::live = 0;

std::vector<int> Contents(const RingQueue<Tracked>& q) {
  std::vector<int> out;
  for (const Tracked& t : q) out.push_back(t.value);
  return out;
}

// Random pushes and pops against std::deque, through wrap-arounds and
// growth in the middle of a wrapped ring: the same order, front and back,
// and a popped element's destructor has run (a reply chunk's pin is
// released when it is written, not when its slot is reused).
TEST(RingQueueTest, BehavesAsAFifo) {
  const uint32_t seed = std::random_device{}();
  std::printf("ring queue seed %u\n", seed);
  std::mt19937 rng(seed);
  RingQueue<Tracked> q;
  std::deque<int> model;
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    // Pushes slightly ahead of pops, so the ring grows now and then.
    if (model.empty() || rng() % 100 < 52) {
      q.emplace_back().Set(next);
      model.push_back(next++);
    } else {
      ASSERT_EQ(q.front().value, model.front()) << "step " << step;
      q.pop_front();
      model.pop_front();
    }
    ASSERT_EQ(q.size(), model.size());
    ASSERT_EQ(Tracked::live, static_cast<int>(model.size())) << "step " << step;
    if (!model.empty()) ASSERT_EQ(q.back().value, model.back());
    if (step % 997 == 0) {
      ASSERT_EQ(Contents(q), std::vector<int>(model.begin(), model.end())) << "step " << step;
    }
  }
  while (!q.empty()) q.pop_front();
  EXPECT_EQ(Tracked::live, 0);
}

// One in, one out (a connection's life between pipelines) never grows the
// ring; Release() frees an empty ring's slots and it works after.
TEST(RingQueueTest, SteadyTrafficReusesItsSlots) {
  RingQueue<std::string> q;
  q.emplace_back() = "first";
  const size_t slots = q.capacity();
  for (int i = 0; i < 1000; ++i) {
    q.push_back(std::string(100, 'a' + i % 26));
    q.pop_front();
  }
  EXPECT_EQ(q.capacity(), slots);
  EXPECT_EQ(q.front(), std::string(100, 'a' + 999 % 26));
  q.Release();  // not empty: nothing happens
  EXPECT_EQ(q.capacity(), slots);
  q.pop_front();
  q.Release();
  EXPECT_EQ(q.capacity(), 0u);
  q.emplace_back() = "again";
  EXPECT_EQ(q.front(), "again");
  EXPECT_EQ(q.size(), 1u);
}

}  // namespace
}  // namespace resp_internal
}  // namespace server
}  // namespace kvstore
