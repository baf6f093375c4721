// Copyright 2026 The kvstore Authors.
//
// Admin requests sent to a node that is not the controller are forwarded to
// it once, never on: a request that arrives already forwarded at a node that
// does not lead is refused (UNAVAILABLE, retry), so two nodes that each
// believe the other leads, as during an election, cannot pass it between
// them. Against a real cluster: etcd and three kvserver processes.

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "tests/cluster/cluster_harness.h"
#include "tests/cluster/etcd_process.h"

namespace kvstore {
namespace testing {
namespace {

using ::testing::HasSubstr;

grpc::Status DryRunRebalance(const std::string& address, bool marked_forwarded) {
  auto stub =
      v1::KvCluster::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (marked_forwarded)
    ctx.AddMetadata("kvstore-forwarded", "1");  // peer_client.h kAdminForwardedKey
  v1::RebalanceRequest req;
  req.set_dry_run(true);
  v1::RebalanceResponse resp;
  return stub->Rebalance(&ctx, req, &resp);
}

TEST(AdminForwardTest, AForwardedRequestIsNeverForwardedAgain) {
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.Start().ok());
  ClusterOptions o;
  o.etcd_endpoint = etcd.endpoint();
  o.nodes = 3;
  o.replicas = 2;
  auto started = ClusterHarness::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  ClusterHarness& cluster = **started;
  absl::Status healthy = cluster.WaitHealthy(absl::Seconds(60));
  ASSERT_TRUE(healthy.ok()) << healthy << "\n" << cluster.Logs();
  absl::StatusOr<v1::ClusterMap> map = cluster.GetMap();
  ASSERT_TRUE(map.ok()) << map.status();
  const int controller = cluster.IndexOf(map->controller());
  ASSERT_GE(controller, 0) << map->controller();
  const int other = (controller + 1) % cluster.size();
  const std::string other_address = cluster.ControlAddresses()[other];
  const std::string controller_address = cluster.ControlAddresses()[controller];

  // An operator's request to any node: forwarded to the controller.
  grpc::Status s = DryRunRebalance(other_address, /*marked_forwarded=*/false);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // The controller answers a forwarded request itself.
  s = DryRunRebalance(controller_address, /*marked_forwarded=*/true);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // A forwarded request at a node that does not lead goes no further.
  s = DryRunRebalance(other_address, /*marked_forwarded=*/true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("forwarded"));
  EXPECT_THAT(s.error_message(), HasSubstr(map->controller()));
}

}  // namespace
}  // namespace testing
}  // namespace kvstore
