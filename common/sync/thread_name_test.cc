// Copyright 2026 The kvstore Authors.

#include "common/sync/thread_name.h"

#include <pthread.h>

#include <atomic>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace kvstore {
namespace {

std::string NameOf(std::thread& t) {
  char buf[32] = {};
  EXPECT_EQ(pthread_getname_np(t.native_handle(), buf, sizeof(buf)), 0);
  return buf;
}

std::string NameInThread(absl::string_view name) {
  std::string seen;
  std::thread t([&] {
    NameThread(name);
    char buf[32] = {};
    pthread_getname_np(pthread_self(), buf, sizeof(buf));
    seen = buf;
  });
  t.join();
  return seen;
}

TEST(NameThreadTest, NamesTheCallingThreadOnly) {
  const std::string before = [] {
    char buf[32] = {};
    pthread_getname_np(pthread_self(), buf, sizeof(buf));
    return std::string(buf);
  }();
  EXPECT_EQ(NameInThread("kv-cleaner"), "kv-cleaner");
  char buf[32] = {};
  pthread_getname_np(pthread_self(), buf, sizeof(buf));
  EXPECT_EQ(std::string(buf), before);
}

TEST(NameThreadTest, ALongNameIsCutToTheKernelsFifteenBytes) {
  // pthread_setname_np alone would refuse it and leave the old name.
  EXPECT_EQ(NameInThread("kv-replica-installer-sync"), "kv-replica-inst");
}

TEST(NameThreadTest, AnotherThreadSeesTheName) {
  std::atomic<bool> named{false}, done{false};
  std::thread t([&] {
    NameThread("kv-resp-0");
    named = true;
    while (!done) std::this_thread::yield();
  });
  while (!named) std::this_thread::yield();
  EXPECT_EQ(NameOf(t), "kv-resp-0");
  done = true;
  t.join();
}

}  // namespace
}  // namespace kvstore
