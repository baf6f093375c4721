// Copyright 2026 The kvstore Authors.
//
// TcpDataPath against a fake RESP server on loopback, with the test-only
// failpoints of tcp_failpoints.h to stop its threads at exact points.

#include "client/internal/tcp/tcp_data_path.h"

#include <atomic>

#include "absl/time/clock.h"
#include "client/internal/tcp/tcp_failpoints.h"
#include "common/protocol/limits.h"
#include "common/testing/eventually.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_resp_server.h"

namespace kvstore {
namespace client {
namespace {

using ::kvstore::testing::Eventually;
using ::kvstore::testing::FakeRespServer;

// The race: a sender finds its connection up, then, before it queues its
// reply waiter, the connection's reader fails and answers everything queued.
// The request must not be queued behind that reader (nothing would ever
// answer it: the caller would wait until its deadline, or forever without
// one); it goes out on a new connection instead.
TEST(TcpDataPathTest, RequestRacingTheReadersFailureIsSentOnANewConnection) {
  FakeRespServer server;
  auto path = TcpDataPath::Connect(server.address(), 1, Limits(), absl::Seconds(2));
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE((*path)->Put("k", "v", absl::Now() + absl::Seconds(5)).ok());
  ASSERT_EQ(server.accepted(), 1);

  std::atomic<int> drains{0};
  tcp_failpoints::SetAfterDrainForTest([&drains] { drains++; });
  bool raced = false;
  tcp_failpoints::SetBeforeQueueForTest([&] {
    if (raced) return;
    raced = true;
    // Between the sender's check and its queueing: the server drops the
    // connection and the reader fails and drains its queue.
    server.DropConnections();
    EXPECT_TRUE(Eventually([&] { return drains.load() > 0; }));
  });

  const absl::Time start = absl::Now();
  // A request queued behind the dead reader would wait out this deadline.
  absl::Status s = (*path)->Put("k", "v2", absl::Now() + absl::Seconds(60));
  tcp_failpoints::SetBeforeQueueForTest(nullptr);
  tcp_failpoints::SetAfterDrainForTest(nullptr);

  ASSERT_TRUE(raced);
  ASSERT_EQ(drains.load(), 1) << "the reader never failed: the race did not happen";
  EXPECT_TRUE(s.ok()) << s << " after " << absl::Now() - start;
  EXPECT_EQ(server.accepted(), 2) << "the request should have gone out on a new connection";
}

}  // namespace
}  // namespace client
}  // namespace kvstore
