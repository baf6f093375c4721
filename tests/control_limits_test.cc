// Copyright 2026 The kvstore Authors.
//
// Per-call work bounds of the gRPC control port of a whole KvServer (in
// process, TCP only): Scan walks at most the bucket budget RESP SCAN has
// (--resp_scan_max_buckets) per call, however sparse the index.

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/kv_control.grpc.pb.h"
#include "server/kv_server.h"

namespace kvstore {
namespace server {
namespace {

namespace pb = ::kvstore::v1;

KvServerOptions SmallServer() {
  KvServerOptions o;
  o.control_port = 0;
  o.resp_port = 0;
  o.pool_bytes = 16ull << 20;
  o.segment_bytes = 1ull << 20;
  o.transport = ServerTransport::kTcp;
  return o;
}

// A prefix no key has, over an empty index of 64 Ki buckets with a budget
// of 1024: each call stops after the budget and hands back the cursor to go
// on from, instead of walking the whole index in one call.
TEST(ControlLimitsTest, ScanVisitsAtMostTheBucketBudget) {
  KvServerOptions o = SmallServer();
  o.index_buckets = 1 << 16;
  o.resp_limits.scan_max_buckets = 1024;
  auto server = KvServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::KvControl::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->control_port()), grpc::InsecureChannelCredentials()));
  auto scan = [&stub](uint64_t cursor) {
    grpc::ClientContext ctx;
    pb::ScanRequest req;
    req.set_cursor(cursor);
    req.set_prefix("no-such-prefix/");
    pb::ScanResponse resp;
    grpc::Status s = stub->Scan(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.keys_size(), 0);
    return resp.cursor();
  };
  EXPECT_EQ(scan(0), 1024u);
  EXPECT_EQ(scan(1024), 2048u);
  // The last page ends the listing with cursor 0.
  EXPECT_EQ(scan((1 << 16) - 1024), 0u);
}

}  // namespace
}  // namespace server
}  // namespace kvstore
