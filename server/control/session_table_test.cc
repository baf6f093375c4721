// Copyright 2026 The kvstore Authors.

#include "server/control/session_table.h"

#include <cstdio>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "common/metrics/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

using ::testing::HasSubstr;

TEST(SessionTableTest, IdsAreRandomNonZeroAndUsable) {
  metrics::Registry registry;
  SessionTable table(SessionOptions{}, &registry);
  std::set<uint64_t> ids;
  for (int i = 0; i < 100; ++i) {
    auto id = table.Open("peer");
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_NE(*id, 0u);
    ids.insert(*id);
    auto s = table.Use(*id);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)->id, *id);
  }
  EXPECT_EQ(ids.size(), 100u);
  // Not a counter: random ids spread over the high bits too.
  EXPECT_GT(*ids.rbegin(), uint64_t{1} << 40);
  EXPECT_EQ(metrics::testing::Value(registry, "kvstore_sessions_active"), 100u);
  EXPECT_EQ(metrics::testing::Value(registry, "kvstore_sessions_opened_total"), 100u);
}

TEST(SessionTableTest, UnknownSessionIsRefused) {
  metrics::Registry registry;
  SessionTable table(SessionOptions{}, &registry);
  for (uint64_t id : {uint64_t{0}, uint64_t{12345}}) {
    auto s = table.Use(id);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.status().message(), HasSubstr("handshake again"));
  }
}

TEST(SessionTableTest, CapOnSessions) {
  metrics::Registry registry;
  SessionOptions o;
  o.max_sessions = 2;
  SessionTable table(o, &registry);
  ASSERT_TRUE(table.Open("a").ok());
  ASSERT_TRUE(table.Open("b").ok());
  auto third = table.Open("c");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("--max_sessions"));
}

TEST(SessionTableTest, ExpiresOnlyWhenIdleAndWithoutLiveQueuePair) {
  metrics::Registry registry;
  SessionOptions o;
  o.ttl = absl::Seconds(10);
  SessionTable table(o, &registry);
  auto a = table.Open("a");  // will hold a live queue pair
  auto b = table.Open("b");  // idle, no queue pair
  auto c = table.Open("c");  // used recently
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  {
    auto s = table.Use(*a);
    ASSERT_TRUE(s.ok());
    absl::MutexLock lock(&(*s)->mu);
    (*s)->connections.insert(7);
  }
  absl::flat_hash_set<uint64_t> live = {7};
  auto is_live = [&live](uint64_t c) { return live.contains(c); };

  // Not idle long enough: nothing expires.
  EXPECT_TRUE(table.Sweep(absl::Now() + absl::Seconds(5), is_live).empty());

  const absl::Time later = absl::Now() + absl::Seconds(11);
  ASSERT_TRUE(table.Use(*c).ok());  // c's last use is now; later - now > ttl still
  auto expired = table.Sweep(later, is_live);
  std::set<uint64_t> gone;
  for (const auto& e : expired) gone.insert(e.id);
  EXPECT_TRUE(gone.count(*b));
  EXPECT_TRUE(gone.count(*c));
  EXPECT_FALSE(gone.count(*a)) << "a live queue pair keeps its session";
  EXPECT_EQ(table.Use(*b).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(table.Use(*a).ok());

  // Once its queue pair is gone (reaped), the idle session expires and its
  // connections are handed back for disconnection.
  live.clear();
  expired = table.Sweep(absl::Now() + absl::Seconds(11), is_live);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].id, *a);
  EXPECT_EQ(expired[0].connections, std::vector<uint64_t>{7});
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(metrics::testing::Value(registry, "kvstore_sessions_expired_total"), 3u);
}

TEST(SessionTableTest, ExpiredSessionIsClosedForHoldersOfItsPointer) {
  metrics::Registry registry;
  SessionOptions o;
  o.ttl = absl::Seconds(1);
  SessionTable table(o, &registry);
  auto id = table.Open("a");
  ASSERT_TRUE(id.ok());
  auto s = table.Use(*id);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(table.Sweep(absl::Now() + absl::Seconds(2), [](uint64_t) { return false; }).size(), 1u);
  // An RPC that looked the session up before the sweep sees it closed, so
  // it cannot add a queue pair nobody would disconnect.
  absl::MutexLock lock(&(*s)->mu);
  EXPECT_TRUE((*s)->closed);
}

// The sweeper walks every session once a second: at the default cap that
// must stay cheap. Prints the figure; fails only if it is absurd.
TEST(SessionTableTest, SweepAtTheDefaultCapIsCheap) {
  metrics::Registry registry;
  SessionTable table(SessionOptions{}, &registry);
  const size_t n = SessionOptions{}.max_sessions;
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(table.Open("peer").ok());
  EXPECT_EQ(table.Open("one too many").status().code(), absl::StatusCode::kResourceExhausted);
  auto none_live = [](uint64_t) { return false; };
  absl::Time start = absl::Now();
  EXPECT_TRUE(table.Sweep(absl::Now(), none_live).empty());  // none idle yet
  const absl::Duration scan = absl::Now() - start;
  start = absl::Now();
  EXPECT_EQ(table.Sweep(absl::Now() + absl::Minutes(2), none_live).size(), n);
  const absl::Duration expire_all = absl::Now() - start;
  std::printf("sweep of %zu sessions: %s with none idle, %s expiring all\n", n,
              absl::FormatDuration(scan).c_str(), absl::FormatDuration(expire_all).c_str());
  EXPECT_LT(scan, absl::Milliseconds(200));
}

}  // namespace
}  // namespace server
}  // namespace kvstore
