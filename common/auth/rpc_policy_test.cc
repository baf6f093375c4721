// Copyright 2026 The kvstore Authors.
//
// The policy table against the services as the .proto files declare them:
// a method without a rule, or a server-to-server / admin method a data
// client may call, fails here.

#include "common/auth/rpc_policy.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/kv_cluster.grpc.pb.h"
#include "proto/kv_control.grpc.pb.h"

namespace kvstore {
namespace auth {
namespace {

// The services as compiled in: found through a message of each .proto, which
// also makes the linker keep the generated code.
const google::protobuf::ServiceDescriptor* Service(const char* name) {
  const google::protobuf::ServiceDescriptor* s =
      absl::string_view(name) == "kvstore.v1.KvControl"
          ? v1::HandshakeRequest::descriptor()->file()->FindServiceByName("KvControl")
          : v1::ReplicateRequest::descriptor()->file()->FindServiceByName("KvCluster");
  EXPECT_NE(s, nullptr) << name;
  return s;
}

std::string MethodName(const google::protobuf::MethodDescriptor* m) {
  return absl::StrCat(m->service()->full_name(), "/", m->name());
}

TEST(RpcPolicyTest, EveryMethodOfBothServicesHasARule) {
  for (const char* name : {"kvstore.v1.KvControl", "kvstore.v1.KvCluster"}) {
    const google::protobuf::ServiceDescriptor* s = Service(name);
    ASSERT_NE(s, nullptr);
    ASSERT_GT(s->method_count(), 0);
    for (int i = 0; i < s->method_count(); ++i) {
      EXPECT_TRUE(RpcPermission(MethodName(s->method(i))).has_value())
          << MethodName(s->method(i)) << " has no row in common/auth/rpc_policy.cc";
    }
  }
}

TEST(RpcPolicyTest, DataClientsReachOnlyTheMapOnKvCluster) {
  const google::protobuf::ServiceDescriptor* s = Service("kvstore.v1.KvCluster");
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < s->method_count(); ++i) {
    const std::string m = MethodName(s->method(i));
    std::optional<Permission> p = RpcPermission(m);
    ASSERT_TRUE(p.has_value()) << m;
    const bool map = s->method(i)->name() == "GetClusterMap";
    EXPECT_EQ(Allows(Role::kRead, *p), map) << m;
    EXPECT_EQ(Allows(Role::kWrite, *p), map) << m;
  }
}

TEST(RpcPolicyTest, PeersAreNeitherDataClientsNorAdmins) {
  for (const char* m : {"kvstore.v1.KvControl/Get", "kvstore.v1.KvControl/Put",
                        "kvstore.v1.KvControl/Delete", "kvstore.v1.KvControl/Scan",
                        "kvstore.v1.KvCluster/Failover", "kvstore.v1.KvCluster/AcceptLoss"}) {
    EXPECT_FALSE(Allows(Role::kPeer, *RpcPermission(m))) << m;
  }
  // What a primary's RDMA replica link needs on the backup.
  for (const char* m : {"kvstore.v1.KvControl/Handshake", "kvstore.v1.KvControl/ConnectQp",
                        "kvstore.v1.KvControl/GrantLease", "kvstore.v1.KvControl/RenewLease",
                        "kvstore.v1.KvControl/ReleaseLease"}) {
    EXPECT_TRUE(Allows(Role::kPeer, *RpcPermission(m))) << m;
  }
}

TEST(RpcPolicyTest, ReadOnlyClientsCannotWriteOrLease) {
  for (const char* m : {"kvstore.v1.KvControl/Put", "kvstore.v1.KvControl/Delete",
                        "kvstore.v1.KvControl/GrantLease"}) {
    EXPECT_FALSE(Allows(Role::kRead, *RpcPermission(m))) << m;
    EXPECT_TRUE(Allows(Role::kWrite, *RpcPermission(m))) << m;
  }
  EXPECT_TRUE(Allows(Role::kRead, *RpcPermission("kvstore.v1.KvControl/Get")));
}

TEST(RpcPolicyTest, UnknownMethodHasNoRule) {
  EXPECT_FALSE(RpcPermission("kvstore.v1.KvCluster/NoSuchThing").has_value());
}

}  // namespace
}  // namespace auth
}  // namespace kvstore
