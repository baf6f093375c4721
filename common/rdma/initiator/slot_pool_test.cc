// Copyright 2026 The kvstore Authors.

#include "common/rdma/initiator/slot_pool.h"

#include <atomic>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace initiator {
namespace {

using ::kvstore::testing::Eventually;
using ::kvstore::testing::StatusIs;

// The deadlines below that expire (20 and 50 ms) are not races: nothing
// releases a slot before they pass, however slow the machine. A release
// that must wake a waiter is made once the waiter is known to wait.

TEST(SlotPool, TakesAllOrNothingAndGivesBack) {
  SlotPool pool(4);
  auto a = pool.Acquire(3, absl::InfiniteFuture());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 3u);
  EXPECT_EQ(pool.free(), 1u);
  // Two are not free: nothing is taken while it waits, and it gives up.
  EXPECT_THAT(pool.Acquire(2, absl::Now() + absl::Milliseconds(20)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(pool.free(), 1u);
  pool.Release(*a);
  EXPECT_EQ(pool.free(), 4u);
  EXPECT_EQ(pool.Acquire(5, absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Acquire(0, absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// One slot at a time (the single-key operations): distinct slots while any
// is free, a deadline when none is, and a release wakes a waiter.
TEST(SlotPool, OneAtATime) {
  SlotPool pool(2);
  auto a = pool.AcquireOne(absl::InfiniteFuture());
  auto b = pool.AcquireOne(absl::InfiniteFuture());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(pool.free(), 0u);
  EXPECT_EQ(pool.AcquireOne(absl::Now() + absl::Milliseconds(20)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  std::thread releaser([&] {
    EXPECT_TRUE(Eventually([&] { return pool.waiting() == 1; }));
    pool.ReleaseOne(*a);
  });
  auto c = pool.AcquireOne(absl::InfiniteFuture());
  releaser.join();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, *a);
  pool.ReleaseOne(*b);
  pool.ReleaseOne(*c);
  EXPECT_EQ(pool.free(), 2u);
}

// Finding 8's shape: 4 threads x 16 slots hold all 64 and each asks for one
// more. The wait ends at its deadline instead of never.
TEST(SlotPool, HoldersWaitingForMoreGiveUpAtTheirDeadline) {
  SlotPool pool(64);
  std::atomic<int> holding{0};
  std::atomic<int> timed_out{0};
  std::atomic<int> attempted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto held = pool.Acquire(16, absl::InfiniteFuture());
      ASSERT_TRUE(held.ok());
      holding++;
      while (holding.load() < 4) std::this_thread::yield();
      auto more = pool.Acquire(1, absl::Now() + absl::Milliseconds(50));
      if (more.status().code() == absl::StatusCode::kDeadlineExceeded) timed_out++;
      // Held until every thread has tried, as a batch holds its slots.
      attempted++;
      while (attempted.load() < 4) std::this_thread::yield();
      pool.Release(*held);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(timed_out.load(), 4);
  EXPECT_EQ(pool.free(), 64u);
}

// A waiter is woken as soon as enough slots come back.
TEST(SlotPool, WaiterGetsSlotsWhenReleased) {
  SlotPool pool(2);
  auto held = pool.Acquire(2, absl::InfiniteFuture());
  ASSERT_TRUE(held.ok());
  std::thread releaser([&] {
    EXPECT_TRUE(Eventually([&] { return pool.waiting() == 1; }));
    pool.Release(*held);
  });
  auto got = pool.Acquire(2, absl::InfiniteFuture());
  releaser.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 2u);
}

// Threads take single slots and batches and give them back, many times:
// no slot is ever held by two at once (each holder marks what it holds),
// every wait ends, and every slot comes back.
TEST(SlotPool, ConcurrentTakersNeverShareASlot) {
  const uint32_t seed = std::random_device{}();
  std::printf("ConcurrentTakersNeverShareASlot seed %u\n", seed);
  SlotPool pool(8);
  std::atomic<int> owner[8];
  for (auto& o : owner) o.store(-1);
  std::atomic<int> shared{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(seed + t);
      for (int round = 0; round < 20000; ++round) {
        const size_t n = rng() % 4 == 0 ? 1 + rng() % 3 : 1;
        std::vector<int> held;
        if (n == 1) {
          auto one = pool.AcquireOne(absl::InfiniteFuture());
          ASSERT_TRUE(one.ok()) << one.status();
          held.push_back(*one);
        } else {
          auto many = pool.Acquire(n, absl::InfiniteFuture());
          ASSERT_TRUE(many.ok()) << many.status();
          held = *many;
        }
        for (int s : held) {
          int none = -1;
          if (!owner[s].compare_exchange_strong(none, t)) shared++;
        }
        for (int s : held) owner[s].store(-1);
        if (n == 1) {
          pool.ReleaseOne(held[0]);
        } else {
          pool.Release(held);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(shared.load(), 0);
  EXPECT_EQ(pool.free(), 8u);
  EXPECT_EQ(pool.waiting(), 0u);
}

// Sizes beyond one word are clamped, and the largest pool hands out every
// one of its 64 slots.
TEST(SlotPool, SixtyFourSlotsAllUsable) {
  SlotPool pool(100);
  auto all = pool.Acquire(64, absl::InfiniteFuture());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 64u);
  EXPECT_EQ(pool.free(), 0u);
  EXPECT_EQ(pool.Acquire(65, absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kInvalidArgument);
  pool.Release(*all);
  EXPECT_EQ(pool.free(), 64u);
  auto last = pool.AcquireOne(absl::InfiniteFuture());
  ASSERT_TRUE(last.ok());
  pool.ReleaseOne(*last);
}

}  // namespace
}  // namespace initiator
}  // namespace kvstore
