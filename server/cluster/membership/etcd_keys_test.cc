// Copyright 2026 The kvstore Authors.

#include "server/cluster/membership/etcd_keys.h"

#include "gtest/gtest.h"

namespace kvstore {
namespace server {
namespace etcd_keys {
namespace {

TEST(EtcdKeys, NamesKeysUnderTheClusterPrefix) {
  EXPECT_EQ(MemberKey("c1", "n2"), "/kvstore/c1/members/n2");
  EXPECT_EQ(ControllerKey("c1"), "/kvstore/c1/controller");
  EXPECT_EQ(MapKey("c1"), "/kvstore/c1/map");
  EXPECT_EQ(NodeIdOfMemberKey("c1", "/kvstore/c1/members/n2"), "n2");
  EXPECT_EQ(NodeIdOfMemberKey("c1", "/kvstore/c2/members/n2"), "");
}

TEST(EtcdKeys, MapsRoundTripAsReadableJson) {
  v1::ClusterMap map;
  map.set_epoch(12);
  map.set_cluster_name("c1");
  v1::Shard* s = map.add_shards();
  s->set_shard_id(3);
  s->add_replicas("n1");
  std::string json = EncodeMap(map);
  EXPECT_NE(json.find("\"replicas\""), std::string::npos) << json;
  auto back = DecodeMap(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->epoch(), 12u);
  EXPECT_EQ(back->shards(0).replicas(0), "n1");
  EXPECT_EQ(DecodeMap("{not json").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(DecodeNode("{\"node_id\":\"x\",\"future_field\":1}").ok());
}

}  // namespace
}  // namespace etcd_keys
}  // namespace server
}  // namespace kvstore
