// Copyright 2026 The kvstore Authors.
//
// kvserver on a real RDMA device (a host NIC, or rxe0 in the Soft-RoCE VM of
// tests/rxe): the pool is registered at start-up, the handshake publishes
// remote-read regions for the data arena and the separate index arena, and
// the store serves. Tagged requires-rdma: deploy/test.sh runs it through the
// VM harness.

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/kv_client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/kv_control.grpc.pb.h"
#include "tests/test_cluster.h"

namespace kvstore {
namespace {

using ::testing::HasSubstr;

std::string DeviceFlag() {
  const char* dev = std::getenv("KV_RDMA_DEVICE");
  return absl::StrCat("--rdma_device=", dev ? dev : "");
}

TEST(RdmaServer, RegistersPoolAndPublishesReadOnlyRegions) {
  auto server =
      testing::KvServerProcess::Start({"--pool_size=256M", "--transport=rdma", DeviceFlag()});
  ASSERT_TRUE(server.ok()) << server.status();
  std::printf("%s\n", server->Log().c_str());
  EXPECT_THAT(server->Log(), HasSubstr("registered in"));
  EXPECT_THAT(server->Log(), HasSubstr("transports rdma+tcp"));
  EXPECT_FALSE(server->rdma_device().empty());

  auto channel = grpc::CreateChannel(server->control_address(), grpc::InsecureChannelCredentials());
  auto stub = v1::KvControl::NewStub(channel);
  grpc::ClientContext ctx;
  v1::HandshakeResponse hs;
  ASSERT_TRUE(stub->Handshake(&ctx, v1::HandshakeRequest(), &hs).ok());
  EXPECT_EQ(hs.endpoints().rdma_device(), server->rdma_device());
  uint64_t data_bytes = 0;
  int index_regions = 0;
  for (const auto& r : hs.regions()) {
    EXPECT_NE(r.rkey(), 0u);
    EXPECT_NE(r.addr(), 0u);
    EXPECT_EQ(r.epoch(), hs.epoch());
    if (r.kind() == v1::REGION_KIND_DATA) data_bytes += r.length();
    if (r.kind() == v1::REGION_KIND_INDEX) {
      ++index_regions;
      EXPECT_EQ(r.length(), hs.index().bucket_count() * hs.index().bucket_bytes());
    }
  }
  EXPECT_EQ(data_bytes, 256u << 20);
  EXPECT_EQ(index_regions, 1);

  // The store serves while registered.
  client::Options o;
  o.servers = {server->control_address()};
  o.transport = client::TransportMode::kTcp;
  auto c = client::KvClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Put("k", "v").ok());
  EXPECT_EQ(*(*c)->Get("k"), "v");
  EXPECT_EQ(server->Stop(), 0);
}

TEST(RdmaServer, UnknownDeviceIsAClearStartupError) {
  auto server = testing::KvServerProcess::Start(
      {"--pool_size=64M", "--transport=rdma", "--rdma_device=no_such_dev0"});
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("no_such_dev0"));
}

}  // namespace
}  // namespace kvstore
