// Copyright 2026 The kvstore Authors.

#include "server/net/batch_scope.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace net {
namespace {

TEST(BatchScope, OutsideAScopeNothingIsDeferred) {
  EXPECT_FALSE(BatchScope::Active());
  bool ran = false;
  EXPECT_FALSE(BatchScope::Defer([&] { ran = true; }));
  EXPECT_FALSE(ran);  // the caller starts it itself
}

TEST(BatchScope, TheOutermostScopeRunsWhatWasDeferredInOrder) {
  std::string order;
  {
    BatchScope outer;
    EXPECT_TRUE(BatchScope::Active());
    EXPECT_TRUE(BatchScope::Defer([&] { order += "a"; }));
    {
      BatchScope inner;
      EXPECT_TRUE(BatchScope::Defer([&] { order += "b"; }));
    }
    EXPECT_EQ(order, "");  // the inner scope ran nothing
    EXPECT_TRUE(BatchScope::Defer([&] { order += "c"; }));
  }
  EXPECT_EQ(order, "abc");
  EXPECT_FALSE(BatchScope::Active());
}

TEST(BatchScope, AtTheScopesEndWhatAStartWouldDeferRunsAtOnce) {
  std::string order;
  {
    BatchScope scope;
    BatchScope::Defer([&] {
      order += "a";
      EXPECT_FALSE(BatchScope::Active());
      EXPECT_FALSE(BatchScope::Defer([&] { order += "x"; }));  // the caller starts it
      order += "b";
    });
  }
  EXPECT_EQ(order, "ab");
}

TEST(BatchScope, InsideAScopeAStartMayDeferAgainAndRunsInTheSameDrain) {
  std::string order;
  BatchScope scope;
  BatchScope::Defer([&] {
    order += "a";
    EXPECT_TRUE(BatchScope::Defer([&] { order += "b"; }));
  });
  BatchScope::RunDeferred();
  EXPECT_EQ(order, "ab");
}

TEST(BatchScope, RunDeferredInsideAScopeRunsNowAndOnlyOnce) {
  int runs = 0;
  {
    BatchScope scope;
    BatchScope::Defer([&] { ++runs; });
    BatchScope::RunDeferred();  // as a thread about to block does
    EXPECT_EQ(runs, 1);
  }
  EXPECT_EQ(runs, 1);
}

TEST(BatchScope, AStartThatWaitsRunsOnlyWhatWasDeferredAfterIt) {
  // A start that blocks calls RunDeferred() again (a RESP loop waiting for
  // a lock serves first: RespLoop::ServeFor): the nested call must run the
  // later starts once each, never one already run or running (the earlier
  // version called a moved-from start: std::bad_function_call).
  std::vector<int> order;
  {
    BatchScope scope;
    BatchScope::Defer([&] {
      order.push_back(1);
      EXPECT_TRUE(BatchScope::Defer([&] { order.push_back(3); }));
      BatchScope::RunDeferred();  // runs 3 only; 2 is the outer call's
      order.push_back(10);
    });
    BatchScope::Defer([&] { order.push_back(2); });
    BatchScope::RunDeferred();  // inside the scope, as a thread about to block
    EXPECT_EQ(order, (std::vector<int>{1, 3, 10, 2}));
  }
  EXPECT_EQ(order.size(), 4u);
}

TEST(BatchScope, ScopesArePerThread) {
  BatchScope scope;
  bool deferred_elsewhere = true;
  std::thread other([&] { deferred_elsewhere = BatchScope::Defer([] {}); });
  other.join();
  EXPECT_FALSE(deferred_elsewhere);
}

}  // namespace
}  // namespace net
}  // namespace server
}  // namespace kvstore
