// Copyright 2026 The kvstore Authors.

#include "server/cluster/membership/cluster_options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace {

using ::testing::HasSubstr;

ClusterOptions Valid() {
  ClusterOptions o;
  o.etcd_endpoints = {"127.0.0.1:2379"};
  return o;
}

TEST(ClusterOptions, DefaultsMatchTheFlagTable) {
  ClusterOptions o;
  EXPECT_FALSE(o.enabled());
  EXPECT_EQ(o.cluster_name, "kvstore");
  EXPECT_EQ(o.replicas, 2u);
  EXPECT_EQ(o.min_nodes(), 2u);
  EXPECT_EQ(o.member_ttl, absl::Seconds(3));
  EXPECT_EQ(o.fence_margin, absl::Milliseconds(500));
  EXPECT_EQ(o.replication_timeout, absl::Seconds(1));
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_TRUE(Valid().Validate().ok());
}

TEST(ClusterOptions, ParsesEndpoints) {
  auto eps = ParseEtcdEndpoints("127.0.0.1:2379, http://etcd-2:2380");
  ASSERT_TRUE(eps.ok()) << eps.status();
  EXPECT_THAT(*eps, ::testing::ElementsAre("127.0.0.1:2379", "etcd-2:2380"));
  EXPECT_TRUE(ParseEtcdEndpoints("")->empty());
  for (const char* bad : {"localhost", "host:", ":2379", "h:0", "h:70000", "h:x", "a:1,,b:2"}) {
    auto r = ParseEtcdEndpoints(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--etcd: bad endpoint")) << bad;
  }
}

TEST(ClusterOptions, RefusesValuesThatCannotWork) {
  auto expect_bad = [](ClusterOptions o, const char* flag) {
    absl::Status s = o.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_THAT(std::string(s.message()), HasSubstr(flag));
  };
  ClusterOptions o = Valid();
  o.replicas = 0;
  expect_bad(o, "--replicas");
  o.replicas = 4;
  expect_bad(o, "--replicas");
  o = Valid();
  o.replicas = 3;
  o.cluster_min_nodes = 2;
  expect_bad(o, "--cluster_min_nodes");
  o = Valid();
  o.member_ttl = absl::Milliseconds(500);
  expect_bad(o, "--member_ttl");
  o = Valid();
  o.fence_margin = absl::Seconds(2);  // 2/3 of 3s: no room for a keepalive
  expect_bad(o, "--fence_margin");
  o = Valid();
  o.replication_timeout = absl::ZeroDuration();
  expect_bad(o, "--replication_timeout");
  o = Valid();
  o.cluster_name = "a/b";
  expect_bad(o, "--cluster_name");
  o = Valid();
  o.node_id = "";
  EXPECT_TRUE(o.Validate().ok());  // empty: the default is made later
  o.node_id = "n 1";
  expect_bad(o, "--node_id");
  o = Valid();
  o.advertise_host = "0.0.0.0";
  expect_bad(o, "--advertise_host");
}

// The in-sync floor: R by default (1 for R=1), or 1..R as given.
TEST(ClusterOptions, MinInsyncReplicasDefaultsToTwoCopiesAndStaysWithin1ToR) {
  ClusterOptions o = Valid();
  EXPECT_EQ(o.min_insync(), 2u);
  o.replicas = 3;
  EXPECT_EQ(o.min_insync(), 2u);  // R=3 keeps writing through one lost replica
  o.replicas = 1;
  EXPECT_EQ(o.min_insync(), 1u);
  o.replicas = 3;
  o.min_insync_replicas = 2;
  EXPECT_EQ(o.min_insync(), 2u);
  EXPECT_TRUE(o.Validate().ok());
  o.min_insync_replicas = 4;
  absl::Status s = o.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--min_insync_replicas=4 must be between 1 and --replicas=3"),
            std::string::npos)
      << s;
}

TEST(ClusterOptions, AdvertisesTheListenAddressOrTheHostName) {
  ClusterOptions o = Valid();
  EXPECT_EQ(AdvertiseHost(o, "10.0.0.5"), "10.0.0.5");
  EXPECT_NE(AdvertiseHost(o, "0.0.0.0"), "0.0.0.0");
  EXPECT_FALSE(AdvertiseHost(o, "0.0.0.0").empty());
  o.advertise_host = "kv-1";
  EXPECT_EQ(AdvertiseHost(o, "0.0.0.0"), "kv-1");
}

}  // namespace
}  // namespace server
}  // namespace kvstore
