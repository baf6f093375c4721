// Copyright 2026 The kvstore Authors.

#include "server/net/batch_scope.h"

#include <string>
#include <thread>

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
